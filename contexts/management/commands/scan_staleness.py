"""``manage.py scan_staleness [--org SLUG] [--now ISO] [--dry-run]``: the daily staleness scan
(also run by Celery beat), plus the dedup review with ``--dedup``."""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from accounts.models import Organization
from contexts.usecases.maintenance import propose_duplicates, scan_staleness


class Command(BaseCommand):
    help = "Find stale fragments, nudge their owners, escalate overdue nudges."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--org", help="one organization (slug or public id); default all")
        parser.add_argument("--now", help="run as of this ISO timestamp (replays, tests)")
        parser.add_argument("--dry-run", action="store_true",
                            help="report stale fragments without nudging anyone")
        parser.add_argument("--dedup", action="store_true",
                            help="also propose near-duplicates for review")
        parser.add_argument("--verbose-reasons", action="store_true",
                            help="print every stale fragment with its reasons")

    def handle(self, *args, org: str | None, now: str | None, dry_run: bool, dedup: bool,
               verbose_reasons: bool, **options) -> None:
        orgs = Organization.objects.order_by("pk")
        if org:
            found = find_org(org)
            if found is None:
                raise CommandError(f"no organization {org!r}")
            orgs = [found]
        clock = None
        if now:
            try:
                clock = dt.datetime.fromisoformat(now)
            except ValueError as exc:
                raise CommandError(f"--now: {exc}") from None
            if clock.tzinfo is None:
                clock = clock.replace(tzinfo=dt.UTC)
        for report in scan_staleness(clock, orgs, nudge=not dry_run):
            reasons = ", ".join(f"{code} {n}" for code, n in sorted(report.by_reason.items()))
            self.stdout.write(
                f"{report.org.slug}: {len(report.stale)} of {report.scanned} stale"
                + (f" ({reasons})" if reasons else "")
                + ("" if dry_run else f"; {report.nudges_opened} nudges opened, "
                   f"{report.nudges_escalated} escalated, {report.unroutable} unroutable"))
            if verbose_reasons:
                from contexts.models import Fragment

                names = dict(Fragment.objects.filter(pk__in=list(report.stale))
                             .values_list("pk", "public_id"))
                for pk, reasons in sorted(report.stale.items()):
                    for reason in reasons:
                        self.stdout.write(f"  {names[pk]} {reason.code}: {reason.detail}")
            if dedup and not dry_run:

                self.stdout.write(f"  dedup: {propose_duplicates(report.org, clock)}")
