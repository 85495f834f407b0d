"""``manage.py scan_secrets [PATH …]``: the secret scan ingestion runs, over files on disk.

Without paths it scans this checkout's tracked files (``git ls-files``) — the check that the
repository Contexts ingests into its demo organization holds no secret, and that the scanner
raises no false finding on it (``tests/secrets/test_repository_scan.py``). Prints one line per
finding, ``path:line: kind`` (never the value), then the count; ``--fail`` exits 1 on any.

``manage.py scan_secrets --stored [--org ORG] [--dry-run]`` scans the stored knowledge instead:
the current title and body of every fragment not retired, of one organization or all, and
passes each that holds a secret through the one door again — a new, redacted version, or
retired under policy ``refuse`` (``contexts.usecases.stored_secrets``; run it once after
upgrading to a release that scans). Prints ``public id: kind on line N, …`` per fragment and
what became of it, then the counts; ``--dry-run`` changes nothing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from contexts.secret_scan import Finding, scan
from contexts.usecases.stored_secrets import rescan_stored

BINARY_PROBE = 8192


def tracked_files(root: Path) -> list[Path]:
    listing = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True,
                             check=True).stdout.decode()
    return [root / name for name in listing.split("\0") if name]


def scan_path(path: Path, *, max_bytes: int) -> list[Finding]:
    """A file's findings, as ingestion would see them; binary and oversized files, which
    ingestion skips, are skipped here too."""
    try:
        if not path.is_file() or path.stat().st_size > max_bytes:
            return []
        raw = path.read_bytes()
    except OSError:
        return []
    if b"\0" in raw[:BINARY_PROBE]:
        return []
    return scan(raw.decode("utf-8", errors="replace"), filename=path.name)


class Command(BaseCommand):
    help = "Scan files (default: this checkout's tracked files) for secrets; print path:line."

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="*", help="files or directories (default: tracked "
                            "files of this checkout)")
        parser.add_argument("--fail", action="store_true", help="exit 1 if anything is found")
        parser.add_argument("--stored", action="store_true", help="scan the stored fragments "
                            "instead, and redact (or retire, policy refuse) those with secrets")
        parser.add_argument("--org", help="with --stored: one organization (slug or public "
                            "id); default all")
        parser.add_argument("--dry-run", action="store_true",
                            help="with --stored: report only, change nothing")

    def handle(self, *args, paths: list[str], fail: bool = False, stored: bool = False,
               org: str | None = None, dry_run: bool = False, **options) -> None:
        if stored:
            if paths:
                raise CommandError("--stored scans the stored fragments: give no paths")
            self.stored(org, dry_run=dry_run, fail=fail)
            return
        if org or dry_run:
            raise CommandError("--org and --dry-run go with --stored")
        root = Path(settings.BASE_DIR)
        files: list[Path] = []
        for name in paths:
            path = Path(name)
            files.extend(sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir()
                         else [path])
        if not paths:
            files = tracked_files(root)
        count = 0
        for path in files:
            for finding in scan_path(path, max_bytes=settings.INGEST_MAX_FILE_BYTES):
                shown = path.relative_to(root) if path.is_relative_to(root) else path
                self.stdout.write(f"{shown}:{finding.line}: {finding.kind}")
                count += 1
        self.stdout.write(f"{count} finding{'s' if count != 1 else ''} in {len(files)} files")
        if fail and count:
            raise CommandError(f"{count} secret finding(s)")

    def stored(self, org: str | None, *, dry_run: bool, fail: bool) -> None:
        organization = None
        if org:
            organization = find_org(org)
            if organization is None:
                raise CommandError(f"no organization {org!r}")
        report = rescan_stored(organization, dry_run=dry_run)
        for hit in report.fragments:
            self.stdout.write(f"{hit} [{hit.org}: {hit.outcome}]")
        self.stdout.write(
            f"{report.scanned} fragments scanned, {report.with_findings} with secrets: "
            f"{report.redacted} redacted, {report.retired} retired"
            + (" (dry run: nothing changed)" if dry_run else ""))
        if report.redacted or report.retired:
            self.stdout.write("Earlier versions still hold these secrets: rotate them.")
        if fail and report.with_findings:
            raise CommandError(f"{report.with_findings} fragment(s) held secrets")
