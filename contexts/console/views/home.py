"""Home (with the invitations waiting for the person's answer), organization switcher and
organization overview (the navigation tree with counts)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from contexts.console.querysets import OPEN_NUDGE_STATES, visible
from contexts.console.views.common import get_org, org_context
from contexts.console.views.fragment_new import writable_scopes
from contexts.kernel.ids import parse_slug
from contexts.models import FragmentStatus
from contexts.usecases import invitations


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    orgs = list(seen.orgs().order_by("slug"))
    counts = dict(seen.fragments().filter(status=FragmentStatus.ACTIVE, org__in=orgs)
                  .values_list("org_id").annotate(n=Count("pk")))
    for org in orgs:
        org.fragment_count = counts.get(org.pk, 0)
    inbox = seen.nudges().filter(owner=request.user, state__in=OPEN_NUDGE_STATES).count()
    return render(request, "console/home.html", {
        **org_context(request, None, "home"), "org_cards": orgs, "inbox_count": inbox,
        "invitations": invitations.pending_for(request.user)})


@login_required
@require_GET
def switch_org(request: HttpRequest) -> HttpResponse:
    slug = parse_slug(request.GET.get("org", ""), "org")
    if not visible(request).orgs().filter(slug=slug).exists():
        raise Http404
    return redirect("console:org", slug=slug)


def _count_by_scope(seen, org) -> dict[int, dict[str, int]]:
    rows = (seen.fragments().filter(org=org).values("scope_id").annotate(
        active=Count("pk", distinct=True, filter=Q(status=FragmentStatus.ACTIVE)),
        total=Count("pk", distinct=True),
        stale=Count("pk", distinct=True, filter=Q(status=FragmentStatus.ACTIVE,
                                                  nudges__state__in=OPEN_NUDGE_STATES))))
    pins = dict(seen.pins().filter(scope__org=org).values_list("scope_id")
                .annotate(n=Count("pk")))
    out = {row["scope_id"]: {**row, "pins": 0} for row in rows}
    for scope_id, n in pins.items():
        out.setdefault(scope_id, {"active": 0, "total": 0, "stale": 0})["pins"] = n
    return out


@login_required
@require_GET
def org_overview(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    seen = visible(request)
    counts = _count_by_scope(seen, org)
    empty = {"active": 0, "total": 0, "stale": 0, "pins": 0}

    def with_counts(objects):
        objects = list(objects)
        for obj in objects:
            obj.counts = counts.get(obj.scope_id, empty)
        return objects

    sessions = seen.sessions(org)
    return render(request, "console/org.html", {
        **org_context(request, org, "overview"),
        "org_counts": counts.get(org.scope_id, empty),
        "org_readable": org.scope_id in seen.scope_ids,
        "repositories": with_counts(seen.repositories(org)),
        "personas": with_counts(seen.personas(org)),
        "sessions": with_counts(sessions[:25]),
        "session_total": sessions.count(),
        "bundles": with_counts(seen.contexts(org)),
        "can_write": bool(writable_scopes(seen, org)),
    })
