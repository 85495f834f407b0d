"""Owner inbox: my open nudges with one-click answers, and the fragments I own."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Membership
from contexts.console.forms import NudgeAnswerForm
from contexts.console.querysets import OPEN_NUDGE_STATES, visible
from contexts.console.rendering import htmx_partial, redirect_back
from contexts.console.views.common import org_context, paginate, remembered_org
from contexts.models import FragmentStatus, Nudge
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services.errors import InvalidOperation
from contexts.usecases import nudges

# A reason's headline, in words, per code (contexts.governance.staleness, nudges,
# secret_nudges); the stored detail follows it, reworded where its shape is known.
HEADLINES = {
    "hot_unverified": "Agents use it often, but nobody has checked it for a while.",
    "source_changed": "A file it comes from changed after it was last checked.",
    "contradicted": "A newer fragment says something different.",
    "handed_over": "It was handed over to you.",
    "secret": "A secret was found in it.",
    "source_conflict": "Its source file changed in the lines a person edited.",
    "source_gone": "The source text it came from was deleted.",
}
_HOT = re.compile(r"^(?P<uses>\d+) uses \((?P<retrievals>\d+) retrievals, (?P<citations>\d+) "
                  r"citations\), last retrieved (?P<last>\S+); not edited or verified for "
                  r"(?P<age>\d+) days \(since (?P<since>\S+); (?P<kind>[\w-]+) limit "
                  r"(?P<limit>[\d.]+) days\)$")
_SOURCE = re.compile(r"^(?P<path>.+) changed (?P<changed>\S+) \S+ after the fragment was last "
                     r"edited or verified \((?P<confirmed>\S+) \S+\)$")


def _reworded(code: str, detail: str) -> str:
    if code == "hot_unverified" and (m := _HOT.match(detail)):
        since = "never" if m["since"] == "never" else f"on {m['since']}"
        return (f"Retrieved {m['retrievals']} times and cited {m['citations']} times, last on "
                f"{m['last']}. Last edited or confirmed {since}, {m['age']} days ago; "
                f"{m['kind']} fragments should be checked every {m['limit']} days.")
    if code == "source_changed" and (m := _SOURCE.match(detail)):
        return (f"{m['path']} changed on {m['changed']}; this fragment was last edited or "
                f"confirmed on {m['confirmed']}.")
    if code == "handed_over":
        return detail[:1].upper() + detail[1:] + "." if detail else ""
    return detail


def plain_reason(reason: dict) -> dict:
    """One stored reason with ``headline`` and ``text`` in plain words (a contradiction keeps
    its passages, shown side by side)."""
    code = reason.get("code") or ""
    detail = reason.get("detail") or ""
    headline = HEADLINES.get(code) or (detail or code.replace("_", " ").capitalize())
    text = _reworded(code, detail)
    return {**reason, "headline": headline,
            "text": "" if text == headline or reason.get("passages") else text}


def _with_members(nudges, user) -> list[Nudge]:
    """Each nudge with its reasons in words and the people its fragment can be handed over
    to (active members of its organization but the user)."""
    nudges = list(nudges)
    org_ids = {n.fragment.org_id for n in nudges}
    members: dict[int, list[str]] = {org_id: [] for org_id in org_ids}
    for org_id, username in (Membership.objects.filter(org_id__in=org_ids, user__is_active=True)
                             .exclude(user_id=user.pk).order_by("user__username")
                             .values_list("org_id", "user__username").distinct()):
        members[org_id].append(username)
    for nudge in nudges:
        nudge.members = members[nudge.fragment.org_id]
        nudge.plain_reasons = [plain_reason(r) for r in nudge.reasons or []]
    return nudges


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    user = request.user
    # The governance inbox (mine + escalations in organizations I lead), within what I read.
    open_nudges = (nudges.inbox(user).filter(fragment__in=seen.fragments())
                   .select_related("fragment__org", "fragment__scope", "owner"))
    escalated = open_nudges.filter(state=NudgeState.ESCALATED).exclude(owner=user)
    mine = (seen.fragments().filter(owner=user, status=FragmentStatus.ACTIVE)
            .select_related("scope", "org").order_by("verified_at", "last_edited_at", "pk"))
    return render(request, "console/inbox.html", {
        **org_context(request, remembered_org(request), "inbox"),
        "nudges": _with_members(open_nudges.filter(owner=user), user),
        "escalated": _with_members(escalated, user),
        "fragments": paginate(request, mine),
        "stale_ids": set(open_nudges.filter(owner=user).values_list("fragment_id",
                                                                       flat=True)),
    })


@login_required
@require_POST
def nudge_answer(request: HttpRequest, fragment_id: str) -> HttpResponse:
    seen = visible(request)
    # A fragment may have one open nudge of each kind: the form says which it answers.
    pending = seen.nudges().filter(state__in=OPEN_NUDGE_STATES,
                                   fragment__public_id=fragment_id)
    kind = request.POST.get("kind", "")
    if kind:
        if kind not in NudgeKind.values:  # a NUL byte or any other unknown kind: no such nudge
            raise Http404("no open nudge")
        pending = pending.filter(kind=kind)
    nudge = pending.select_related("fragment__org").order_by("created_at", "pk").first()
    if nudge is None:
        raise Http404("no open nudge")
    form = NudgeAnswerForm(request.POST)
    error = None
    if not form.is_valid():
        error = "Choose an answer."
    else:
        answer = form.cleaned_data["answer"]
        new_owner = None
        if answer == NudgeAnswer.HANDED_OVER:
            new_owner = get_user_model().objects.filter(
                username=form.cleaned_data["new_owner"],
                memberships__org_id=nudge.fragment.org_id).first()
            if new_owner is None:
                error = ("Choose a member of the organization to hand over to."
                         if form.cleaned_data["new_owner"] else
                         "There is no one else in the organization to hand it over to.")
        if error is None:
            try:
                nudge = nudges.answer(request.user, nudge, answer, new_owner=new_owner)
            except InvalidOperation as exc:
                error = str(exc)
    if htmx_partial(request):
        _with_members([nudge], request.user)
        return render(request, "htmx/nudge_row.html", {"nudge": nudge, "error": error})
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Answered: {nudge.get_answer_display()}.")
    return redirect_back(request, reverse("console:inbox"))
