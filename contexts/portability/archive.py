"""The archive an organization is exported to: a gzip-compressed tar holding ``manifest.json``
and one JSON Lines file per entity (``docs/export-format.md``).

Reading is bounded before anything is decompressed into memory: the archive's size, the number
of members, each member's size and their total; a member must be a regular file with one of the
names this format defines (so a name like ``../x`` or ``/etc/passwd`` is refused, never
extracted), listed in the manifest with its SHA-256.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from contexts.services.errors import InvalidOperation

FORMAT = "contexts-organization"
VERSION = 1
MANIFEST = "manifest.json"
# The manifest's ``left_out_counts`` key for the object permissions (django-guardian grants:
# repository roles and other per-object roles) the archive does not carry, counted at export.
GRANTS_LEFT_OUT = "object permissions"
# Every entity file, in the order an import reads them (a row refers only to earlier files').
ENTITY_FILES = (
    "organization.jsonl",
    "users.jsonl",
    "memberships.jsonl",
    "repositories.jsonl",
    "personas.jsonl",
    "sessions.jsonl",
    "contexts.jsonl",
    "subscriptions.jsonl",
    "documents.jsonl",
    "fragments.jsonl",
    "versions.jsonl",
    "pointers.jsonl",
    "pins.jsonl",
    "links.jsonl",
    "nudges.jsonl",
    "audit_events.jsonl",
    # Reserved for git sources (issue 24, the ``Source`` model): written and read once that
    # model exists; an archive of version 1 without it is complete.
    "sources.jsonl",
)
KNOWN_MEMBERS = frozenset({MANIFEST, *ENTITY_FILES})


@dataclasses.dataclass(frozen=True)
class Limits:
    """What an import reads at most (settings ``CONTEXTS_IMPORT_MAX_*``)."""

    archive_bytes: int
    member_bytes: int
    total_bytes: int
    members: int = len(KNOWN_MEMBERS)


class ArchiveRefused(InvalidOperation):
    """The archive cannot be imported; the message says why and ``field`` names the part."""

    def __init__(self, message: str, field: str = "archive") -> None:
        super().__init__(message, field=field)


# --- writing -----------------------------------------------------------------------------------
def jsonl(rows: Iterable[dict]) -> bytes:
    return b"".join(json.dumps(row, ensure_ascii=False, sort_keys=True,
                               separators=(",", ":")).encode() + b"\n" for row in rows)


def write_archive(out: IO[bytes], files: dict[str, bytes], manifest: dict[str, Any]) -> None:
    """``manifest.json`` first (a reader validates it before reading anything else), then the
    entity files in :data:`ENTITY_FILES` order."""
    manifest = {**manifest, "format": FORMAT, "version": VERSION, "files": {
        name: {"bytes": len(data), "rows": data.count(b"\n"),
               "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in files.items()}}
    now = int(time.time())
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in [(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True).encode()),
                           *((n, files[n]) for n in ENTITY_FILES if n in files)]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), now, 0o644
            tar.addfile(info, io.BytesIO(data))


# --- reading -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Archive:
    manifest: dict[str, Any]
    files: dict[str, bytes]

    def rows(self, name: str) -> Iterator[dict]:
        for number, line in enumerate(self.files.get(name, b"").splitlines(), start=1):
            try:
                row = json.loads(line)
            except ValueError:
                raise ArchiveRefused(f"{name} line {number} is not JSON", field=name) from None
            if not isinstance(row, dict):
                raise ArchiveRefused(f"{name} line {number} is not an object", field=name)
            yield row


def _shown(name: str) -> str:
    return repr(name if len(name) <= 120 else name[:120] + "…")


def _check_name(name: str) -> None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or "\\" in name or name.startswith("/"):
        raise ArchiveRefused(f"member name {_shown(name)} leaves the archive (absolute or '..')",
                             field="archive.members")
    if name not in KNOWN_MEMBERS:
        raise ArchiveRefused(f"unexpected member {_shown(name)}: this format holds only "
                             f"{', '.join(sorted(KNOWN_MEMBERS))}", field="archive.members")


def check_manifest(manifest: Any) -> dict[str, Any]:
    if not isinstance(manifest, dict):
        raise ArchiveRefused("manifest.json is not a JSON object", field="manifest")
    if manifest.get("format") != FORMAT:
        raise ArchiveRefused(f"manifest format is {manifest.get('format')!r}, not {FORMAT!r}",
                             field="manifest.format")
    version = manifest.get("version")
    if version != VERSION:
        raise ArchiveRefused(f"manifest version {version!r} is not supported (this instance "
                             f"reads version {VERSION})", field="manifest.version")
    files = manifest.get("files")
    if not isinstance(files, dict) or "organization.jsonl" not in files:
        raise ArchiveRefused("manifest lists no files (organization.jsonl at least)",
                             field="manifest.files")
    for name, entry in files.items():
        _check_name(name)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            raise ArchiveRefused(f"manifest entry for {name} has no sha256",
                                 field="manifest.files")
    return manifest


def read_archive(path: Path, limits: Limits) -> Archive:
    """Read and check the whole archive, or raise :class:`ArchiveRefused` naming the problem."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ArchiveRefused(f"cannot read {path}: {exc.strerror}") from None
    if size > limits.archive_bytes:
        raise ArchiveRefused(f"archive is {size} bytes, more than the limit of "
                             f"{limits.archive_bytes} (CONTEXTS_IMPORT_MAX_BYTES)")
    try:
        with path.open("rb") as raw, gzip.GzipFile(fileobj=raw) as unzipped:
            # A stream ("r|"), read through a cap: tarfile reads some headers whole (a GNU
            # long name), so the decompressed bytes are bounded before any member is.
            capped = _Capped(unzipped, limits.total_bytes + _TAR_OVERHEAD * (limits.members + 1))
            with tarfile.open(fileobj=capped, mode="r|") as tar:
                return _read_members(tar, limits)
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise ArchiveRefused(f"not a gzip-compressed tar archive of this format "
                             f"({type(exc).__name__}: {exc})") from None


# Per member at most a header block and a block of padding, and the end of the archive with
# its record padding (20 blocks): what a legitimate archive of this format adds to its members.
_TAR_OVERHEAD = 2 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE


class _Capped:
    """A file's ``read`` that refuses to go past ``limit`` bytes."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.stream, self.limit, self.count = stream, limit, 0

    def read(self, size: int = -1) -> bytes:
        want = self.limit + 1 - self.count if size is None or size < 0 else size
        data = self.stream.read(min(want, self.limit + 1 - self.count))
        self.count += len(data)
        if self.count > self.limit:
            raise ArchiveRefused(f"the archive holds more than {self.limit} bytes "
                                 "uncompressed", field="archive.members")
        return data


def _read_members(tar: tarfile.TarFile, limits: Limits) -> Archive:
    files: dict[str, bytes] = {}
    total = 0
    count = 0
    while (member := tar.next()) is not None:
        count += 1
        _check_name(member.name)  # first: a name outside the format is the error to report
        if count > limits.members:
            raise ArchiveRefused(f"more than {limits.members} members", field="archive.members")
        if not member.isfile():
            raise ArchiveRefused(f"member {member.name!r} is not a regular file (links and "
                                 "directories are refused)", field="archive.members")
        if member.name in files:
            raise ArchiveRefused(f"member {member.name!r} appears twice",
                                 field="archive.members")
        if member.size > limits.member_bytes:
            raise ArchiveRefused(f"member {member.name!r} is {member.size} bytes, more than "
                                 f"{limits.member_bytes}", field="archive.members")
        total += member.size
        if total > limits.total_bytes:
            raise ArchiveRefused(f"members hold more than {limits.total_bytes} bytes "
                                 "uncompressed", field="archive.members")
        if count == 1 and member.name != MANIFEST:
            raise ArchiveRefused("manifest.json must be the first member", field="manifest")
        handle = tar.extractfile(member)
        data = handle.read() if handle is not None else b""
        files[member.name] = data
        if member.name == MANIFEST:
            try:
                manifest = json.loads(data)
            except ValueError:
                raise ArchiveRefused("manifest.json is not JSON", field="manifest") from None
            check_manifest(manifest)
    if MANIFEST not in files:
        raise ArchiveRefused("no manifest.json", field="manifest")
    manifest = json.loads(files.pop(MANIFEST))
    listed = manifest["files"]
    for name, data in files.items():
        if name not in listed:
            raise ArchiveRefused(f"member {name!r} is not listed in the manifest",
                                 field="manifest.files")
        if hashlib.sha256(data).hexdigest() != listed[name]["sha256"]:
            raise ArchiveRefused(f"{name} does not match its sha256 in the manifest",
                                 field=name)
    missing = sorted(set(listed) - set(files))
    if missing:
        raise ArchiveRefused(f"members listed in the manifest are missing: {', '.join(missing)}",
                             field="manifest.files")
    return Archive(manifest=manifest, files=files)
