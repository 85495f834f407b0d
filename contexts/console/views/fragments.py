"""Fragment list per scope (filters, sort, pages) and its inline row actions."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Scope
from contexts.console.filters import FragmentFilter
from contexts.console.identity import attach
from contexts.console.querysets import OPEN_NUDGE_STATES, Visible, visible
from contexts.console.rendering import htmx_partial, redirect_back, render_page
from contexts.console.views.common import get_fragment, get_scope, org_context, paginate
from contexts.console.views.fragment_detail import content_context, panels_context
from contexts.kernel.ids import InvalidField
from contexts.models import Fragment, Nudge, Pin
from contexts.services.errors import InvalidOperation
from contexts.usecases import curation


def rows(seen: Visible, scope: Scope) -> QuerySet[Fragment]:
    """The scope's fragments with what a row shows: pinned here, stale, owner."""
    return (seen.fragments().filter(scope=scope).select_related("owner").annotate(
        is_pinned=Exists(Pin.objects.filter(fragment=OuterRef("pk"), scope=scope)),
        is_stale=Exists(Nudge.objects.filter(fragment=OuterRef("pk"),
                                             state__in=OPEN_NUDGE_STATES)),
    ))


def row_context(seen: Visible, scope: Scope) -> dict:
    return {"scope": scope, "can_curate": seen.may("curate", scope),
            "can_pin": seen.may("pin", scope),
            "list_url": reverse("console:scope-fragments", args=[scope.public_id])}


@login_required
@require_GET
def fragment_list(request: HttpRequest, scope_id: str) -> HttpResponse:
    scope = get_scope(request, scope_id)
    seen = visible(request)
    base = rows(seen, scope)
    filters = FragmentFilter(
        request.GET, base,
        owners=list(seen.members(scope.org).values_list("username", flat=True)),
        languages=sorted(set(base.exclude(language="").values_list("language", flat=True))),
    )
    page = paginate(request, filters.qs)
    page.object_list = attach(page.object_list)  # source, part, heading: one query
    context = {**org_context(request, scope.org, "overview"), **row_context(seen, scope),
               "form": filters.form, "page": page, "next": request.get_full_path(),
               "can_write": seen.may("curate", scope),
               # Nothing in the scope at all (not merely nothing the filters let through):
               # the empty table says how to put something in.
               "scope_empty": not page.object_list and not base.exists()}
    return render_page(request, "console/fragment_list.html", "htmx/fragment_table.html",
                       context, target="fragment-table")


# --- row actions ------------------------------------------------------------------------------
def _action_response(request: HttpRequest, fragment: Fragment, scope: Scope) -> HttpResponse:
    """The partial the caller asked for (``partial``), or a redirect without JavaScript."""
    seen = visible(request)
    partial = request.POST.get("partial", "row")
    if htmx_partial(request) and partial == "pin":
        return render(request, "htmx/pin_button.html", {
            "fragment": fragment, "scope": scope, "can_pin": seen.may("pin", scope),
            "is_pinned": Pin.objects.filter(fragment=fragment, scope=scope).exists(),
            "next": request.POST.get("next", "")})
    if htmx_partial(request) and partial == "content":
        # The fragment's page: its content, and the details and audit panels out of band
        # (a retirement or restore changes the status shown there and adds an audit event).
        fragment.refresh_from_db()
        return render(request, "htmx/fragment_changed.html",
                      {**content_context(request, fragment), **panels_context(seen, fragment)})
    if htmx_partial(request) and partial == "row":
        row = attach([rows(seen, scope).get(pk=fragment.pk)])[0]
        return render(request, "htmx/fragment_row.html", {**row_context(seen, scope),
                                                          "fragment": row})
    return redirect_back(request, reverse("console:fragment", args=[fragment.public_id]))


def _action_scope(request: HttpRequest, fragment: Fragment) -> Scope:
    """The scope a row action happens in: the list's (``scope``) or the fragment's home."""
    scope_id = request.POST.get("scope")
    return get_scope(request, scope_id, "scope") if scope_id else fragment.scope


# As the edit form's "why": PostgreSQL cannot store a NUL, so one is a 400, not a 500.
_REASON = forms.CharField(max_length=300, required=False)


def _reason(request: HttpRequest) -> str:
    try:
        return _REASON.clean(request.POST.get("reason", ""))
    except ValidationError as exc:
        raise InvalidField("reason", exc.messages[0]) from exc


def _invalid(request: HttpRequest, exc: InvalidOperation) -> HttpResponse:
    if htmx_partial(request):
        return HttpResponseBadRequest(str(exc))
    messages.error(request, str(exc))
    return redirect_back(request, "/")


@login_required
@require_POST
def pin(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    scope = _action_scope(request, fragment)
    try:
        curation.pin(request.user, fragment, scope, reason=_reason(request))
    except InvalidOperation as exc:
        return _invalid(request, exc)
    return _action_response(request, fragment, scope)


@login_required
@require_POST
def unpin(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    scope = _action_scope(request, fragment)
    curation.unpin(request.user, fragment, scope)
    return _action_response(request, fragment, scope)


@login_required
@require_POST
def retire(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    curation.retire(request.user, fragment, reason=_reason(request))
    return _action_response(request, fragment, _action_scope(request, fragment))


@login_required
@require_POST
def restore(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    reason = _reason(request)
    # Bringing a fragment back to agents says why (the audit trail keeps it); one who may not
    # restore is refused as such, whatever the form held.
    if not reason.strip() and visible(request).may("curate", fragment.scope):
        raise InvalidField("reason", "say why this fragment is restored")
    curation.restore(request.user, fragment, reason=reason)
    return _action_response(request, fragment, _action_scope(request, fragment))


@login_required
@require_POST
def negative(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    curation.mark_negative(request.user, fragment, request.POST.get("value", "1") == "1")
    return _action_response(request, fragment, _action_scope(request, fragment))
