"""``manage.py scan_fresh_ingest [PATH] [--keep] [--unsnapshotted]``: what the staleness scan
says right after a fresh ingest — the first thing a new team sees.

Ingests ``PATH`` (default: this repository, what ``make run`` puts in the demo organization)
into a throwaway organization as ``make run``'s bootstrap does (a path job run inline), runs the
scan as a dry run (nobody is nudged) and prints every flag with its reasons and the share of
fragments flagged. ``--unsnapshotted`` also lists what the contradiction detector says about
lineage pairs one run wrote together, which the scan rightly skips (see docs/governance.md).
The organization is deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import shutil
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.models import Organization, Repository
from accounts.permissions import SYSTEM
from contexts.governance.staleness import lineage_findings, scan
from contexts.indexes.indexing import index_path
from contexts.models import Fragment, JobState
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource


class Command(BaseCommand):
    help = "Ingest a directory into a throwaway organization and show the staleness scan's flags."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", nargs="?", default=str(settings.BASE_DIR))
        parser.add_argument("--keep", action="store_true", help="keep the throwaway org")
        parser.add_argument("--unsnapshotted", action="store_true",
                            help="also run the detector on pairs one ingestion wrote together")

    def handle(self, *args, path: str, keep: bool, unsnapshotted: bool, **options) -> None:
        org = Organization.objects.create(slug=f"stale-check-{int(time.time())}",
                                          name="staleness check (throwaway)")
        repo = Repository.objects.create(org=org, slug="contexts", name="fresh ingest")
        try:
            started = time.perf_counter()
            job = ingestion.submit(SYSTEM, SubmitSource(scope=repo.scope, path=path),
                                   queue=False)
            job = ingestion.run_inline(job)
            if job is None or job.state != JobState.DONE:
                raise CommandError(f"ingestion did not finish: {job and job.errors[:3]}")
            self.stdout.write(f"ingested {path}: {job.files_done} files, "
                              f"{job.fragments_created} fragments "
                              f"({time.perf_counter() - started:.0f} s)")
            [report] = scan(None, [org], nudge=False)
            share = len(report.stale) / report.scanned if report.scanned else 0.0
            reasons = ", ".join(f"{code} {n}" for code, n in sorted(report.by_reason.items()))
            self.stdout.write(f"{len(report.stale)} of {report.scanned} active fragments "
                              f"flagged ({share:.2%})" + (f": {reasons}" if reasons else ""))
            self._flags(report.stale)
            if unsnapshotted:
                self._unsnapshotted(org, report.now)
        finally:
            if keep:
                self.stdout.write(f"kept organization {org.slug}")
            else:
                org_id = org.pk
                org.delete()
                shutil.rmtree(index_path(org_id), ignore_errors=True)

    def _flags(self, stale: dict) -> None:
        fragments = Fragment.objects.in_bulk(list(stale))
        for pk, reasons in sorted(stale.items()):
            fragment = fragments[pk]
            self.stdout.write(f"- {fragment.public_id} “{fragment.title[:70]}” ({fragment.kind})")
            for reason in reasons:
                self.stdout.write(f"    {reason.code}: {reason.detail}")

    def _unsnapshotted(self, org: Organization, now) -> None:
        findings = list(lineage_findings(org, now, snapshots=False))
        self.stdout.write(f"detector on lineage pairs written together: {len(findings)} "
                          "findings (not flagged by the scan)")
        for older, newer, finding in findings:
            self.stdout.write(f"- {older.public_id} “{older.title[:60]}” vs {newer.public_id} "
                              f"“{newer.title[:60]}” {finding.relation.describe()}")
            for difference in finding.differences:
                self.stdout.write(f"    {difference.describe()}")
