"""Stage 0 — sources: which files of a directory or git checkout to ingest, and what git knows
about them (last author and time).

Respects ``.gitignore`` files (any depth), skips version-control and vendored directories,
binaries, generated files and files above the size limit — each skip with a recorded reason.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from contexts.ingestion.normalize import is_generated, is_probably_binary
from contexts.ingestion.server_paths import Unsafe, is_protected, read_beneath

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "vendor", "third_party", "third-party", ".venv",
    "venv", "env", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox",
    "dist", "build", "target", ".idea", ".vscode", "site-packages", ".hypothesis", "var",
    "staticfiles",
})
INGESTIBLE_SUFFIXES = frozenset({
    ".md", ".markdown", ".txt", ".rst", ".py", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx",
    ".go", ".java", ".rs",
})
INGESTIBLE_NAMES = frozenset({"README", "LICENSE", "CONTRIBUTING", "CHANGELOG"})


@dataclass(frozen=True)
class SourceFile:
    path: str                 # posix, relative to the source root
    raw: bytes
    author: str = ""
    authored_at: dt.datetime | None = None


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def _gitignore_spec(root: Path, directory: Path) -> pathspec.PathSpec | None:
    ignore = directory / ".gitignore"
    if not ignore.is_file():
        return None
    prefix = directory.relative_to(root).as_posix()
    lines = []
    for line in ignore.read_text(errors="replace").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        # Patterns in a nested .gitignore are relative to its directory.
        if prefix not in ("", "."):
            negate = stripped.startswith("!")
            body = stripped[1:] if negate else stripped
            anchored = body.startswith("/") or "/" in body.rstrip("/")
            body = f"{prefix}/{body.lstrip('/')}" if anchored else f"{prefix}/**/{body}"
            stripped = ("!" if negate else "") + body
        lines.append(stripped)
    return pathspec.GitIgnoreSpec.from_lines(lines)  # git's own semantics, incl. re-includes


def git_metadata(root: Path) -> dict[str, tuple[str, dt.datetime]]:
    """path → (author, time) of the last commit touching it, from one ``git log`` pass."""
    try:
        result = subprocess.run(
            ["git", "-C", str(root), "log", "--name-only", "--no-renames",
             "--format=\x1e%an\x1f%aI"],
            capture_output=True, text=True, timeout=120, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if result.returncode != 0:
        return {}
    prefix = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-prefix"],
                            capture_output=True, text=True, check=False).stdout.strip()
    found: dict[str, tuple[str, dt.datetime]] = {}
    for record in result.stdout.split("\x1e")[1:]:
        header, _, names = record.partition("\n")
        author, _, when = header.partition("\x1f")
        try:
            stamp = dt.datetime.fromisoformat(when.strip())
        except ValueError:
            continue
        for name in names.split("\n"):
            name = name.strip()
            if prefix and name.startswith(prefix):
                name = name[len(prefix):]
            if name and name not in found:  # newest first: keep the first seen
                found[name] = (author, stamp)
    return found


def walk(root: Path, *, max_bytes: int) -> Iterator[SourceFile | Skipped]:
    """Every file under ``root`` in a stable order: a SourceFile to ingest or why it is not.

    Nothing outside ``root`` is read (links leaving it are skipped, see
    :func:`~contexts.ingestion.server_paths.read_beneath`), nor the instance's own data
    directories inside it."""
    root = root.resolve()
    if root.is_file():
        yield from _one(root.parent, root, max_bytes, {})
        return
    meta = git_metadata(root)
    specs: list[pathspec.PathSpec] = []
    for directory, dirnames, filenames in _walk_sorted(root):
        spec = _gitignore_spec(root, directory)
        if spec is not None:
            specs.append(spec)
        rel_dir = directory.relative_to(root).as_posix()
        kept = []
        for name in dirnames:
            rel = f"{rel_dir}/{name}" if rel_dir != "." else name
            if name in SKIP_DIRS:
                yield Skipped(rel + "/", "vendored, build or tool directory")
                continue
            if is_protected(directory / name):
                yield Skipped(rel + "/", "the instance's own data")
                continue
            if name.startswith(".") or any(s.match_file(rel + "/") for s in specs):
                continue
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir != "." else name
            if any(s.match_file(rel) for s in specs):
                continue
            yield from _one(root, directory / name, max_bytes, meta)


def _walk_sorted(root: Path):
    import os

    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        filenames.sort()
        yield Path(directory), dirnames, filenames


def ingestible(name: str) -> bool:
    path = Path(name)
    return path.suffix.lower() in INGESTIBLE_SUFFIXES or path.stem in INGESTIBLE_NAMES


def _one(root: Path, file: Path, max_bytes: int,
         meta: dict[str, tuple[str, dt.datetime]]) -> Iterator[SourceFile | Skipped]:
    rel = file.relative_to(root).as_posix()
    if not ingestible(file.name):
        return  # not a format we ingest at all: not worth a line in the report
    try:
        raw = read_beneath(root, file, max_bytes)
    except (Unsafe, ValueError) as exc:  # a link out of the root, a FIFO, too large
        yield Skipped(rel, str(exc))
        return
    except OSError as exc:
        yield Skipped(rel, f"unreadable: {exc.strerror}")
        return
    author, when = meta.get(rel, ("", None))
    yield checked(SourceFile(rel, raw, author, when))


def from_uploads(files: Iterable[tuple[str, bytes]], *,
                 max_bytes: int) -> Iterator[SourceFile | Skipped]:
    """Uploaded files (name, content), read from the uploads storage rather than a directory,
    under the same rules as a walked file."""
    for name, raw in files:
        if not ingestible(name):
            yield Skipped(name, "not a format Contexts ingests")
        elif len(raw) > max_bytes:
            yield Skipped(name, f"too large: {len(raw)} bytes > limit {max_bytes}")
        else:
            yield checked(SourceFile(name, raw))


def checked(source: SourceFile) -> SourceFile | Skipped:
    """The file, or why its content is not ingested (binary, generated)."""
    if is_probably_binary(source.raw):
        return Skipped(source.path, "binary content")
    if is_generated(source.path, source.raw[:65536].decode("utf-8", errors="replace")):
        return Skipped(source.path, "generated file")
    return source
