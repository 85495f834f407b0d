"""What a console user may see, restricted at the source (NetBox's ``.restrict(user)``).

Every console view starts from :func:`visible` and never from ``Model.objects``: the rule itself
lives in ``accounts.scopes.readable_scopes`` and is asked once per request. An object outside
these querysets is a 404 — the console never says that it exists.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.models import (
    ApiToken,
    Organization,
    Persona,
    Repository,
    Scope,
    ScopeKind,
    Session,
)
from accounts.permissions import may
from accounts.scopes import Readable, readable_scopes
from contexts.models import (
    AuditEvent,
    Context,
    Fragment,
    IngestionJob,
    Nudge,
    Pin,
    RetrievalTrace,
)
from contexts.models.governance import NudgeState

OPEN_NUDGE_STATES = (NudgeState.OPEN, NudgeState.ESCALATED)


class Visible:
    """The querysets one user may read, each filtered by their readable scopes."""

    def __init__(self, user: Any) -> None:
        self.user = user
        self._may: dict[tuple[str, int], bool] = {}

    @cached_property
    def scope_ids(self) -> Readable:
        return readable_scopes(self.user)

    @property
    def _ids(self) -> list[int]:
        return sorted(self.scope_ids)

    def may(self, action: str, scope: Scope) -> bool:
        """``accounts.permissions.may``, asked once per action and scope for the request (a
        page listing many rows of few scopes checks each scope once; each check costs
        several queries: roles, guardian grants up the scope tree)."""
        key = (action, scope.id)
        if key not in self._may:
            self._may[key] = may(self.user, action, scope, known=self.scope_ids)
        return self._may[key]

    # --- the scope tree -------------------------------------------------------------------
    def orgs(self) -> QuerySet[Organization]:
        """Organizations with a readable scope of their own (a subscribed context of another
        organization does not make that organization navigable)."""
        owning = (Scope.objects.filter(id__in=self._ids).exclude(kind=ScopeKind.CONTEXT)
                  .values("org_id"))
        return Organization.objects.filter(pk__in=owning).select_related("scope")

    @cached_property
    def org_list(self) -> list[Organization]:
        """:meth:`orgs` by slug, read once per request: the layout's switcher and the
        organization a page without one of its own shows come from the same rows."""
        return list(self.orgs().order_by("slug"))

    def scopes(self) -> QuerySet[Scope]:
        return Scope.objects.filter(id__in=self._ids).select_related("org")

    def repositories(self, org: Organization) -> QuerySet[Repository]:
        return Repository.objects.filter(org=org, scope_id__in=self._ids).select_related("scope")

    def personas(self, org: Organization) -> QuerySet[Persona]:
        return Persona.objects.filter(org=org, scope_id__in=self._ids).select_related("scope")

    def sessions(self, org: Organization) -> QuerySet[Session]:
        return (Session.objects.filter(org=org, scope_id__in=self._ids)
                .select_related("scope", "repository"))

    def contexts(self, org: Organization) -> QuerySet[Context]:
        return Context.objects.filter(org=org, scope_id__in=self._ids).select_related("scope")

    # --- what lives in scopes -------------------------------------------------------------
    def fragments(self) -> QuerySet[Fragment]:
        """Fragments visible in any readable scope (home scope or a context they are in)."""
        return Fragment.objects.filter(scope_ids__overlap=self._ids)

    def pins(self) -> QuerySet[Pin]:
        return Pin.objects.filter(scope_id__in=self._ids, fragment__in=self.fragments())

    def nudges(self) -> QuerySet[Nudge]:
        return Nudge.objects.filter(fragment__in=self.fragments())

    def jobs(self) -> QuerySet[IngestionJob]:
        return IngestionJob.objects.filter(scope_id__in=self._ids)

    def traces(self) -> QuerySet[RetrievalTrace]:
        """A trace is readable by whoever may read every scope it searched (as in the API)."""
        return RetrievalTrace.objects.filter(org__in=self.orgs(),
                                             scope_ids__contained_by=self._ids)

    def audit_events(self, fragment: Fragment) -> QuerySet[AuditEvent]:
        return AuditEvent.objects.filter(org_id=fragment.org_id, object_type="fragment",
                                         object_id=fragment.public_id)

    def members(self, org: Organization) -> QuerySet:
        """People who can own fragments of ``org``: its members."""
        if org not in self.orgs():
            return get_user_model().objects.none()
        return (get_user_model().objects.filter(memberships__org=org, is_active=True)
                .order_by("username"))

    def tokens(self, org: Organization) -> QuerySet[ApiToken]:
        """Tokens of ``org``, for its administrators only."""
        if not self.may("administer", org.scope):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(org=org).prefetch_related("scopes")


def visible(request: HttpRequest) -> Visible:
    """The request user's :class:`Visible`, computed once per request."""
    cached = getattr(request, "_console_visible", None)
    if cached is None or cached.user is not request.user:
        cached = Visible(request.user)
        request._console_visible = cached
    return cached
