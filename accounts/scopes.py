"""The one place that decides what a principal may read.

``readable_scopes(principal)`` is the complete visibility rule; every other module (retrieval,
console querysets, API, admin actions) asks it and never re-derives visibility.

A principal reads:

* a **user**: everything in the organizations they are a member of (any role); every object
  they hold the guardian ``view_*`` permission on, with what is under it; everything if they
  are a superuser;
* an **agent token**: the scopes it is bound to, with what is under them — nothing once it is
  revoked or expired;
* anyone else: nothing.

"What is under" a scope: repositories, personas, sessions and contexts of an organization, the
sessions of a repository. On top, a readable scope that **subscribes** to a published context
reads that context's scope — exactly what the publisher published, nothing else of its scope.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import Any, overload

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser
from guardian.shortcuts import get_objects_for_user

from accounts.models import ApiToken, Membership, Scope

GUARDED_MODELS = ("organization", "repository", "persona", "session")


class ScopeDenied(PermissionError):
    """A requested scope does not exist or may not be read; the message never says which."""

    def __init__(self) -> None:
        super().__init__("scope not found or not readable")


def _granted_roots(principal: Any) -> set[int] | None:
    """Scope ids granted directly; None means "all" (superuser)."""
    if isinstance(principal, ApiToken):
        if not principal.is_active:
            return set()
        granted = getattr(principal, "granted_scope_ids", None)  # read with the token
        if granted is not None:
            return set(granted)
        return set(principal.scopes.values_list("id", flat=True))
    if not isinstance(principal, AbstractBaseUser) or not principal.is_active:
        return set()
    if principal.is_superuser:
        return None
    roots = set(
        Membership.objects.filter(user=principal).values_list("org__scope_id", flat=True)
    )
    for model_name in GUARDED_MODELS:
        objects = get_objects_for_user(
            principal, f"accounts.view_{model_name}", accept_global_perms=False,
            with_superuser=False,
        )
        roots.update(objects.values_list("scope_id", flat=True))
    return roots


class Readable(frozenset):
    """The readable scope ids — a frozenset — plus the scope rows and subscriptions read to
    compute them, so that questions later in the same request (which organizations does this
    principal reach, which contexts hang under a scope, what does it subscribe to) need no
    further query. Set operations on it return plain frozensets."""

    org_of: dict[int, int]                 # scope id → organization id
    context_children: dict[int, set[int]]  # scope id → its context scopes
    subscriptions: dict[int, set[int]]     # subscriber scope → published context scopes

    def __new__(cls, ids: Iterable[int], org_of: dict[int, int],
                context_children: dict[int, set[int]],
                subscriptions: dict[int, set[int]]) -> Readable:
        readable = super().__new__(cls, ids)
        readable.org_of = org_of
        readable.context_children = context_children
        readable.subscriptions = subscriptions
        return readable

    @property
    def orgs(self) -> frozenset[int]:
        """The organizations in which the principal reads at least one scope."""
        unknown = [s for s in self if s not in self.org_of]  # subscribed across organizations
        if unknown:
            self.org_of.update(Scope.objects.filter(id__in=unknown).values_list("id", "org_id"))
        return frozenset(self.org_of[s] for s in self if s in self.org_of)

    def subscribed(self, scope_ids: Collection[int]) -> set[int]:
        """Scopes of the published contexts that any of ``scope_ids`` (within this set)
        subscribes to."""
        return {c for s in scope_ids for c in self.subscriptions.get(s, ())}


EMPTY = Readable((), {}, {}, {})


def _close_over(roots: set[int] | None, orgs: set[int] | None = None) -> Readable:
    """Roots plus every scope under them, plus the scopes of contexts they subscribe to.

    ``orgs``: the organizations the roots lie in, when the caller already knows them.
    """
    if roots is not None and not roots:
        return EMPTY
    rows = Scope.objects.values_list("id", "parent_id", "org_id", "kind")
    if roots is not None:
        if orgs is None:
            orgs = set(Scope.objects.filter(id__in=roots).values_list("org_id", flat=True))
        rows = rows.filter(org_id__in=orgs)
    children: dict[int, list[int]] = defaultdict(list)
    context_children: dict[int, set[int]] = defaultdict(set)
    org_of: dict[int, int] = {}
    for scope_id, parent_id, org_id, kind in rows:
        org_of[scope_id] = org_id
        if parent_id is not None:
            children[parent_id].append(scope_id)
            if kind == "context":
                context_children[parent_id].add(scope_id)
    if roots is None:  # superuser: everything
        readable: set[int] = set(org_of)
    else:
        readable = set()
        stack = list(roots)
        while stack:
            scope_id = stack.pop()
            if scope_id in readable:
                continue
            readable.add(scope_id)
            stack.extend(children.get(scope_id, ()))
    subscriptions = _subscriptions(None if roots is None else readable)
    subscribed = {c for s in readable for c in subscriptions.get(s, ())}
    return Readable(readable | subscribed, org_of, dict(context_children), subscriptions)


def _subscriptions(scope_ids: Collection[int] | None) -> dict[int, set[int]]:
    """subscriber scope → scopes of the published contexts it subscribes to (of every
    subscriber when ``scope_ids`` is None)."""
    if scope_ids is not None and not scope_ids:
        return {}
    subscription = apps.get_model("contexts", "ContextSubscription")
    pairs = subscription.objects.filter(context__published=True)
    if scope_ids is not None:
        pairs = pairs.filter(subscriber_id__in=scope_ids)
    pairs = pairs.values_list("subscriber_id", "context__scope_id")
    found: dict[int, set[int]] = defaultdict(set)
    for subscriber, context_scope in pairs:
        found[subscriber].add(context_scope)
    return dict(found)


@overload
def readable_scopes(principal: Any, requested: None = None, *,
                    known: Readable | None = None) -> Readable: ...
@overload
def readable_scopes(principal: Any, requested: Iterable[Scope | int], *,
                    known: Readable | None = None) -> frozenset[int]: ...
def readable_scopes(principal: Any, requested: Iterable[Scope | int] | None = None, *,
                    known: Readable | None = None) -> frozenset[int]:
    """The scope ids ``principal`` may read; with ``requested``, exactly those ids.

    A requested scope the principal may not read (or that does not exist) raises
    :class:`ScopeDenied` — it is refused, never silently dropped. ``known`` is this function's
    own earlier answer for the same principal within one request, to avoid recomputing it.
    """
    if known is not None:
        readable = known
    else:
        # A token's scopes all lie in its organization (``accounts.tokens.create_token``).
        orgs = {principal.org_id} if isinstance(principal, ApiToken) else None
        readable = _close_over(_granted_roots(principal), orgs)
    if requested is None:
        return readable
    wanted = frozenset(s.id if isinstance(s, Scope) else int(s) for s in requested)
    if not wanted <= readable:
        raise ScopeDenied()
    return wanted


def retrieval_scopes(principal: Any, chain: Iterable[Scope], *,
                     known: Readable | None = None) -> frozenset[int]:
    """The effective scope set of a retrieval request.

    ``chain`` is the requested session → persona → repository → organization scopes; each must
    be readable. The result adds the contexts defined in those scopes and the published contexts
    they subscribe to — and nothing from sibling scopes (another repository, another session).
    """
    if known is None:
        known = readable_scopes(principal)
    chain_ids = readable_scopes(principal, chain, known=known)
    # Both from what computing the readable set already read: no query here.
    own_contexts = {c for s in chain_ids for c in known.context_children.get(s, ())}
    effective = set(chain_ids) | own_contexts
    effective |= known.subscribed(effective)
    return frozenset(effective)
