"""Governance pages: the dashboard, one-click nudge answers, supersession chains, dedup review.

The nudge links in emails carry a signed token (nudge + person, expiring) instead of a login:
the owner clicks and lands on a confirmation page with a single button. The answer is applied on
POST only — mail security scanners and link previews fetch every URL in an email with GET, and
a GET that answered would mark fragments "still accurate" that nobody looked at.
"""

from __future__ import annotations

import datetime as dt

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import Organization
from accounts.permissions import may
from accounts.scopes import readable_scopes
from contexts.governance import nudges, report
from contexts.governance.dedup_review import dismiss_candidate, merge_duplicates
from contexts.governance.supersession import supersession_chain
from contexts.models import DedupCandidate, DedupState, Fragment, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services.errors import EditConflict, InvalidOperation


def current_time() -> dt.datetime:
    """The pages' clock (tests replace it, as every governance rule takes ``now``)."""
    return timezone.now()


def member_orgs(user: AbstractBaseUser) -> list[Organization]:
    if user.is_superuser:
        return list(Organization.objects.order_by("slug"))
    return list(Organization.objects.filter(memberships__user=user).distinct().order_by("slug"))


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    orgs = member_orgs(request.user)
    wanted = request.GET.get("org")
    if wanted:
        orgs = [o for o in orgs if wanted in (o.slug, o.public_id)]
    return render(request, "governance/dashboard.html", {
        "reports": [report.org_report(org, current_time()) for org in orgs],
        "generations": report.generations(),
    })


# --- one-click nudge answers -------------------------------------------------------------------
@require_http_methods(["GET", "POST"])
def nudge_answer(request: HttpRequest, token: str, answer: str) -> HttpResponse:
    if answer not in nudges.ANSWER_SLUGS:
        raise Http404("unknown answer")
    try:
        nudge_id, user_id = nudges.read_token(token)
    except signing.SignatureExpired:
        return render(request, "governance/nudge_link_invalid.html", {"expired": True},
                      status=410)
    except signing.BadSignature:
        return render(request, "governance/nudge_link_invalid.html", {"expired": False},
                      status=400)
    nudge = Nudge.objects.select_related("fragment", "fragment__owner", "fragment__org",
                                         "answered_by").filter(pk=nudge_id).first()
    user = get_user_model().objects.filter(pk=user_id).first()
    if nudge is None or user is None:
        return render(request, "governance/nudge_link_invalid.html", {"expired": False},
                      status=400)
    choice = nudges.ANSWER_SLUGS[answer]
    context = {"nudge": nudge, "fragment": nudge.fragment, "person": user, "answer": answer,
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
        answered = nudges.answer_nudge(user, nudge, choice, new_owner, body=body,
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
def chain(request: HttpRequest, public_id: str) -> HttpResponse:
    fragment = get_object_or_404(Fragment, public_id=public_id)
    readable = readable_scopes(request.user)
    if fragment.scope_id not in readable:
        raise Http404("no such fragment")  # the same answer as for a missing one
    links = [(f, bool(set(f.scope_ids) & readable)) for f in supersession_chain(fragment)]
    return render(request, "governance/chain.html", {"fragment": fragment, "chain": links})


# --- dedup review ------------------------------------------------------------------------------
def _curated_orgs(user: AbstractBaseUser) -> list[Organization]:
    return [org for org in member_orgs(user) if may(user, "curate", org.scope)]


@login_required
def dedup_review(request: HttpRequest) -> HttpResponse:
    orgs = _curated_orgs(request.user)
    candidates = (DedupCandidate.objects.filter(org__in=orgs, state=DedupState.PROPOSED)
                  .select_related("org", "fragment_a", "fragment_b", "fragment_a__owner",
                                  "fragment_b__owner", "fragment_a__scope", "fragment_b__scope")
                  .order_by("org__slug", "distance", "-cosine", "pk"))
    visible = [c for c in candidates if may(request.user, "curate", c.fragment_a.scope)
               and may(request.user, "curate", c.fragment_b.scope)]
    return render(request, "governance/dedup.html", {"candidates": visible[:200],
                                                     "total": len(visible)})


@login_required
@require_POST
def dedup_decide(request: HttpRequest, pk: int) -> HttpResponse:
    candidate = get_object_or_404(
        DedupCandidate.objects.filter(org__in=_curated_orgs(request.user)), pk=pk)
    action = request.POST.get("action")
    try:
        if action == "dismiss":
            dismiss_candidate(request.user, candidate)
            messages.success(request, "Proposal dismissed.")
        elif action in ("keep-a", "keep-b"):
            keep, drop = candidate.fragment_a, candidate.fragment_b
            if action == "keep-b":
                keep, drop = drop, keep
            merge_duplicates(request.user, keep, drop)
            messages.success(request, f"{drop.public_id} merged into {keep.public_id}.")
        else:
            messages.error(request, "Unknown action.")
    except (InvalidOperation, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("governance:dedup")
