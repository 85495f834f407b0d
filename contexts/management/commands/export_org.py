"""``manage.py export_org --org SLUG OUT``: write an organization to one archive (a
gzip-compressed tar, ``docs/export-format.md``), for ``import_org`` here or elsewhere."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.permissions import SYSTEM
from contexts.usecases import portability
from contexts.usecases.errors import NotVisible


class Command(BaseCommand):
    help = "Export an organization (fragments with every version, pins, links, nudges, audit, " \
           "members by username) to one archive; vectors and indexes are left out (derived)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--org", required=True, help="the organization's slug or public id")
        parser.add_argument("out", help="the archive to write, e.g. /tmp/acme.tar.gz")

    def handle(self, *args, org: str, out: str, **options) -> None:
        target = Path(out)
        if target.is_dir():
            raise CommandError(f"out: {out} is a directory; name the archive file")
        if not target.parent.is_dir():
            raise CommandError(f"out: directory {target.parent} does not exist")
        # Written beside the target and renamed: a failed export leaves no half archive.
        handle, partial = tempfile.mkstemp(prefix=".export-", dir=target.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                counts = portability.export_org(SYSTEM, portability.ExportOrg(org=org), stream)
            os.replace(partial, target)
        except NotVisible:
            raise CommandError(f"org: no organization {org!r}") from None
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        summary = ", ".join(f"{n.removesuffix('.jsonl')} {c}" for n, c in counts.items() if c)
        self.stdout.write(f"exported {org} to {target} ({target.stat().st_size} bytes): "
                          f"{summary}")
