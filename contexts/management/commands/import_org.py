"""``manage.py import_org ARCHIVE [--as SLUG] [--name NAME] [--no-wait]``: restore an archive
written by ``export_org`` as a new organization, in one transaction (a refused import writes
nothing).

Under ``--as`` without ``--name`` the organization is named as in the archive followed by the
new slug in parentheses (the organization switcher shows names). The archive carries
organization roles only: the command says how many repository roles and other per-object
grants stayed behind, to be given again on the Members page.

Users are matched by username; a missing one is created inactive, without a password. By
default the command embeds the fragments and brings this node's lexical index up to date
before it returns, so the organization is searchable then; ``--no-wait`` leaves both to the
worker and the index followers."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.permissions import SYSTEM
from contexts.services.errors import InvalidOperation
from contexts.usecases import portability


class Command(BaseCommand):
    help = "Restore an organization from an export_org archive (under a new slug with --as)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("archive", help="an archive written by export_org")
        parser.add_argument("--as", dest="slug", default=None,
                            help="the new organization's slug (default: the archive's)")
        parser.add_argument("--name", default=None,
                            help="the new organization's display name (default: the "
                                 "archive's; under --as, the archive's followed by the new "
                                 "slug in parentheses)")
        parser.add_argument("--no-wait", dest="wait", action="store_false",
                            help="return once the rows are committed; the worker embeds and "
                                 "the followers index them shortly after")

    def handle(self, *args, archive: str, slug: str | None, name: str | None, wait: bool,
               **options) -> None:
        command = portability.ImportOrg(archive=Path(archive), slug=slug, wait=wait, name=name)
        try:
            restored = portability.import_org(SYSTEM, command)
        except InvalidOperation as exc:
            where = f"{exc.field}: " if exc.field else ""
            raise CommandError(f"import refused, nothing written — {where}{exc}") from None
        counts = ", ".join(f"{name} {n}" for name, n in restored.counts.items() if n)
        self.stdout.write(f"imported {restored.org.slug} “{restored.org.name}” "
                          f"({restored.org.public_id}): {counts}")
        if restored.created_users:
            self.stdout.write(f"created {len(restored.created_users)} inactive user(s) without "
                              f"a password: {', '.join(restored.created_users)}")
        self.stdout.write(_grants_line(restored.dropped_grants))
        if restored.renamed:
            self.stdout.write(f"{restored.renamed} public id(s) were taken here and got new ones")
        self.stdout.write("searchable now" if wait else
                          "embedding and indexing are queued (the worker and index followers)")


def _grants_line(dropped: int | None) -> str:
    why = ("the archive carries organization roles only (docs/export-format.md); give "
           "repository roles again on the Members page")
    if dropped is None:
        return f"repository roles were not imported: {why} (this archive does not say how " \
               "many there were)"
    if dropped == 0:
        return "repository roles: none in the archive's organization, none dropped"
    return (f"repository roles were not imported: {dropped} object permission grant"
            f"{'s' if dropped != 1 else ''} (repository roles and other per-object roles) "
            f"stayed behind — {why}")
