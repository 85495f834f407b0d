"""Owner inbox: my open nudges with one-click answers, and the fragments I own."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Membership
from contexts.console.forms import NudgeAnswerForm
from contexts.console.querysets import OPEN_NUDGE_STATES, visible
from contexts.console.rendering import htmx_partial, redirect_back
from contexts.console.views.common import org_context, paginate
from contexts.governance.nudges import answer_nudge
from contexts.governance.nudges import inbox as nudges_for
from contexts.models import FragmentStatus, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services.errors import InvalidOperation


def _with_members(nudges) -> list[Nudge]:
    """Each nudge with the people its fragment can be handed over to."""
    nudges = list(nudges)
    org_ids = {n.fragment.org_id for n in nudges}
    members: dict[int, list[str]] = {org_id: [] for org_id in org_ids}
    for org_id, username in (Membership.objects.filter(org_id__in=org_ids, user__is_active=True)
                             .order_by("user__username")
                             .values_list("org_id", "user__username")):
        members[org_id].append(username)
    for nudge in nudges:
        nudge.members = members[nudge.fragment.org_id]
    return nudges


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    user = request.user
    # The governance inbox (mine + escalations in organizations I lead), within what I read.
    open_nudges = (nudges_for(user).filter(fragment__in=seen.fragments())
                   .select_related("fragment__org", "fragment__scope", "owner"))
    escalated = open_nudges.filter(state=NudgeState.ESCALATED).exclude(owner=user)
    mine = (seen.fragments().filter(owner=user, status=FragmentStatus.ACTIVE)
            .select_related("scope", "org").order_by("verified_at", "last_edited_at"))
    org = None
    org_slug = request.session.get("console_org")
    if org_slug:
        org = seen.orgs().filter(slug=org_slug).first()
    return render(request, "console/inbox.html", {
        **org_context(request, org, "inbox"),
        "nudges": _with_members(open_nudges.filter(owner=user)),
        "escalated": _with_members(escalated),
        "fragments": paginate(request, mine),
        "stale_ids": set(open_nudges.filter(owner=user).values_list("fragment_id",
                                                                       flat=True)),
    })


@login_required
@require_POST
def nudge_answer(request: HttpRequest, fragment_id: str) -> HttpResponse:
    seen = visible(request)
    nudge = get_object_or_404(
        seen.nudges().filter(state__in=OPEN_NUDGE_STATES).select_related("fragment__org"),
        fragment__public_id=fragment_id)
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
                error = "Choose a member of the organization to hand over to."
        if error is None:
            try:
                nudge = answer_nudge(request.user, nudge, answer, new_owner=new_owner)
            except InvalidOperation as exc:
                error = str(exc)
    if htmx_partial(request):
        nudge.members = _with_members([nudge])[0].members
        return render(request, "htmx/nudge_row.html", {"nudge": nudge, "error": error})
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Answered: {nudge.get_answer_display()}.")
    return redirect_back(request, reverse("console:inbox"))
