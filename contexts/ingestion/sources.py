"""Stage 0 — sources: which files of a directory or git checkout to ingest, and what git knows
about them (last author and time).

In a git work tree only tracked files are read unless the job includes untracked ones
(:mod:`~contexts.ingestion.git_tree`); elsewhere the directory is walked, honouring
``.gitignore`` files (any depth). Either way version-control, vendored and tool directories,
the instance's own data, the policy's exclusions (:mod:`~contexts.ingestion.policy`: the
defaults and ``.contextsignore``), binaries, generated and oversized files are left out — each
with a recorded reason — and nothing is read through a link leaving the root.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pathspec

from contexts.ingestion import git_tree, policy
from contexts.ingestion.normalize import generated_reason, is_probably_binary
from contexts.ingestion.policy import Policy
from contexts.ingestion.server_paths import Unsafe, is_protected, read_beneath
from contexts.kernel.sizes import size_over

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
VENDORED = "vendored, build or tool directory"
INSTANCE_DATA = "the instance's own data"
MAX_IGNORE_FILE_BYTES = 256 * 1024


@dataclass(frozen=True)
class SourceFile:
    path: str                 # posix, relative to the source root
    raw: bytes
    author: str = ""
    authored_at: dt.datetime | None = None
    kind: str | None = None   # the policy's kind for this path; front matter still wins
    # Which source brought it, when a job reads several (an upload job's files and archives:
    # ``upload:<name>``, ``archive:<name>``); "" — the run's own (``Target.origin``).
    origin: str = ""


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


def _gitignore_spec(root: Path, directory: Path) -> pathspec.PathSpec | None:
    ignore = directory / ".gitignore"
    if not ignore.is_file():
        return None
    prefix = directory.relative_to(root).as_posix()
    # git's own semantics, incl. re-includes; nested patterns relative to their directory.
    return pathspec.GitIgnoreSpec.from_lines(
        policy.scoped_patterns(prefix, ignore.read_text(errors="replace")))


def git_metadata(root: Path) -> dict[str, tuple[str, dt.datetime]]:
    """path → (author, time) of the last commit touching it, from one ``git log`` pass."""
    try:
        result = subprocess.run(
            ["git", *git_tree.SAFE_CONFIG, "-C", str(root), "log", "--name-only", "--no-renames",
             LOG_FORMAT],
            capture_output=True, text=True, timeout=120, check=False,
        )
        if result.returncode != 0:
            return {}
        prefix = subprocess.run(
            ["git", *git_tree.SAFE_CONFIG, "-C", str(root), "rev-parse", "--show-prefix"],
            capture_output=True, text=True, check=False, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_log(result.stdout, prefix)


# ``git log --name-only --no-renames`` in this format: one record per commit, newest first.
LOG_FORMAT = "--format=\x1e%an\x1f%aI"


def parse_log(output: str, prefix: str = "") -> dict[str, tuple[str, dt.datetime]]:
    """path → (author, time) of the newest commit naming it in a ``git log`` of
    :data:`LOG_FORMAT` (paths relative to ``prefix``, the walked directory in its work tree)."""
    found: dict[str, tuple[str, dt.datetime]] = {}
    for record in output.split("\x1e")[1:]:
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


def walk(root: Path, *, max_bytes: int,
         include_untracked: bool = False) -> Iterator[SourceFile | Skipped]:
    """Every file under ``root`` in a stable order: a SourceFile to ingest or why it is not.

    Nothing outside ``root`` is read (links leaving it are skipped, see
    :func:`~contexts.ingestion.server_paths.read_beneath`), nor the instance's own data
    directories inside it. A single file is read as named (no git, no policy: the caller chose
    it). Raises :class:`~contexts.ingestion.policy.PolicyError` for a policy file that cannot
    be honoured and :class:`~contexts.ingestion.git_tree.GitListingFailed` for a work tree git
    cannot list — before anything is yielded."""
    root = root.resolve()
    if root.is_file():
        yield from _one(root.parent, root, max_bytes, {})
        return
    rules = policy.load(root)
    listing = git_tree.list_files(root, include_untracked=include_untracked)
    meta = git_metadata(root) if listing is not None else {}
    found = (_directory_files(root, rules) if listing is None
             else _listed_files(root, listing, rules, include_untracked=include_untracked))
    for item in found:
        if isinstance(item, Skipped):
            yield item
        else:
            yield from _one(root, item, max_bytes, meta, rules)


def _directory_files(root: Path, rules: Policy) -> Iterator[Path | Skipped]:
    """Outside a git work tree: the directory itself, honouring ``.gitignore`` files."""
    specs: list[pathspec.PathSpec] = []
    for directory, dirnames, filenames in _walk_sorted(root):
        spec = _gitignore_spec(root, directory)
        if spec is not None:
            specs.append(spec)
        rel_dir = directory.relative_to(root).as_posix()
        if policy.IGNORE_FILE in filenames:
            _add_ignore_file(root, rel_dir, rules)
        kept = []
        for name in dirnames:
            rel = f"{rel_dir}/{name}" if rel_dir != "." else name
            ignored = any(s.match_file(rel + "/") for s in specs)
            reason = _directory_reason(root, rel, name, rules, ignored=ignored)
            if reason:
                yield Skipped(policy.printable(rel) + "/", reason)
            elif reason is None:
                kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir != "." else name
            if not any(s.match_file(rel) for s in specs):
                yield directory / name


def _listed_files(root: Path, listing: git_tree.Listing, rules: Policy, *,
                  include_untracked: bool) -> Iterator[Path | Skipped]:
    """In a git work tree: the files git lists. Each name is checked to be a plain relative
    path, and its directories pass the same rules as a directory walk's."""
    entries = sorted([(name, True) for name in listing.tracked]
                     + [(name, False) for name in listing.untracked],
                     key=lambda entry: entry[0].split(b"/"))
    names: list[tuple[str, bool]] = []
    for raw, tracked in entries:
        try:
            rel = raw.decode("utf-8")
        except UnicodeDecodeError:
            yield Skipped(policy.printable(raw.decode("utf-8", errors="replace")),
                          policy.NOT_UTF8)
            continue
        names.append((rel, tracked))
    for rel in ignore_files(rel for rel, _ in names):
        _add_ignore_file(root, str(PurePosixPath(rel).parent), rules)
    for item in _select(names, rules, root=root, include_untracked=include_untracked):
        if isinstance(item, Skipped):
            yield item
        elif os.path.lexists(root / item):  # not deleted meanwhile
            yield root / item


def ignore_files(paths: Iterable[str]) -> list[str]:
    """The ``.contextsignore`` files among ``paths``, shallower first: each applies to every
    path below it, and a deeper one has the last word on its subtree."""
    found = [rel for rel in paths if PurePosixPath(rel).name == policy.IGNORE_FILE and _plain(rel)]
    return sorted(found, key=lambda rel: rel.count("/"))


def _select(names: Iterable[tuple[str, bool]], rules: Policy, *, root: Path | None,
            include_untracked: bool = False) -> Iterator[str | Skipped]:
    """The listed names (path, tracked) a walk goes on to read, or why a name or one of its
    directories is left out. ``root`` is the work tree (None for a commit's tree, which holds
    no instance data and nothing untracked)."""
    verdicts: dict[str, str | bool | None] = {}  # directory → reason, False (quietly) or None
    for rel, tracked in names:
        if not _plain(rel):
            yield Skipped(policy.printable(rel), policy.OUTSIDE)
            continue
        blocked = False
        parts = rel.rstrip("/").split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory not in verdicts:
                verdicts[directory] = _directory_reason(root, directory, parts[depth - 1],
                                                        rules)
                if verdicts[directory]:
                    yield Skipped(policy.printable(directory) + "/", verdicts[directory])
            if verdicts[directory] is not None:
                blocked = True
                break
        if blocked:
            continue
        if not tracked and not include_untracked:
            name = parts[-1]
            if rel.endswith("/") or ingestible(name) or policy.has_control_character(name):
                yield Skipped(policy.printable(rel), policy.UNTRACKED)
            continue
        if not rel.endswith("/"):
            yield rel


def _plain(rel: str) -> bool:
    """A relative path with no empty, ``.`` or ``..`` component: git never prints another,
    and nothing else is joined to the root."""
    parts = rel.rstrip("/").split("/")
    return not rel.startswith("/") and all(part not in ("", ".", "..") for part in parts)


def _directory_reason(root: Path | None, rel: str, name: str, rules: Policy, *,
                      ignored: bool = False) -> str | bool | None:
    """Why the walk does not enter a directory: a reason to record, ``False`` to leave it out
    without a word (hidden, or ``ignored`` by a .gitignore), or ``None`` to enter it."""
    if name in SKIP_DIRS:
        return VENDORED
    if root is not None and is_protected(root / rel):
        return INSTANCE_DATA
    if name.startswith(".") or ignored:
        return False
    if policy.has_control_character(name):
        return policy.CONTROL_CHARACTER
    return rules.excluded(rel, directory=True).reason


def _add_ignore_file(root: Path, rel_dir: str, rules: Policy) -> None:
    path = root / rel_dir / policy.IGNORE_FILE
    try:
        text = read_beneath(root, path, MAX_IGNORE_FILE_BYTES).decode("utf-8", errors="replace")
    except (Unsafe, ValueError, OSError):
        return  # a link out of the root or an unreadable file says nothing about this tree
    rules.add_ignore_file("" if rel_dir == "." else rel_dir, text)


def _walk_sorted(root: Path):
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        filenames.sort()
        yield Path(directory), dirnames, filenames


def ingestible(name: str) -> bool:
    path = Path(name)
    return path.suffix.lower() in INGESTIBLE_SUFFIXES or path.stem in INGESTIBLE_NAMES


def _one(root: Path, file: Path, max_bytes: int, meta: dict[str, tuple[str, dt.datetime]],
         rules: Policy | None = None) -> Iterator[SourceFile | Skipped]:
    rel = file.relative_to(root).as_posix()
    verdict = _by_name(rel, rules)
    if not isinstance(verdict, policy.Verdict):
        if verdict is not None:
            yield verdict
        return
    try:
        raw = read_beneath(root, file, max_bytes)
    except (Unsafe, ValueError) as exc:  # a link out of the root, a FIFO, too large
        yield Skipped(rel, str(exc))
        return
    except OSError as exc:
        yield Skipped(rel, f"unreadable: {exc.strerror}")
        return
    yield _by_content(rel, raw, meta, rules, verdict)


def _by_name(rel: str, rules: Policy | None) -> policy.Verdict | Skipped | None:
    """What a file's path alone says: the verdict to read it under, why it is left out
    (:class:`Skipped`), or None — not a format we ingest, or an exclusion not worth a line in
    the report. ``rules`` None: a file the caller chose by name (no policy)."""
    name = PurePosixPath(rel).name
    verdict = policy.Verdict()
    if rules is not None:
        if policy.has_control_character(rel):
            return Skipped(policy.printable(rel), policy.CONTROL_CHARACTER)
        verdict = rules.excluded(rel)
        # A lock file is named even though its format is never ingested: it is the exclusion
        # people look for when an answer quotes a dependency version.
        if verdict.reason and (ingestible(name) or verdict.reason == policy.LOCK_FILE):
            return Skipped(rel, verdict.reason)
        if verdict.reason:
            return None
    if not ingestible(name):
        return None  # not a format we ingest at all: not worth a line in the report
    return verdict


def _by_content(rel: str, raw: bytes, meta: dict[str, tuple[str, dt.datetime]],
               rules: Policy | None, verdict: policy.Verdict) -> SourceFile | Skipped:
    """The file read (its path passed :func:`_by_name`), or why its content keeps it out."""
    author, when = meta.get(rel, ("", None))
    kind = rules.kind_for(rel) if rules is not None else None
    source = checked(SourceFile(rel, raw, author, when, kind),
                     content_rules=not verdict.re_included)
    if rules is not None and isinstance(source, SourceFile) and not verdict.re_included:
        reason = policy.content_reason(rel, raw.decode("utf-8", errors="replace"))
        if reason:
            source = Skipped(rel, reason)
    return source


def from_tree(paths: Iterable[str], *, sizes: Mapping[str, int],
              read: Callable[[list[str]], Mapping[str, bytes]], rules: Policy, max_bytes: int,
              meta: dict[str, tuple[str, dt.datetime]],
              batch_bytes: int = 16 * 1024 * 1024) -> Iterator[SourceFile | Skipped]:
    """Files of a commit's tree (``contexts.ingestion.git_sync``: read from a repository's
    objects, no work tree) under the rules of a walk of its checkout — the same directories,
    exclusions, kinds and content rules, the same reasons — so that a sync ingests what a path
    job of that checkout would. ``paths`` are the files to consider (all of the tree, or those
    a diff names), ``sizes`` their sizes in bytes; ``rules`` hold the tree's policy file and
    every ``.contextsignore`` in it (:func:`ignore_files`). ``read`` gives the bytes of a batch
    of paths, called with at most about ``batch_bytes`` at a time."""
    names = sorted(((rel, True) for rel in paths), key=lambda entry: entry[0].split("/"))
    wanted: list[tuple[str, policy.Verdict]] = []
    for item in _select(names, rules, root=None):
        if isinstance(item, Skipped):
            yield item
            continue
        verdict = _by_name(item, rules)
        if not isinstance(verdict, policy.Verdict):
            if verdict is not None:
                yield verdict
            continue
        if sizes[item] > max_bytes:
            yield Skipped(item, f"too large: {size_over(sizes[item], max_bytes)}")
            continue
        wanted.append((item, verdict))
    batch: list[tuple[str, policy.Verdict]] = []
    total = 0
    for position, (rel, verdict) in enumerate(wanted):
        batch.append((rel, verdict))
        total += sizes[rel]
        if position + 1 == len(wanted) or total + sizes[wanted[position + 1][0]] > batch_bytes:
            contents = read([name for name, _ in batch])
            for name, kept in batch:
                yield _by_content(name, contents[name], meta, rules, kept)
            batch, total = [], 0


def from_uploads(files: Iterable[tuple[str, bytes]], *,
                 max_bytes: int) -> Iterator[SourceFile | Skipped]:
    """Uploaded files (name, content), read from the uploads storage rather than a directory,
    under the same rules as a walked file."""
    for name, raw in files:
        if not ingestible(name):
            yield Skipped(name, "not a format Contexts ingests")
        elif len(raw) > max_bytes:
            yield Skipped(name, f"too large: {size_over(len(raw), max_bytes)}")
        else:
            yield checked(SourceFile(name, raw))


def checked(source: SourceFile, *, content_rules: bool = True) -> SourceFile | Skipped:
    """The file, or why its content is not ingested (binary; unless ``content_rules`` is off —
    a ``.contextsignore`` re-included the file by name — generated or minified)."""
    if is_probably_binary(source.raw):
        return Skipped(source.path, "binary content")
    if content_rules:
        reason = generated_reason(source.path,
                                  source.raw[:65536].decode("utf-8", errors="replace"))
        if reason:
            return Skipped(source.path, f"excluded: {reason}")
    return source
