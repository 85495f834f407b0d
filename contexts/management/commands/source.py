"""``manage.py source``: git repositories an organization follows (``docs/sources.md``).

    source add --git URL_OR_PATH --org SLUG --repo SLUG [--branch B] [--include P]...
               [--exclude P]... [--interval SECONDS] [--web-url TEMPLATE]
    source sync ID [--wait] [--full]
    source list --org SLUG
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from accounts.permissions import SYSTEM
from contexts.services.errors import InvalidOperation
from contexts.usecases import sources
from contexts.usecases.errors import Refused


class Command(BaseCommand):
    help = "Follow a git repository into a repository scope, sync it, list what is followed."

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="add|sync|list")
        add = actions.add_parser("add", help="follow a git repository (prints the source id)")
        add.add_argument("--git", required=True, metavar="URL_OR_PATH",
                         help="any URL git can clone (https, ssh, git) or a local path")
        add.add_argument("--org", required=True)
        add.add_argument("--repo", required=True, help="the repository scope it ingests into")
        add.add_argument("--branch", default="main")
        add.add_argument("--include", action="append", default=[], metavar="PATTERN",
                         help="gitignore-style pattern of files to ingest (repeatable; "
                              "default: every file the ingestion rules take)")
        add.add_argument("--exclude", action="append", default=[], metavar="PATTERN",
                         help="gitignore-style pattern of files to leave out (repeatable)")
        add.add_argument("--interval", type=int, default=900, metavar="SECONDS",
                         help="how often beat syncs it (default 900)")
        add.add_argument("--web-url", default="", metavar="TEMPLATE",
                         help="permalink template for citations, e.g. https://github.com/o/r/"
                              "blob/{commit}/{path}#L{start_line}-L{end_line}")
        sync = actions.add_parser("sync", help="sync a source now")
        sync.add_argument("source", metavar="ID")
        sync.add_argument("--wait", action="store_true",
                          help="run the sync in this process and print what it did "
                               "(otherwise it is queued for a worker)")
        sync.add_argument("--full", action="store_true",
                          help="reconcile the whole tree, not only the diff (after changing "
                               "the source's patterns)")
        listing = actions.add_parser("list", help="the organization's sources")
        listing.add_argument("--org", required=True)

    def handle(self, *args, action: str, **options) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except (InvalidOperation, Refused) as exc:
            raise CommandError(str(exc)) from exc

    def _add(self, *, git: str, org: str, repo: str, branch: str, include: list[str],
             exclude: list[str], interval: int, web_url: str, **_) -> None:
        source = sources.add_source(SYSTEM, sources.AddGitSource(
            org=org, repo=repo, url=git, branch=branch, include=include, exclude=exclude,
            interval_seconds=interval, web_url_template=web_url))
        self.stdout.write(source.public_id)

    def _sync(self, *, source: str, wait: bool, full: bool, **_) -> None:
        started = time.monotonic()
        result = sources.sync_source(SYSTEM, sources.SyncSource(source=source, wait=wait,
                                                                full=full))
        if not wait:
            self.stdout.write(f"queued a sync of {source}; `source list` shows its state")
            return
        if result is None:
            raise CommandError(f"source {source} is gone")
        self.stdout.write(result.line())
        self.stdout.write(f"  {result.files} files, {result.fragments} fragments"
                          f"{', whole tree' if result.full else ''}; "
                          f"{time.monotonic() - started:.2f}s elapsed")
        if result.error:
            raise CommandError(f"source {source} is failing")

    def _list(self, *, org: str, **_) -> None:
        now = timezone.now()
        for source in sources.list_sources(SYSTEM, sources.ListSources(org=org)):
            due = ("due" if source.next_sync_at and source.next_sync_at <= now
                   else f"next {source.next_sync_at:%Y-%m-%d %H:%M}" if source.next_sync_at
                   else "not scheduled")
            self.stdout.write(
                f"{source.public_id}  {source.repository.slug}  {source.state}  "
                f"{source.display_url} ({source.branch})  "
                f"{(source.last_commit or '-')[:12]}  {source.files_count} files  "
                f"{source.fragments_count} fragments  {due}")
            if source.last_error:
                self.stdout.write(f"  last error: {source.last_error}")
