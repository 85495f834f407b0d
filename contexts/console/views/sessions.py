"""Agents' sessions of an organization: repository, external id, created, last write and
state, filtered by state; administrators close them or set when they expire
(``contexts.usecases.session_admin``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Organization, Session
from contexts.console.forms_people import ExpireForm
from contexts.console.querysets import visible
from contexts.console.views.common import get_org, org_context, paginate
from contexts.console.views.members import call
from contexts.services.errors import InvalidOperation
from contexts.usecases import session_admin as usecase


@login_required
@require_GET
def sessions(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    return _page(request, org)


def _page(request: HttpRequest, org: Organization, *, error: str = "",
          status: int = 200) -> HttpResponse:
    seen = visible(request)
    state = request.GET.get("state", "")
    state = state if state in usecase.STATES else ""
    found = usecase.in_state(usecase.with_last_write(
        seen.sessions(org).select_related("opened_by", "repository")), state)
    page = paginate(request, found.order_by("-created_at", "-pk"))
    rows = [{"session": s, "can_manage": seen.may("administer", s.scope)} for s in page]
    return render(request, "console/sessions.html", {
        **org_context(request, org, "sessions"), "page": page, "rows": rows,
        "state": state, "states": usecase.STATES, "expire_form": ExpireForm(),
        "error": error,
    }, status=status)


def _session(request: HttpRequest, org: Organization, session_id: str) -> Session:
    return get_object_or_404(visible(request).sessions(org).select_related("org"),
                             public_id=session_id)


@login_required
@require_POST
def session_close(request: HttpRequest, slug: str, session_id: str) -> HttpResponse:
    org = get_org(request, slug)
    session = call(usecase.close_session, request.user, _session(request, org, session_id))
    messages.success(request, f"Session {session.external_id} closed.")
    return redirect("console:sessions", slug=org.slug)


@login_required
@require_POST
def session_expire(request: HttpRequest, slug: str, session_id: str) -> HttpResponse:
    org = get_org(request, slug)
    session = _session(request, org, session_id)
    if not visible(request).may("administer", session.scope):
        raise PermissionDenied("only administrators close and expire sessions")
    form = ExpireForm(request.POST)
    if not form.is_valid():
        return _page(request, org, error="Expires: enter a date and time", status=400)
    at = form.cleaned_data["expires_at"]
    try:
        session = call(usecase.expire_session, request.user, session, at)
    except InvalidOperation as exc:
        return _page(request, org, error=f"{session.external_id}: {exc}", status=400)
    when = ("now" if session.expires_at <= timezone.now()
            else timezone.localtime(session.expires_at).strftime("%Y-%m-%d %H:%M"))
    messages.success(request, f"Session {session.external_id} expires {when}.")
    return redirect("console:sessions", slug=org.slug)
