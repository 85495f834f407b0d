"""``manage.py ingest (PATH | --archive FILE.zip) --org SLUG [--repo SLUG] [--persona SLUG]
[--context NAME] [--owner USERNAME] [--include-untracked] [--wait | --inline]``.

``--archive``: a documentation export (Confluence space, Notion, or a plain zip of Markdown,
HTML and text) uploaded as an upload job would be — checked, stored in the uploads storage and
expanded by the worker (docs/ingestion.md, "Documentation exports")."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_in_org, find_org
from accounts.models import Persona, Repository
from accounts.permissions import SYSTEM
from contexts.models import Context, IngestionJob, JobState
from contexts.services.errors import InvalidOperation
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource


class Command(BaseCommand):
    help = "Ingest a directory, git checkout or file into an organization (as a Celery job)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", nargs="?", default="")
        parser.add_argument("--archive", metavar="FILE.zip",
                            help="a zip of documentation (a Confluence space or Notion export, "
                                 "or Markdown/HTML/text in folders) to upload instead of a path")
        parser.add_argument("--org", required=True)
        parser.add_argument("--repo")
        parser.add_argument("--persona")
        parser.add_argument("--context", help="slug of a context to put the fragments in")
        parser.add_argument("--owner", help="username owning fragments without a front-matter "
                                            "owner")
        parser.add_argument("--include-untracked", action="store_true",
                            help="in a git work tree, also ingest files git does not track "
                                 "(those .gitignore does not exclude); by default only "
                                 "tracked files are read")
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--wait", action="store_true",
                          help="queue the job and show its progress until it ends")
        mode.add_argument("--inline", action="store_true",
                          help="run the job in this process instead of on a worker")

    def handle(self, *args, path: str, org: str, repo: str | None, persona: str | None,
               context: str | None, owner: str | None, wait: bool, inline: bool,
               include_untracked: bool = False, archive: str | None = None,
               **options) -> None:
        if bool(path) == bool(archive):
            raise CommandError("name a PATH to ingest or an --archive FILE.zip to upload")
        organization = find_org(org)
        if organization is None:
            raise CommandError(f"no organization {org!r}")
        scope = organization.scope
        if repo:
            repository = find_in_org(Repository, organization, repo)
            if repository is None:
                raise CommandError(f"no repository {repo!r} in {organization.slug}")
            scope = repository.scope
        if persona:
            found = find_in_org(Persona, organization, persona)
            if found is None:
                raise CommandError(f"no persona {persona!r} in {organization.slug}")
            scope = found.scope
        bundle = None
        if context:
            bundle = find_in_org(Context, organization, context)
            if bundle is None:
                raise CommandError(f"no context {context!r} in {organization.slug}")
        owner_user = None
        if owner:
            owner_user = get_user_model().objects.filter(username=owner).first()
            if owner_user is None:
                raise CommandError(f"no user {owner!r}")
        if archive:
            command = SubmitSource(scope=scope, files=[_archive_file(archive)], context=bundle,
                                   owner=owner_user)
        else:
            command = SubmitSource(scope=scope, path=path, context=bundle, owner=owner_user,
                                   include_untracked=include_untracked)
        try:
            job = ingestion.submit(SYSTEM, command, queue=not inline)
        except InvalidOperation as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"job {job.public_id}: ingesting {path or archive} into {scope}")
        started = time.monotonic()
        if inline:
            job = ingestion.run_inline(job)
        else:
            if not wait:
                self.stdout.write("queued; follow it with GET /api/jobs/" + job.public_id)
                return
            job = self._follow(job)
        self._report(job, time.monotonic() - started)

    def _follow(self, job: IngestionJob) -> IngestionJob:
        while True:
            job.refresh_from_db()
            self._bar(job)
            if job.state in (JobState.DONE, JobState.FAILED):
                sys.stdout.write("\n")
                return job
            time.sleep(0.5)

    def _bar(self, job: IngestionJob) -> None:
        width = 30
        filled = int(job.progress * width)
        sys.stdout.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {job.files_done}/"
                         f"{job.files_total} files, {job.fragments_created} new fragments")
        sys.stdout.flush()

    def _report(self, job: IngestionJob, seconds: float) -> None:
        self.stdout.write(
            f"{job.state}: {job.files_done} files, {job.fragments_created} created, "
            f"{job.fragments_updated} updated, {job.fragments_unchanged} unchanged, "
            f"{job.fragments_retired} retired, {job.duplicates_collapsed} near-duplicates "
            f"collapsed, {len(job.skipped)} skipped, {len(job.errors)} errors in {seconds:.1f}s"
        )
        reasons = Counter(entry["reason"] for entry in job.skipped)
        if reasons:  # the exclusions at a glance; every file is on the job's page and API
            self.stdout.write("  skipped: " + ", ".join(
                f"{count} {reason}" for reason, count in reasons.most_common()))
        for error in job.errors:
            self.stderr.write(f"  error {error['path']}: {error['reason']}")
        if job.state == JobState.FAILED:
            raise CommandError("the job failed")
        if job.errors:
            # A job that finished with files it could not ingest is not a success: a script
            # (`make`, CI, a deploy hook) must see it without parsing the summary.
            failed = len(job.errors)
            raise CommandError(f"{failed} of {job.files_total} "
                               f"file{'s' if job.files_total != 1 else ''} failed to ingest")


def _archive_file(name: str) -> ContentFile:
    """The operator's zip, read whole (bounded: at most CONTEXTS_ARCHIVE_MAX_BYTES is read,
    one byte more is refused as too large by the archive check)."""
    path = Path(name)
    if path.suffix.lower() != ".zip":
        raise CommandError(f"--archive: {name}: not a .zip file")
    try:
        with path.open("rb") as file:
            raw = file.read(settings.ARCHIVE_MAX_BYTES + 1)
    except OSError as exc:
        raise CommandError(f"--archive: {name}: {exc.strerror}") from exc
    return ContentFile(raw, name=path.name)
