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
from typing import Any

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


def _close_over(roots: set[int] | None, orgs: set[int] | None = None) -> frozenset[int]:
    """Roots plus every scope under them, plus the scopes of contexts they subscribe to.

    ``orgs``: the organizations the roots lie in, when the caller already knows them.
    """
    if roots is None:
        return frozenset(Scope.objects.values_list("id", flat=True))
    if not roots:
        return frozenset()
    if orgs is None:
        orgs = set(Scope.objects.filter(id__in=roots).values_list("org_id", flat=True))
    children: dict[int, list[int]] = defaultdict(list)
    for scope_id, parent_id in Scope.objects.filter(org_id__in=orgs).values_list("id",
                                                                                "parent_id"):
        if parent_id is not None:
            children[parent_id].append(scope_id)
    readable: set[int] = set()
    stack = list(roots)
    while stack:
        scope_id = stack.pop()
        if scope_id in readable:
            continue
        readable.add(scope_id)
        stack.extend(children.get(scope_id, ()))
    return frozenset(readable | subscribed_context_scopes(readable))


def subscribed_context_scopes(scope_ids: Collection[int]) -> set[int]:
    """Scopes of the published contexts that any of ``scope_ids`` subscribes to."""
    if not scope_ids:
        return set()
    subscription = apps.get_model("contexts", "ContextSubscription")
    return set(
        subscription.objects.filter(
            subscriber_id__in=scope_ids, context__published=True
        ).values_list("context__scope_id", flat=True)
    )


def readable_scopes(principal: Any, requested: Iterable[Scope | int] | None = None, *,
                    known: frozenset[int] | None = None) -> frozenset[int]:
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
                     known: frozenset[int] | None = None) -> frozenset[int]:
    """The effective scope set of a retrieval request.

    ``chain`` is the requested session → persona → repository → organization scopes; each must
    be readable. The result adds the contexts defined in those scopes and the published contexts
    they subscribe to — and nothing from sibling scopes (another repository, another session).
    """
    chain_ids = readable_scopes(principal, chain, known=known)
    own_contexts = set(
        Scope.objects.filter(parent_id__in=chain_ids, kind="context").values_list("id",
                                                                                flat=True)
    )
    effective = set(chain_ids) | own_contexts
    effective |= subscribed_context_scopes(effective)
    return frozenset(effective)
