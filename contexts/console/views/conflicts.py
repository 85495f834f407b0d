"""A source conflict, answered in the console (``/inbox/<fragment>/conflict``; ADR 0020).

The page shows the base (what the file said when the fragment was last written from it), the
upstream text (what it says now) and the curated text (what a person made of it, served
meanwhile) side by side, with the three answers of ``contexts.usecases.source_conflicts``:
keep mine, take upstream, edit the merge (a textarea prefilled with the merge attempt, conflict
markers around the overlapping lines).

Someone who may not read the fragment gets 404; one who reads it but may not answer, 403. A
refusal (markers left in, the upstream text replaced by a later sync, someone else's version
saved meanwhile) re-renders the page with the reason, status 400 or 409.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from contexts.console.querysets import OPEN_NUDGE_STATES, visible
from contexts.console.views.common import org_context
from contexts.models import Nudge
from contexts.models.governance import NudgeKind
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases import nudges, source_conflicts

CHOICES = {
    source_conflicts.KEEP_MINE: "Kept the curated text",
    source_conflicts.TAKE_UPSTREAM: "Took the upstream text",
    source_conflicts.EDIT_MERGE: "Saved the merge",
}


@login_required
@require_http_methods(["GET", "POST"])
def conflict(request: HttpRequest, fragment_id: str) -> HttpResponse:
    nudge = get_object_or_404(
        visible(request).nudges().filter(kind=NudgeKind.SOURCE_CONFLICT,
                                         state__in=OPEN_NUDGE_STATES)
        .select_related("fragment__org", "fragment__scope", "fragment__owner", "owner"),
        fragment__public_id=fragment_id)
    if not nudges.may_answer(request.user, nudge):
        raise PermissionDenied("only the owner, a tech lead or a curator may answer this")
    if request.method == "GET":
        return _page(request, nudge)
    choice = request.POST.get("choice", "")
    version = request.POST.get("version", "")
    try:
        source_conflicts.resolve_conflict(
            request.user, nudge, choice, request.POST.get("text"),
            upstream_hash=request.POST.get("upstream_hash") or None,
            based_on_version=int(version) if version.isdigit() else None)
    except nudges.NudgeAlreadyAnswered:
        messages.info(request, "This conflict has already been answered.")
        return redirect(reverse("console:inbox"))
    except EditConflict as exc:
        return _page(request, nudge, error=(
            f"Someone saved version {exc.current_version} while you were looking: review the "
            "curated text again."), status=409)
    except InvalidOperation as exc:
        return _page(request, nudge, error=str(exc), text=request.POST.get("text"),
                     status=400)
    messages.success(request, f"{CHOICES[choice]}: {nudge.fragment.title or fragment_id}.")
    return redirect(reverse("console:fragment", args=[fragment_id]))


def _page(request: HttpRequest, nudge: Nudge, *, error: str = "", text: str | None = None,
          status: int = 200) -> HttpResponse:
    nudge.refresh_from_db()
    nudge.fragment.refresh_from_db()
    view = source_conflicts.conflict_of(nudge)
    return render(request, "console/source_conflict.html", {
        **org_context(request, nudge.fragment.org, "inbox"),
        "nudge": nudge, "fragment": nudge.fragment, "conflict": view, "error": error,
        "text": view.attempt if text is None else text,
    }, status=status)
