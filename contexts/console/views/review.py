"""The review queue of an organization (``/o/<slug>/review/``): what agents proposed — a
session fragment to promote, or a new repository fragment — for its tech leads and
administrators to approve (optionally editing title and body), reject with a reason, or merge
into an existing fragment (``contexts.usecases.proposals``; docs/console.md "Review").

A stranger gets 404 (the organization is not theirs to see), a member who reviews nowhere in
it (viewer, curator) 403; a repository's tech lead sees the proposals targeting that
repository only; a proposal outside the reviewer's readable scopes is a 404, one they read
but do not review a 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Organization, ProposalPolicy
from contexts.console.views.common import get_org, org_context
from contexts.console.views.members import call
from contexts.models import ProposalState
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases import proposals as usecase

STATES = tuple(ProposalState.values)


def _reviewer_org(request: HttpRequest, slug: str) -> Organization:
    """The organization, for a reviewer of its proposals: its tech leads and administrators,
    and a repository's tech lead (who sees and decides that repository's proposals only)."""
    org = get_org(request, slug)  # 404 for strangers
    if not usecase.reviews_in(request.user, org):
        raise PermissionDenied("only tech leads and administrators review proposals")
    return org


@login_required
@require_GET
def review(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, _reviewer_org(request, slug))


def _page(request: HttpRequest, org: Organization, *, error: str = "", failed: str = "",
          status: int = 200) -> HttpResponse:
    state = request.GET.get("state", ProposalState.OPEN)
    state = state if state in STATES or state == "" else ProposalState.OPEN
    rows = usecase.review_queue(request.user, org, state)
    return render(request, "console/review.html", {
        **org_context(request, org, "review"), "rows": rows, "state": state,
        "states": STATES, "error": error, "failed": failed,
        "policies": [(obj, can) for obj, can in usecase.policies(request.user, org)],
        "policy_choices": ProposalPolicy.choices,
    }, status=status)


def _act(request: HttpRequest, slug: str, proposal_id: str, action, done: str
         ) -> HttpResponse:
    org = _reviewer_org(request, slug)
    proposal = call(usecase.reviewable, request.user, org, proposal_id)
    try:
        decided = call(action, proposal)
    except (InvalidOperation, EditConflict) as exc:
        field = getattr(exc, "field", None)
        what = f"{field}: " if field and field != "proposal" else ""
        return _page(request, org, error=f"{proposal.public_id}: {what}{exc}",
                     failed=proposal.public_id, status=400)
    title = (decided.result_fragment.title if decided.result_fragment_id else decided.title)
    # ``title``: what the fragment is called now; ``proposed``: what the agent called it (a
    # merge names both, or it reads as if the target had been merged away).
    messages.success(request, done.format(title=title or decided.public_id,
                                          proposed=decided.title or decided.public_id))
    return redirect("console:review", slug=org.slug)


def _text(request: HttpRequest, name: str) -> str | None:
    value = request.POST.get(name)
    return None if value is None else value.replace("\r\n", "\n")


@login_required
@require_POST
def approve(request: HttpRequest, slug: str, proposal_id: str) -> HttpResponse:
    return _act(request, slug, proposal_id,
                lambda p: usecase.approve(request.user, p, title=_text(request, "title"),
                                          body=_text(request, "body")),
                "Approved “{title}”: it is now a fragment of its scope.")


@login_required
@require_POST
def reject(request: HttpRequest, slug: str, proposal_id: str) -> HttpResponse:
    return _act(request, slug, proposal_id,
                lambda p: usecase.reject(request.user, p, request.POST.get("reason", "")),
                "Rejected “{title}”.")


@login_required
@require_POST
def merge(request: HttpRequest, slug: str, proposal_id: str) -> HttpResponse:
    into = request.POST.get("into", "").strip()
    return _act(request, slug, proposal_id,
                lambda p: usecase.merge(request.user, p, into, body=_text(request, "body") or "",
                                        title=_text(request, "title")),
                "Merged the proposal “{proposed}” into “{title}”.")


@login_required
@require_POST
def policy(request: HttpRequest, slug: str) -> HttpResponse:
    """Set the proposal policy of the organization or a repository (administrators)."""
    org = _reviewer_org(request, slug)
    try:
        obj = call(usecase.set_policy, request.user, org, request.POST.get("scope_id", ""),
                   request.POST.get("policy", ""))
    except InvalidOperation as exc:
        return _page(request, org, error=f"Policy: {exc}", status=400)
    name = obj.slug
    messages.success(request, f"Proposals for {name}: {obj.get_proposal_policy_display()}.")
    return redirect("console:review", slug=org.slug)

