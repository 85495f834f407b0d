"""Governance pages: the dashboard, one-click nudge answers, supersession chains, dedup review.

The rules live in ``contexts.governance`` (a domain package); these views only parse, call and
render, in the console like every other page.

The nudge links in emails carry a signed token (nudge + person, expiring) instead of a login:
the owner clicks and lands on a confirmation page with a single button. The answer is applied on
POST only — mail security scanners and link previews fetch every URL in an email with GET, and
a GET that answered would mark fragments "still accurate" that nobody looked at.

These are console pages: the console's layout and navigation, and its visibility rule — every
organization, fragment and permission comes from :func:`contexts.console.querysets.visible`
(``accounts.scopes.readable_scopes`` underneath), asked once per request.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.models import Organization
from contexts.console.querysets import Visible, visible
from contexts.console.views.common import get_fragment, org_context, remembered_org
from contexts.governance import report
from contexts.governance.supersession import supersession_chain
from contexts.models import DedupCandidate, DedupState, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases import curation, nudges


def current_time() -> dt.datetime:
    """The pages' clock (tests replace it, as every governance rule takes ``now``)."""
    return timezone.now()


def layout(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    """The console layout's context, on the organization the console last showed. A nudge
    link's visitor need not be signed in: then the layout shows no navigation."""
    if not request.user.is_authenticated:
        return {"nav_active": "governance", **extra}
    return org_context(request, remembered_org(request), "governance", **extra)


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    orgs = seen.org_list
    wanted = request.GET.get("org")
    if wanted:
        orgs = [o for o in orgs if wanted in (o.slug, o.public_id)]
    fragments = seen.fragments()
    return render(request, "governance/dashboard.html", layout(
        request,
        reports=[report.org_report(org, current_time(), fragments=fragments) for org in orgs],
        generations=report.generations()))


# --- one-click nudge answers -------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def nudge_answer(request: HttpRequest, token: str, answer: str) -> HttpResponse:
    if answer not in nudges.ANSWER_SLUGS:
        raise Http404("unknown answer")
    try:
        nudge_id, user_id = nudges.read_token(token)
    except signing.SignatureExpired:
        return render(request, "governance/nudge_link_invalid.html", layout(request, expired=True),
                      status=410)
    except signing.BadSignature:
        return render(request, "governance/nudge_link_invalid.html", layout(request, expired=False),
                      status=400)
    nudge = Nudge.objects.select_related("fragment", "fragment__owner", "fragment__org",
                                         "answered_by").filter(nudges.by_token_id(nudge_id)).first()
    user = get_user_model().objects.filter(pk=user_id).first()
    if nudge is None or user is None:
        return render(request, "governance/nudge_link_invalid.html", layout(request, expired=False),
                      status=400)
    choice = nudges.ANSWER_SLUGS[answer]
    context = {**layout(request), "nudge": nudge, "fragment": nudge.fragment, "person": user,
               "answer": answer,
               "choice": choice, "choice_label": NudgeAnswer(choice).label,
               "candidates": nudges.candidates_for_handover(nudge.fragment)
               if choice == NudgeAnswer.HANDED_OVER else [],
               "error": None, "done": False}
    if nudge.state == NudgeState.ANSWERED:
        return render(request, "governance/nudge_answer.html", {**context, "done": True})
    if not nudges.may_answer(user, nudge):
        return render(request, "governance/nudge_answer.html",
                      {**context, "error": "You may no longer answer this question."},
                      status=403)
    if request.method == "GET":
        return render(request, "governance/nudge_answer.html", context)

    new_owner = None
    if choice == NudgeAnswer.HANDED_OVER:
        new_owner = context["candidates"].filter(pk=request.POST.get("new_owner") or 0).first()
    body = request.POST.get("body") if choice == NudgeAnswer.EDITED else None
    try:
        version = int(request.POST.get("version") or nudge.fragment.version)
        answered = nudges.answer(user, nudge, choice, new_owner, body=body,
                                       title=request.POST.get("title"),
                                       based_on_version=version)
    except nudges.NudgeAlreadyAnswered as exc:
        answered = exc.nudge
    except EditConflict as exc:
        return render(request, "governance/nudge_answer.html",
                      {**context, "error": str(exc), "conflict": exc}, status=409)
    except (InvalidOperation, ValueError) as exc:
        return render(request, "governance/nudge_answer.html", {**context, "error": str(exc)},
                      status=400)
    except PermissionDenied as exc:
        return render(request, "governance/nudge_answer.html", {**context, "error": str(exc)},
                      status=403)
    answered.refresh_from_db()
    nudge.fragment.refresh_from_db()
    return render(request, "governance/nudge_answer.html",
                  {**context, "nudge": answered, "done": answered.state == NudgeState.ANSWERED,
                   "pending_edit": answered.state != NudgeState.ANSWERED})


# --- supersession chain ------------------------------------------------------------------------
@login_required
@require_GET
def chain(request: HttpRequest, public_id: str) -> HttpResponse:
    # The console's lookup: a fragment the viewer may not read is a 404, like a missing one.
    fragment = get_fragment(request, public_id, "public_id")
    readable = visible(request).scope_ids
    links = [(f, bool(set(f.scope_ids) & readable)) for f in supersession_chain(fragment)]
    return render(request, "governance/chain.html",
                  layout(request, fragment=fragment, chain=links))


# --- dedup review ------------------------------------------------------------------------------
def _curated_orgs(seen: Visible) -> list[Organization]:
    return [org for org in seen.org_list if seen.may("curate", org.scope)]


def _proposals(seen: Visible) -> QuerySet[DedupCandidate]:
    """Open proposals of organizations the viewer curates, both fragments readable."""
    fragments = seen.fragments()
    return (DedupCandidate.objects.filter(org__in=_curated_orgs(seen),
                                          state=DedupState.PROPOSED,
                                          fragment_a__in=fragments, fragment_b__in=fragments)
            .select_related("org", "fragment_a__owner", "fragment_b__owner",
                            "fragment_a__scope", "fragment_b__scope"))


@login_required
@require_GET
def dedup_review(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    candidates = list(_proposals(seen).order_by("org__slug", "distance", "-cosine", "pk"))
    # Curating both fragments' scopes is needed to merge. Asked once per distinct scope (and
    # memoised by Visible for the request), not twice per proposal.
    scopes = {f.scope_id: f.scope for c in candidates for f in (c.fragment_a, c.fragment_b)}
    curated = {scope_id for scope_id, scope in scopes.items() if seen.may("curate", scope)}
    shown = [c for c in candidates
             if {c.fragment_a.scope_id, c.fragment_b.scope_id} <= curated]
    for candidate in shown[:200]:
        candidate.pair = [("A", candidate.fragment_a), ("B", candidate.fragment_b)]
    return render(request, "governance/dedup.html",
                  layout(request, candidates=shown[:200], total=len(shown)))


@login_required
@require_POST
def dedup_decide(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = get_object_or_404(_proposals(visible(request)), pk=pk)
    action = request.POST.get("action")
    try:
        if action == "dismiss":
            curation.dismiss_duplicate(request.user, candidate)
            messages.success(request, "Proposal dismissed.")
        elif action in ("keep-a", "keep-b"):
            keep, drop = candidate.fragment_a, candidate.fragment_b
            if action == "keep-b":
                keep, drop = drop, keep
            curation.merge_duplicates(request.user, keep, drop)
            messages.success(request, f"{drop.public_id} merged into {keep.public_id}.")
        else:
            messages.error(request, "Unknown action.")
    except (InvalidOperation, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("governance:dedup")
