"""Who owns a source file's fragments (issue 38): the one chain every path job, upload and git
sync resolves owners through.

For a document at ``path``, the first of these that names somebody who may own it:

1. the repository's ``CODEOWNERS`` (:mod:`contexts.ingestion.codeowners`; last matching rule,
   its owners in order): ``@login`` is a member's username, an e-mail address a member's
   *verified* address (the one they proved theirs, or their identity provider's verified
   address); ``@org/team`` entries are skipped with a warning;
2. the file's front matter ``owner:`` (a username);
3. the most frequent author among the file's recent commits (author e-mail → a member's
   verified address);
4. the scope's tech lead: a tech lead of the repository (a per-repository grant), else the
   organization's tech leads, else its administrators.

Only an active member of the target organization who may curate the target scope is ever an
owner: a ``CODEOWNERS`` naming somebody of another organization names nobody here, and the
warning reads the same whether such an account exists or not (no account oracle across
tenants). Never "nobody" while the organization has a tech lead or an administrator, and never
every file to whoever started the ingest.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from guardian.models import UserObjectPermission

from accounts.models import (
    ExternalIdentity,
    Organization,
    Repository,
    Role,
    Scope,
    VerifiedEmail,
)
from accounts.permissions import may, may_own
from contexts.ingestion import codeowners, git_tree
from contexts.ingestion.codeowners import CodeOwners, EntryKind
from contexts.ingestion.server_paths import Unsafe, read_beneath

# How far back "recent" reaches: the newest commits of the history read once, and the newest
# commits of a file among them that vote for its owner.
HISTORY_COMMITS = 2000
AUTHOR_VOTES = 20
AUTHOR_LOG_FORMAT = "--format=\x1e%ae"
NOT_AN_OWNER = ("{where}: {entry!r} is not a member of this organization who may curate this "
                "scope; not an owner here")
TEAM_SKIPPED = ("{where}: {entry!r} is a team of the code host; teams are not resolved here, "
                "name people")
INVALID_ENTRY = "{where}: {entry!r} is neither @login, @org/team nor an e-mail address"
FRONT_MATTER_NOT_HONOURED = ("owner {name!r} in front matter is not a curator of this scope; "
                             "the owner comes from the next rule")


class OwnerSource(StrEnum):
    """Where an owner came from (``SourceDocument.owner_source``; ``person``: the console)."""

    CODEOWNERS = "codeowners"
    FRONT_MATTER = "front_matter"
    GIT_AUTHOR = "git_author"
    TECH_LEAD = "tech_lead"
    # The organization has no tech lead nor administrator who may curate the scope: whoever
    # started the ingest (or the git source), the last resort before nobody.
    DEFAULT = "default"
    PERSON = "person"


@dataclass(frozen=True)
class Resolved:
    user: Any | None  # an active member who may curate the scope; None only in an empty org
    source: str
    why: str          # for a version's reason: "CODEOWNERS line 3", "front matter", …


AuthorHistory = Callable[[], Mapping[str, Sequence[str]]]


def _no_history() -> Mapping[str, Sequence[str]]:
    return {}


@dataclass
class OwnerChain:
    """Resolves owners for one target; caches every lookup (one run asks per file)."""

    org: Organization
    scope: Scope
    repository: Repository | None = None
    codeowners: CodeOwners | None = None
    history: AuthorHistory = _no_history
    fallback: Any | None = None  # Target.default_owner: the job's owner, the source's creator
    warnings: list[dict] = field(default_factory=list)
    _users: dict[tuple[str, str], Any | None] = field(default_factory=dict, repr=False)
    _eligible: dict[int, bool] = field(default_factory=dict, repr=False)
    _authors: Mapping[str, Sequence[str]] | None = field(default=None, repr=False)
    _lead: tuple[Any | None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for problem in (self.codeowners.problems if self.codeowners else ()):
            self._warn(f"{self.codeowners.path} line {problem.line}: {problem.reason}")

    # -- the chain ------------------------------------------------------------------------------
    def resolve(self, path: str, front_matter_owner: str = "") -> Resolved:
        return (self._from_codeowners(path) or self._from_front_matter(path, front_matter_owner)
                or self._from_history(path) or self._from_lead())

    def _from_codeowners(self, path: str) -> Resolved | None:
        rule = self.codeowners.rule_for(path) if self.codeowners else None
        if rule is None:
            return None
        where = f"{self.codeowners.path} line {rule.line}"
        for entry in rule.owners:
            if entry.kind == EntryKind.TEAM:
                self._warn(TEAM_SKIPPED.format(where=where, entry=entry.text[:100]))
                continue
            if entry.kind == EntryKind.INVALID:
                self._warn(INVALID_ENTRY.format(where=where, entry=entry.text[:100]))
                continue
            user = (self._by_login(entry.name) if entry.kind == EntryKind.LOGIN
                    else self._by_email(entry.name))
            if user is not None:
                return Resolved(user, OwnerSource.CODEOWNERS, where)
            self._warn(NOT_AN_OWNER.format(where=where, entry=entry.text[:100]))
        return None

    def _from_front_matter(self, path: str, name: str) -> Resolved | None:
        name = str(name or "").strip()
        if not name:
            return None
        user = self._by_login(name, case_sensitive=True)
        if user is None:
            self._warn(FRONT_MATTER_NOT_HONOURED.format(name=name[:150]), path)
            return None
        return Resolved(user, OwnerSource.FRONT_MATTER, "front matter")

    def _from_history(self, path: str) -> Resolved | None:
        if self._authors is None:
            self._authors = self.history()
        votes = Counter(email.lower() for email in self._authors.get(path, ())[:AUTHOR_VOTES])
        # Most commits first; a tie goes to the newer author (Counter keeps insertion order,
        # and the history is newest first).
        for email, _ in sorted(votes.items(), key=lambda kv: -kv[1]):
            user = self._by_email(email)
            if user is not None:
                return Resolved(user, OwnerSource.GIT_AUTHOR, "git history")
        return None

    def _from_lead(self) -> Resolved:
        if self._lead is None:
            self._lead = (self._find_lead(),)
        if self._lead[0] is not None:
            return Resolved(self._lead[0], OwnerSource.TECH_LEAD, "tech lead")
        fallback = self.fallback if self.may_own(self.fallback) else None
        return Resolved(fallback, OwnerSource.DEFAULT, "no tech lead")

    # -- people ---------------------------------------------------------------------------------
    def may_own(self, user: AbstractBaseUser | None) -> bool:
        """An active member of the organization who may curate the target scope."""
        if user is None:
            return False
        if user.pk not in self._eligible:
            self._eligible[user.pk] = (may_own(user, self.org.pk)
                                       and may(user, "curate", self.scope))
        return self._eligible[user.pk]

    def _members(self):
        return get_user_model().objects.filter(is_active=True, memberships__org=self.org)

    def _by_login(self, login: str, *, case_sensitive: bool = False) -> Any | None:
        key = ("login" if case_sensitive else "login-ci", login)
        if key not in self._users:
            # Only this organization's members are looked at: the same username in another
            # organization is nobody here.
            user = self._members().filter(username=login).first()
            if user is None and not case_sensitive:  # code hosts' logins ignore case
                found = list(self._members().filter(username__iexact=login)[:2])
                user = found[0] if len(found) == 1 else None
            self._users[key] = user if self.may_own(user) else None
        return self._users[key]

    def _by_email(self, email: str) -> Any | None:
        key = ("email", email.lower())
        if key not in self._users:
            self._users[key] = next((u for u in verified_members(self.org, email)
                                     if self.may_own(u)), None)
        return self._users[key]

    def _find_lead(self) -> Any | None:
        if self.repository is not None:
            granted = (UserObjectPermission.objects
                       .filter(permission__codename="pin_repository",
                               content_type__app_label="accounts",
                               content_type__model="repository",
                               object_pk=str(self.repository.pk))
                       .values_list("user_id", flat=True))
            for user in self._members().filter(pk__in=list(granted)).order_by("pk"):
                if self.may_own(user):
                    return user
        for role in (Role.TECH_LEAD, Role.ADMIN):
            for user in (self._members().filter(memberships__role=role)
                         .order_by("pk").distinct()):
                if self.may_own(user):
                    return user
        return None

    def _warn(self, reason: str, path: str = "") -> None:
        warning = {"path": path or (self.codeowners.path if self.codeowners else ""),
                   "reason": reason}
        if warning not in self.warnings:
            self.warnings.append(warning)


def verified_members(org: Organization, email: str) -> list[Any]:
    """Active members of ``org`` who proved ``email`` theirs: their account's verified
    address, or the verified address of an identity provider they sign in with. An address
    typed into an account proves nothing (anybody can type anybody's), so it names nobody."""
    email = email.strip().lower()
    if not email:
        return []
    users = get_user_model().objects.filter(is_active=True, memberships__org=org)
    proved = Q(pk__in=VerifiedEmail.objects.filter(email__iexact=email)
               .values("user_id")) & Q(email__iexact=email)
    provider = Q(pk__in=ExternalIdentity.objects.filter(
        email__iexact=email, email_verified=True, deprovisioned_at__isnull=True)
        .values("user_id"))
    return list(users.filter(proved | provider).distinct().order_by("pk"))


def parse_author_log(output: str, prefix: str = "") -> dict[str, list[str]]:
    """path → author e-mails of the commits naming it, newest first, from a ``git log
    --name-only --no-renames`` in :data:`AUTHOR_LOG_FORMAT` (paths relative to ``prefix``)."""
    found: dict[str, list[str]] = {}
    for record in output.split("\x1e")[1:]:
        header, _, names = record.partition("\n")
        email = header.strip()
        for name in names.split("\n"):
            name = name.strip()
            if prefix and name.startswith(prefix):
                name = name[len(prefix):]
            if name and email:
                votes = found.setdefault(name, [])
                if len(votes) < AUTHOR_VOTES:
                    votes.append(email)
    return found


def worktree_history(root: Path) -> AuthorHistory:
    """The recent authors of a work tree's files (a path job), read once when first asked."""

    def read() -> Mapping[str, Sequence[str]]:
        try:
            log = subprocess.run(
                ["git", *git_tree.SAFE_CONFIG, "-C", str(root), "log",
                 f"--max-count={HISTORY_COMMITS}", "--name-only", "--no-renames",
                 AUTHOR_LOG_FORMAT], capture_output=True, text=True, timeout=120, check=False)
            prefix = subprocess.run(
                ["git", *git_tree.SAFE_CONFIG, "-C", str(root), "rev-parse", "--show-prefix"],
                capture_output=True, text=True, timeout=30, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return {}
        return parse_author_log(log.stdout, prefix) if log.returncode == 0 else {}

    return read


def worktree_codeowners(root: Path) -> CodeOwners | None:
    """The ``CODEOWNERS`` of a source root on disk (never read through a link leaving it)."""
    if not root.is_dir():
        return None
    for location in codeowners.LOCATIONS:
        try:
            raw = read_beneath(root, root / location, codeowners.MAX_BYTES)
        except (Unsafe, ValueError, OSError):
            continue
        return codeowners.parse(raw.decode("utf-8", errors="replace"), location)
    return None


def from_blobs(present: Iterable[str], read: Callable[[str], bytes | None]
               ) -> CodeOwners | None:
    """The ``CODEOWNERS`` of a tree whose paths are ``present`` (a git source's commit)."""
    location = codeowners.find(frozenset(present))
    if location is None:
        return None
    raw = read(location)
    return None if raw is None else codeowners.parse(raw.decode("utf-8", errors="replace"),
                                                    location)
