"""A git source's repository as its sync reads it: a bare mirror on this node's disk
(``VAR_DIR/sources/<public id>.git``), fetched from the source's URL, read through git's object
store — trees, diffs, logs and blobs — with no work tree.

Every git command runs without a shell, with a timeout, with ``-z`` output where it prints
paths, never prompting for credentials (``GIT_TERMINAL_PROMPT=0``, ssh in batch mode), with
only the transports a repository URL should need (``GIT_ALLOW_PROTOCOL``: not ``ext::``,
which runs a command) and with the configuration that could run a program forced off (as
``git_tree`` does for work trees). What git says when it fails becomes a :class:`GitError`
whose message is shown to the organization: its own words, passwords in URLs taken out.

The mirror is a cache: the database holds the source's state, so a node that has no mirror
(another worker, a wiped disk) fetches one and goes on from the commit the database names —
or, when that commit is not in the fetched history any more (a force-push), syncs the whole
tree (``contexts.ingestion.git_sync``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from contexts.ingestion.git_tree import SAFE_CONFIG
from contexts.ingestion.sources import LOG_FORMAT, parse_log
from contexts.models.sources_git import redact_url

ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
# Where the sync keeps the commit it applied, so that git's garbage collection never drops it
# from the mirror even when the branch is force-pushed away from it.
SYNCED_REF = "refs/contexts/synced"
LOCAL_TIMEOUT_SECONDS = 120
MAX_ERROR_CHARS = 1000
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class GitError(Exception):
    """git could not do what the sync needs (unreachable remote, refused credentials, unknown
    branch, not a repository, too slow); the message is git's own, fit to show."""


@dataclass(frozen=True)
class TreeFile:
    path: bytes   # as git stores it: not necessarily UTF-8
    mode: str     # 100644, 100755 (files), 120000 (a symbolic link)
    oid: str
    size: int


@dataclass(frozen=True)
class Change:
    """One line of ``git diff-tree --name-status``: ``A``, ``M``, ``T``, ``D`` or ``R``
    (``old`` set only for a rename)."""

    status: str
    path: bytes
    old: bytes | None = None


def timeout_seconds() -> int:
    return settings.SOURCE_GIT_TIMEOUT_SECONDS


def _env() -> dict[str, str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
           "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS, "LC_ALL": "C"}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    return env


def _first_lines(stderr: bytes) -> str:
    """git's message: its ``fatal:``/``error:`` lines (else its last lines), passwords in URLs
    taken out, bounded."""
    text = stderr.decode("utf-8", errors="replace").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("fatal:", "error:"))] or lines[-3:]
    message = " ".join(redact_url(word) for word in " ".join(wanted).split(" "))
    return message[:MAX_ERROR_CHARS] or "git failed without a message"


class Mirror:
    """The bare mirror of one source."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def of(cls, public_id: str) -> Mirror:
        return cls(Path(settings.VAR_DIR) / "sources" / f"{public_id}.git")

    def git(self, *args: str, input: bytes | None = None, timeout: int | None = None,
            what: str = "") -> bytes:
        """Run ``git args`` in the mirror; its stdout, or :class:`GitError`."""
        seconds = timeout or LOCAL_TIMEOUT_SECONDS
        try:
            result = subprocess.run(
                ["git", *SAFE_CONFIG, "-C", str(self.path), *args], input=input,
                capture_output=True, timeout=seconds, check=False, env=_env(),
                stdin=None if input is not None else subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise GitError("git is not installed on this worker") from exc
        except subprocess.TimeoutExpired as exc:
            raise GitError(f"git {what or args[0]} did not finish within {seconds} s") from exc
        if result.returncode != 0:
            raise GitError(_first_lines(result.stderr))
        return result.stdout

    # -- the mirror itself -----------------------------------------------------------------
    def ensure(self) -> None:
        """Create the bare repository if this node has none yet (made aside, then renamed
        into place, so a half-made one is never used)."""
        if (self.path / "HEAD").exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{self.path.name}-", dir=self.path.parent))
        try:
            Mirror(scratch).git("init", "--quiet", "--bare")
            try:
                os.rename(scratch, self.path)
            except OSError:
                if not (self.path / "HEAD").exists():  # not another run's mirror: a real error
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def fetch(self, url: str, branch: str) -> str:
        """Fetch ``branch`` of ``url`` into the mirror; the commit it points at."""
        self.ensure()
        ref = f"refs/heads/{branch}"
        self.git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", url,
                 f"+{ref}:{ref}", timeout=timeout_seconds(), what="fetch")
        return self.resolve(ref)

    def resolve(self, ref: str) -> str:
        sha = self.git("rev-parse", "--verify", "--quiet", "--end-of-options",
                       f"{ref}^{{commit}}").decode().strip()
        if not _SHA.fullmatch(sha):
            raise GitError(f"{ref} does not name a commit")
        return sha

    def has_commit(self, sha: str) -> bool:
        if not _SHA.fullmatch(sha or ""):
            return False
        try:
            self.git("cat-file", "-e", f"{sha}^{{commit}}")
        except GitError:
            return False
        return True

    def keep(self, sha: str) -> None:
        """Keep ``sha`` (the commit just applied) from garbage collection."""
        self.git("update-ref", SYNCED_REF, sha)

    # -- reading a commit ------------------------------------------------------------------
    def tree(self, commit: str) -> list[TreeFile]:
        """Every blob of the commit's tree (files and symbolic links; submodules left out)."""
        out = self.git("ls-tree", "-r", "-z", "-l", "--full-tree", commit)
        files = []
        for record in out.split(b"\0"):
            if not record:
                continue
            header, _, path = record.partition(b"\t")
            mode, kind, oid, size = header.decode().split()
            if kind == "blob":
                files.append(TreeFile(path=path, mode=mode, oid=oid, size=int(size)))
        return files

    def diff(self, old: str, new: str) -> list[Change]:
        """What changed from ``old`` to ``new``, renames found (``-M``)."""
        out = self.git("diff-tree", "-r", "-z", "-M", "--name-status", "--no-commit-id",
                       old, new)
        fields = out.split(b"\0")
        changes: list[Change] = []
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i].decode()[:1]
            if status in ("R", "C"):
                old_path, path = fields[i + 1], fields[i + 2]
                changes.append(Change("R", path, old_path) if status == "R"
                               else Change("A", path))
                i += 3
            else:
                changes.append(Change(status, fields[i + 1]))
                i += 2
        return changes

    def authors(self, commit: str, since: str | None = None) -> dict:
        """path → (author, time) of the newest commit touching it, as a walk of a checkout
        records them (``sources.git_metadata``): from the whole history, or, given ``since``,
        from the commits after it (enough for the paths that changed since)."""
        args = ["log", "--name-only", "--no-renames", LOG_FORMAT, commit]
        if since:
            args.append(f"^{since}")
        return parse_log(self.git(*args, "--", timeout=timeout_seconds(), what="log").decode(
            "utf-8", errors="replace"))

    def blobs(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        """oid → content, in one ``git cat-file --batch``."""
        wanted = list(dict.fromkeys(oids))
        if not wanted:
            return {}
        out = self.git("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode(),
                       timeout=timeout_seconds(), what="cat-file")
        found: dict[str, bytes] = {}
        position = 0
        for oid in wanted:
            end = out.index(b"\n", position)
            header = out[position:end].decode().split()
            if len(header) != 3:  # "<oid> missing"
                raise GitError(f"object {oid} is missing from the mirror")
            size = int(header[2])
            found[oid] = out[end + 1:end + 1 + size]
            position = end + 1 + size + 1
        return found


def check_branch(branch: str) -> bool:
    """Whether ``branch`` is a name git accepts for a branch (no option, no revision syntax)."""
    if not branch or branch.startswith("-") or any(ord(c) < 32 for c in branch):
        return False
    try:
        result = subprocess.run(["git", "check-ref-format", f"refs/heads/{branch}"],
                                capture_output=True, timeout=30, check=False, env=_env(),
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0
