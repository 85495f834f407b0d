"""Which server paths may be ingested, by whom, and how their files are opened.

Reading the server's disk is an operator's power, not an organization's:

* the CLI (``manage.py ingest PATH``, principal ``SYSTEM``) names any path the operator likes;
* the console and the API accept a path only from a superuser, and only under one of the roots
  in ``CONTEXTS_INGEST_ROOTS`` (empty by default: off);
* the instance's own data — ``var/``, uploads (every tenant's), lexical indexes, collected static
  files — is never ingestable, whoever asks and whatever root it sits under: it holds the secret
  key, other tenants' files and the database's own files.

A refusal reads the same whether the path exists or not, so the form is no oracle for the
server's files. Files are opened below their root one component at a time without following
symbolic links (``O_NOFOLLOW`` on each ``openat``), after checking that the resolved path stays
under the root: a link named ``notes.md`` that points at ``/etc/passwd`` is skipped, not read,
and a directory swapped for a link between the check and the open fails the open.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied

from contexts.kernel.sizes import byte_size, size_over
from contexts.services.errors import InvalidOperation

NOT_UNDER_A_ROOT = ("server paths can be ingested only from under the directories the operator "
                    "allowed (CONTEXTS_INGEST_ROOTS)")
PROTECTED = "this directory holds the instance's own data and cannot be ingested"


class PathRefused(InvalidOperation):
    def __init__(self, message: str) -> None:
        super().__init__(message, field="path")


def is_within(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def ingest_roots() -> list[Path]:
    return [Path(os.path.realpath(root)) for root in settings.INGEST_ROOTS]


def protected_dirs() -> list[Path]:
    """Directories of the instance's own data (resolved)."""
    dirs = [settings.VAR_DIR, settings.MEDIA_ROOT, settings.LEXICAL_INDEX_DIR,
            settings.STATIC_ROOT]
    return [Path(os.path.realpath(d)) for d in dirs]


def is_protected(path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return any(is_within(real, d) for d in protected_dirs())


def may_register_paths(principal: Any) -> bool:
    """Whether the console and the API offer path ingestion to ``principal`` at all."""
    return bool(settings.INGEST_ROOTS) and bool(getattr(principal, "is_superuser", False))


def check_server_path(raw: str, *, operator: bool) -> Path:
    """The resolved path to walk for a request naming ``raw``, or :class:`PathRefused`.

    ``operator``: the CLI, which may name any path (relative ones against its working
    directory). Otherwise the caller must be a superuser (checked here too) and the path absolute
    and under an ingest root once every link in it is resolved.
    """
    text = raw.strip()
    if not text or "\x00" in text:
        raise PathRefused("name a directory or file on the server")
    if not operator and not os.path.isabs(text):
        raise PathRefused(NOT_UNDER_A_ROOT)
    real = Path(os.path.realpath(text))
    if not operator and not any(is_within(real, root) for root in ingest_roots()):
        raise PathRefused(NOT_UNDER_A_ROOT)
    if is_protected(real):
        raise PathRefused(PROTECTED)
    # Only now, for the operator or inside an allowed root, may existence be told.
    if not real.exists():
        raise PathRefused(f"no such file or directory: {text}")
    return real


def require_path_right(principal: Any) -> None:
    if not may_register_paths(principal):
        raise PermissionDenied("only superusers may ingest server paths, and only when the "
                               "operator has set CONTEXTS_INGEST_ROOTS")


class Unsafe(Exception):
    """A file that must not be read: a link leaving its root, or not a regular file."""


def read_beneath(root: Path, file: Path, max_bytes: int) -> bytes:
    """The bytes of ``file`` (under the resolved ``root``), opened without following any link
    out of the root. Raises :class:`Unsafe`, :class:`OSError`, or ``ValueError`` when the file is
    larger than ``max_bytes`` (the message says how large)."""
    real = Path(os.path.realpath(file))
    if not is_within(real, root) or real == root:
        raise Unsafe("symbolic link leaving the source root")
    parts = real.relative_to(root).parts
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                            dir_fd=directory)
            os.close(directory)
            directory = inner
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unsafe("not a regular file")
        if info.st_size > max_bytes:
            raise ValueError(f"too large: {size_over(info.st_size, max_bytes)}")
        data = handle.read(max_bytes + 1)  # it may have grown since fstat
        if len(data) > max_bytes:
            raise ValueError(f"too large: over {byte_size(max_bytes)}")
        return data
