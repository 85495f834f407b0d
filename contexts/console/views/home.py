"""Home (with the invitations waiting for the person's answer), organization switcher and
organization overview (the navigation tree with counts, and the ingestion under way)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from contexts.console.querysets import OPEN_NUDGE_STATES, Visible, visible
from contexts.console.rendering import htmx_partial
from contexts.console.views.common import get_org, org_context
from contexts.console.views.fragment_new import writable_scopes
from contexts.kernel.ids import parse_slug
from contexts.models import FragmentStatus, IngestionJob, JobState
from contexts.usecases import invitations

ACTIVITY_TARGET = "ingest-activity"  # the overview's section; a home card's is ...-<org slug>
UNDER_WAY = (JobState.QUEUED, JobState.RUNNING)


@dataclass(frozen=True)
class JobActivity:
    """How far a queued or running job got, for a person watching it: files, fragments
    written so far, the rate since it started and the time left at that rate."""

    job: IngestionJob
    fragments: int
    files_per_minute: float | None
    seconds_left: float | None

    @property
    def minutes_left(self) -> int | None:
        return None if self.seconds_left is None else max(1, round(self.seconds_left / 60))


def job_activity(job: IngestionJob, now: datetime) -> JobActivity:
    fragments = job.fragments_created + job.fragments_updated + job.fragments_unchanged
    rate = left = None
    if job.state == JobState.RUNNING and job.started_at and job.files_done:
        elapsed = (now - job.started_at).total_seconds()
        if elapsed > 0:
            rate = job.files_done / elapsed * 60
            left = max(0, job.files_total - job.files_done) / rate * 60
    return JobActivity(job, fragments, rate, left)


def org_activity(seen: Visible, org) -> list[JobActivity]:
    """The organization's jobs under way that this person sees, oldest first."""
    now = timezone.now()
    jobs = (seen.jobs().filter(org=org, state__in=UNDER_WAY).select_related("scope")
            .order_by("created_at"))
    return [job_activity(job, now) for job in jobs]


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    orgs = seen.org_list
    counts = dict(seen.fragments().filter(status=FragmentStatus.ACTIVE, org__in=orgs)
                  .values_list("org_id").annotate(n=Count("pk")))
    under_way = set(seen.jobs().filter(org__in=orgs, state__in=UNDER_WAY)
                    .values_list("org_id", flat=True))
    for org in orgs:
        org.fragment_count = counts.get(org.pk, 0)
        org.activity = org_activity(seen, org) if org.pk in under_way else []
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
    # The ingestion section polls itself (every 3 s, only while a job is under way): on the
    # overview in full, on a home card (target ...-<slug>) as one line.
    if htmx_partial(request, ACTIVITY_TARGET) or htmx_partial(request,
                                                              f"{ACTIVITY_TARGET}-{org.slug}"):
        compact = request.htmx.target != ACTIVITY_TARGET
        return render(request, "htmx/ingest_activity.html",
                      {**_activity_context(seen, org, compact=compact), "polled": True})
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
        # A fresh organization (nothing active in any scope it shows this person): the page
        # says how knowledge gets in, instead of a column of zeros.
        "first_steps": not any(c["active"] for c in counts.values()),
        **_activity_context(seen, org, compact=False),
    })


def _activity_context(seen: Visible, org, *, compact: bool) -> dict:
    active = (seen.fragments().filter(org=org, status=FragmentStatus.ACTIVE).count()
              if compact else None)
    return {"activity": org_activity(seen, org), "activity_org": org, "compact": compact,
            "active_count": active}
