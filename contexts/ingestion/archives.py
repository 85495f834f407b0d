"""Reading an uploaded zip without trusting it: a documentation export (Confluence, Notion, a
plain zip of Markdown) arrives as one archive, and the archive decides nothing about where its
bytes go or how many there are.

:func:`open_archive` refuses, with an :class:`ArchiveRefused` naming the reason, before any
member is extracted: a file that is not a zip (whatever its name), more than ``max_files``
members, members together larger than ``max_bytes`` uncompressed, a member (or the whole)
expanding more than ``max_ratio`` times, a member name that could leave the archive's tree
(``..``, an absolute path, a drive letter, a backslash, NUL or another control character), two
members of one name, a symbolic link, an encrypted member. Nothing is ever written to disk:
members are read into memory, each capped at its declared size (``zipfile`` stops there and
checks the CRC), so a header that lies about a size cannot make a member bigger than the bounds
that were checked. :meth:`Archive.verify` reads the members a layout will read, so a corrupt
one is refused at upload time too, not when the worker gets to it.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.conf import settings

from contexts.kernel.sizes import byte_size

# Below these sizes a high ratio is harmless (a short run of spaces compresses 500x) and says
# nothing about a bomb; above them it is the bomb's signature.
RATIO_MEMBER_FLOOR = 64 * 1024
RATIO_TOTAL_FLOOR = 1024 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ArchiveRefused(ValueError):
    """The archive is not read at all; ``reason`` says why (shown to the uploader as is)."""

    def __init__(self, reason: str, *, member: str = "") -> None:
        self.reason = reason
        self.member = member
        super().__init__(f"{reason}: {member!r}" if member else reason)


class NotAZip(ArchiveRefused):
    pass


class TooLarge(ArchiveRefused):
    pass


class TooManyFiles(ArchiveRefused):
    pass


class CompressionRatio(ArchiveRefused):
    pass


class UnsafeName(ArchiveRefused):
    pass


class LinkMember(ArchiveRefused):
    pass


class UnreadableMember(ArchiveRefused):
    pass


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_files: int
    max_ratio: int

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(max_bytes=settings.ARCHIVE_MAX_BYTES, max_files=settings.ARCHIVE_MAX_FILES,
                   max_ratio=settings.ARCHIVE_MAX_RATIO)


@dataclass(frozen=True)
class Member:
    name: str   # posix, relative, checked
    size: int   # declared uncompressed size (never exceeded when read)


class Archive:
    """An opened, checked zip: its file members (directories left out) in archive order."""

    def __init__(self, zf: zipfile.ZipFile, members: list[Member]) -> None:
        self._zip = zf
        self.members = members
        self._by_name = {member.name: member for member in members}

    def read(self, name: str) -> bytes:
        """A member's bytes, never more than its declared size."""
        member = self._by_name[name]
        try:
            with self._zip.open(name) as stream:
                data = stream.read(member.size + 1)
        except (zipfile.BadZipFile, NotImplementedError, OSError, EOFError, ValueError,
                RuntimeError) as exc:
            raise UnreadableMember(f"member cannot be read ({exc})", member=name) from exc
        if len(data) > member.size:
            raise UnreadableMember("member larger than its header says", member=name)
        return data

    def verify(self, names) -> None:
        """Read the named members (the ones a layout reads): a corrupt one is refused now."""
        for name in names:
            self.read(name)


def looks_like_zip(name: str) -> bool:
    return name.lower().endswith(".zip")


def open_archive(raw: bytes, *, limits: Limits | None = None) -> Archive:
    """Check the archive's directory against ``limits`` (the settings by default) and return
    it opened; :class:`ArchiveRefused` otherwise. Reads no member."""
    limits = limits or Limits.from_settings()
    if len(raw) > limits.max_bytes:
        raise TooLarge(f"archive larger than {byte_size(limits.max_bytes)}")
    # zipfile finds an end-of-directory record anywhere in the last 64 KiB, so a text file with
    # "PK\5\6" in its tail would pass for one; a real zip starts with a local header (or is
    # the empty archive).
    if not raw.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise NotAZip("not a zip archive")
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise NotAZip(f"not a readable zip archive ({exc})") from exc
    if len(infos) > limits.max_files:
        raise TooManyFiles(f"archive holds {len(infos)} members, more than "
                           f"{limits.max_files}")
    members: list[Member] = []
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = _checked_name(info)
        if name in seen:
            raise UnsafeName("two members of one name", member=name)
        seen.add(name)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise LinkMember("symbolic link member", member=name)
        if info.flag_bits & 0x1:
            raise UnreadableMember("encrypted member", member=name)
        if info.is_dir():
            continue
        total += info.file_size
        if total > limits.max_bytes:
            raise TooLarge(f"members larger than {byte_size(limits.max_bytes)} uncompressed")
        if (info.file_size > RATIO_MEMBER_FLOOR
                and info.file_size > limits.max_ratio * max(info.compress_size, 1)):
            raise CompressionRatio(
                f"member expands {info.file_size // max(info.compress_size, 1)} times, more "
                f"than {limits.max_ratio}", member=name)
        members.append(Member(name, info.file_size))
    # Against the archive's own length, not the members' compressed sizes: overlapping members
    # (one compressed stream named a thousand times) would fool a sum of those.
    if total > RATIO_TOTAL_FLOOR and total > limits.max_ratio * max(len(raw), 1):
        raise CompressionRatio(f"archive expands {total // max(len(raw), 1)} times, more than "
                               f"{limits.max_ratio}")
    return Archive(zf, members)


def _checked_name(info: zipfile.ZipInfo) -> str:
    """The member's name, or :class:`UnsafeName`. ``orig_filename`` because zipfile cuts a
    name at its first NUL (a classic trick to hide the real extension)."""
    raw = info.orig_filename
    if _CONTROL.search(raw):
        raise UnsafeName("control character in a member name", member=raw.replace("\0", "\\0"))
    if "\\" in raw:
        raise UnsafeName("backslash in a member name", member=raw)
    if raw.startswith("/"):
        raise UnsafeName("absolute member name", member=raw)
    if _DRIVE.match(raw):
        raise UnsafeName("drive letter in a member name", member=raw)
    parts = raw.rstrip("/").split("/")
    if any(part == ".." for part in parts):
        raise UnsafeName("'..' in a member name", member=raw)
    if not raw.strip("/") or any(part in ("", ".") for part in parts):
        raise UnsafeName("empty or '.' component in a member name", member=raw)
    return str(PurePosixPath(raw))
