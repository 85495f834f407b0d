"""``manage.py ownership_coverage PATH --org SLUG [--repo SLUG] [--json]``: who would own the
fragments of a folder if it were ingested now — the share with a member owner, where the owners
come from (CODEOWNERS, front matter, git history, the tech lead) and how many each owns —
measured by the walk, chunker and owner chain a path job uses, without ingesting anything
(``contexts.ingestion.owner_coverage``; docs/governance.md, "Ownership")."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_in_org, find_org
from accounts.models import Repository
from contexts.ingestion import owner_coverage


class Command(BaseCommand):
    help = ("Measure the ownership coverage a path job would give a folder's fragments, "
            "without ingesting it.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", help="the folder (a git work tree: tracked files only)")
        parser.add_argument("--org", required=True, help="the organization (slug or id)")
        parser.add_argument("--repo", help="the repository (slug or id) the folder goes into")
        parser.add_argument("--include-untracked", action="store_true")
        parser.add_argument("--json", action="store_true", dest="as_json",
                            help="print the numbers as JSON")

    def handle(self, *args, path: str, org: str, repo: str | None, include_untracked: bool,
               as_json: bool, **options) -> None:
        organization = find_org(org)
        if organization is None:
            raise CommandError(f"no organization {org!r}")
        scope, repository = organization.scope, None
        if repo:
            repository = find_in_org(Repository, organization, repo)
            if repository is None:
                raise CommandError(f"no repository {repo!r} in {organization.slug}")
            scope = repository.scope
        root = Path(path)
        if not root.is_dir():
            raise CommandError(f"{path} is not a folder")
        found = owner_coverage.measure(organization, scope, root, repository=repository,
                                       max_bytes=settings.INGEST_MAX_FILE_BYTES,
                                       include_untracked=include_untracked)
        if as_json:
            self.stdout.write(_json(found))
            return
        self.stdout.write(
            f"{found.files} files, {found.fragments} fragments: {found.member_owned} "
            f"({found.share:.1%}) with a member owner")
        for source, count in found.by_source.most_common():
            self.stdout.write(f"  from {source}: {count} ({found.share_from(source):.1%}), "
                              f"{found.files_by_source[source]} files")
        for name, count in found.by_owner.most_common():
            self.stdout.write(f"  {name or '(nobody)'}: {count}")
        for warning in found.warnings:
            self.stdout.write(self.style.WARNING(
                f"  warning: {warning['path']}: {warning['reason']}"))
        for unreadable in found.unreadable:
            self.stdout.write(self.style.WARNING(f"  could not chunk {unreadable}"))


def _json(found: owner_coverage.Coverage) -> str:
    return json.dumps({
        "files": found.files, "fragments": found.fragments,
        "member_owned": found.member_owned, "share": round(found.share, 4),
        "by_source": dict(found.by_source), "files_by_source": dict(found.files_by_source),
        "by_owner": dict(found.by_owner), "warnings": found.warnings,
        "unreadable": found.unreadable}, sort_keys=True)
