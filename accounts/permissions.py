"""What a principal may *do* in a scope (curate, pin, administer, contribute).

Reading is decided by :func:`accounts.scopes.readable_scopes` alone; the actions here all
require that the scope is readable first.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from accounts.models import (
    ROLE_ACTIONS,
    ApiToken,
    Membership,
    Organization,
    Persona,
    Repository,
    Scope,
    ScopeKind,
    Session,
)
from accounts.scopes import Readable, readable_scopes

ACTIONS = ("view", "contribute", "curate", "pin", "administer")
_SCOPE_MODEL = {
    ScopeKind.ORG: "organization",
    ScopeKind.REPO: "repository",
    ScopeKind.PERSONA: "persona",
    ScopeKind.SESSION: "session",
}


def scope_object(scope: Scope):
    """The organization / repository / persona / session that owns ``scope``: the objects
    guardian grants are given on (``_SCOPE_MODEL``; a context's scope has none)."""
    model = {
        ScopeKind.ORG: Organization,
        ScopeKind.REPO: Repository,
        ScopeKind.PERSONA: Persona,
        ScopeKind.SESSION: Session,
    }[scope.kind]
    return model.objects.get(scope_id=scope.id)


# What a closed or expired session refuses (its administrators still close and expire it, and
# its fragments can still be pinned elsewhere).
SESSION_WRITES = frozenset({"contribute", "curate"})


def session_open(scope: Scope) -> bool:
    """Whether the session owning ``scope`` still takes writes: not closed, not expired."""
    row = (Session.objects.filter(org_id=scope.org_id, scope_id=scope.id)
           .values_list("closed_at", "expires_at").first())
    if row is None:
        return True
    closed_at, expires_at = row
    return closed_at is None and (expires_at is None or expires_at > timezone.now())


def role_in(user: AbstractBaseUser, org_id: int | None) -> str | None:
    if org_id is None:
        return None
    return Membership.objects.filter(user=user, org_id=org_id).values_list("role",
                                                                          flat=True).first()


def may_own(user: AbstractBaseUser | None, org_id: int, *, active: bool = True) -> bool:
    """Whether ``user`` may own things in the organization — fragments (and the nudges that
    ask about them), a context, a git source whose synced fragments default to them: a member
    of it, and an active one unless ``active`` is off. The one rule the live paths (writing a
    fragment with an owner) and an import apply; an import passes ``active=False`` because the
    members it creates are inactive until an administrator here lets them in
    (``docs/export-format.md``). A person outside the organization never owns its
    knowledge: ownership routes its nudges, and their texts, to that person."""
    if user is None or (active and not user.is_active):
        return False
    return Membership.objects.filter(user=user, org_id=org_id).exists()


class SystemPrincipal:
    """The product itself, acting for a job someone was authorized to start (ingestion,
    governance scans). It may act anywhere; it reads nothing through ``readable_scopes``."""

    is_authenticated = False
    is_superuser = False
    pk = None

    def __repr__(self) -> str:
        return "<system>"


SYSTEM = SystemPrincipal()


class OnBehalfOf:
    """A person acting through a right the product granted for one task rather than through a
    role — the owner of a fragment answering its staleness nudge (governance decides who may
    answer). It may act like :data:`SYSTEM`, and versions and audit events record the person."""

    is_authenticated = False
    is_superuser = False
    pk = None

    def __init__(self, user: AbstractBaseUser) -> None:
        self.user = user

    def __repr__(self) -> str:
        return f"<{self.user.get_username()} by delegation>"


def may(principal: Any, action: str, scope: Scope, *, known: Readable | None = None) -> bool:
    """Whether ``principal`` may perform ``action`` in ``scope``. ``known``: the principal's
    readable scopes already read in this request (``readable_scopes``), not read again."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if principal is SYSTEM or isinstance(principal, OnBehalfOf):
        return True
    if scope.id not in (known if known is not None else readable_scopes(principal)):
        return False
    if action == "view":
        return True
    if scope.kind == ScopeKind.SESSION and action in SESSION_WRITES and not session_open(scope):
        return False  # a closed or expired session takes no more writes, from anyone
    if isinstance(principal, ApiToken):
        # Agents write into the sessions they work in (summaries, feedback), nothing else.
        return action == "contribute" and scope.kind == ScopeKind.SESSION
    if not isinstance(principal, AbstractBaseUser):
        return False
    if principal.is_superuser:
        return True
    role = role_in(principal, scope.org_id)
    needed = "curate" if action == "contribute" else action
    if role and needed in ROLE_ACTIONS[role]:
        return True
    # Guardian grants on the scope's object or any object above it.
    node: Scope | None = scope
    while node is not None:
        model = _SCOPE_MODEL.get(node.kind)
        if model and principal.has_perm(f"accounts.{needed}_{model}", scope_object(node)):
            return True
        node = node.parent
    return False


def principal_user(principal: Any) -> AbstractBaseUser | None:
    """The human behind a principal (None for agent tokens and anonymous callers)."""
    if isinstance(principal, OnBehalfOf):
        return principal.user
    return principal if isinstance(principal, AbstractBaseUser) and principal.pk else None
