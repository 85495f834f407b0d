"""What git says a work tree holds: its tracked files, and the untracked ones it does not ignore.

In a git work tree the walk ingests what the repository is — its tracked files — rather than
whatever else lies in the directory (a stray ``.env.md``, a scratch note, a build output no
``.gitignore`` names): those become knowledge served to agents, so they come in only when the
caller opts in (``include_untracked``).

Git runs without a shell, with a timeout, with NUL-separated output (``-z``: a file name may
hold a newline or a quote), and with the repository's own configuration unable to run
anything: ``core.fsmonitor`` names a program git would start, so it is forced off on the
command line, which wins over the repository's ``.git/config``. The paths git prints are only
names here; :mod:`contexts.ingestion.sources` checks each one is a plain relative path and opens
it below the root without following links.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)
GIT_TIMEOUT_SECONDS = 60
# Command-line configuration overrides the repository's, so nothing it names is executed: an
# fsmonitor hook (``ls-files --others`` runs it), a gpg.program (``log`` with showSignature).
SAFE_CONFIG = ("-c", "core.fsmonitor=false", "-c", "core.untrackedCache=false",
               "-c", "log.showSignature=false")


class GitListingFailed(Exception):
    """A directory inside a git work tree whose files git could not list. Walking it as a plain
    directory instead would ingest untracked files the caller did not ask for, so the job
    fails with this message (it says how to opt in)."""


@dataclass(frozen=True)
class Listing:
    """Paths (``/``-separated, relative to the walked root, undecoded bytes) git reports."""

    tracked: list[bytes]
    # With include_untracked: every untracked file git does not ignore. Without: the same, but
    # an untracked directory is one entry ending in ``/`` — listed as excluded, never read.
    untracked: list[bytes]


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    return subprocess.run(["git", *SAFE_CONFIG, "-C", str(root), *args],
                          capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False,
                          env=env, stdin=subprocess.DEVNULL)


def _inside_dot_git(root: Path) -> Path | None:
    """The nearest ``.git`` (directory, or file of a worktree/submodule) at or above ``root``."""
    for directory in (root, *root.parents):
        marker = directory / ".git"
        if os.path.lexists(marker):
            return marker
    return None


def list_files(root: Path, *, include_untracked: bool) -> Listing | None:
    """What git lists under ``root`` (resolved), or ``None`` when ``root`` is not in a work tree
    or is a directory the work tree ignores (the walk then reads the directory itself,
    honouring the ``.gitignore`` files inside it).

    Raises :class:`GitListingFailed` when ``root`` looks like a work tree (a ``.git`` above it)
    but git cannot list it — not installed, refusing a repository of another owner, too slow —
    unless ``include_untracked``: then reading the directory is what was asked for anyway.
    """
    marker = _inside_dot_git(root)
    if marker is None:
        return None
    try:
        probe = _git(root, "rev-parse", "--is-inside-work-tree")
        if probe.returncode != 0 or probe.stdout.strip() != b"true":
            if probe.returncode == 0:  # e.g. inside .git itself, or a bare repository
                return None
            raise GitListingFailed(_first_line(probe.stderr))
        if _git(root, "check-ignore", "-q", ".").returncode == 0:
            # A directory the repository ignores is not part of it: "tracked files only" would
            # read nothing, so it is walked as a plain directory, as outside any work tree.
            return None
        tracked = _ls(root)
        untracked = (_ls(root, "--others", "--exclude-standard") if include_untracked
                     else _untracked_for_the_report(root))
    except (OSError, subprocess.TimeoutExpired, GitListingFailed) as exc:
        if include_untracked:
            return None
        cause = (f"git did not answer within {GIT_TIMEOUT_SECONDS} s"
                 if isinstance(exc, subprocess.TimeoutExpired) else
                 "git is not installed" if isinstance(exc, FileNotFoundError) else str(exc))
        raise GitListingFailed(
            f"this directory is inside a git work tree but git could not list its tracked "
            f"files ({cause}); fix that, or ingest with include-untracked to read every file "
            f"not ignored by .gitignore") from exc
    return Listing(tracked=tracked, untracked=untracked)


def _untracked_for_the_report(root: Path) -> list[bytes]:
    """The untracked entries a tracked-only walk lists as left out (an untracked directory as
    one entry). Only a report: when git cannot say, the job goes on without it."""
    try:
        return _ls(root, "--others", "--exclude-standard", "--directory", "--no-empty-directory")
    except (OSError, subprocess.TimeoutExpired, GitListingFailed):
        return []


def _ls(root: Path, *args: str) -> list[bytes]:
    result = _git(root, "ls-files", "-z", *args)
    if result.returncode != 0:
        raise GitListingFailed(_first_line(result.stderr))
    # An unmerged path is listed once per stage: keep one.
    return sorted({name for name in result.stdout.split(b"\0") if name})


def _first_line(stderr: bytes) -> str:
    """Why git failed, in words that name no server path (the job's reason is shown to the
    organization; a server path is for superusers): git's own message goes to the log."""
    text = stderr.decode("utf-8", errors="replace").strip()
    logger.warning("git could not list a work tree: %s", text[:1000])
    if "dubious ownership" in text:
        return "git refuses a repository owned by another user: see git's safe.directory"
    return "git failed; the worker's log has its message"
