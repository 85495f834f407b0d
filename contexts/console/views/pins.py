"""Pins board per scope: ordered pins, up/down (and drag) reordering, expiry, unpin."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Scope
from contexts.console.forms import PinExpiryForm
from contexts.console.identity import attach
from contexts.console.querysets import visible
from contexts.console.rendering import htmx_partial, render_page
from contexts.console.views.common import get_fragment, get_scope, org_context
from contexts.kernel.compression import packed_tokens
from contexts.kernel.ids import parse_public_id
from contexts.models import FragmentStatus, Pin
from contexts.protocol.retrieval import RetrieveRequestSerializer
from contexts.services.errors import InvalidOperation
from contexts.usecases import curation

BOARD_TARGET = "pins-board"


def _board_context(request: HttpRequest, scope: Scope) -> dict:
    seen = visible(request)
    pins = list(seen.pins().filter(scope=scope).select_related("fragment", "pinned_by")
                .order_by("position", "created_at"))
    attach(pin.fragment for pin in pins)  # source, part, heading: one query
    for pin in pins:
        pin.expiry_form = PinExpiryForm(
            initial={"expires_at": timezone.localtime(pin.expires_at) if pin.expires_at
                     else None}, prefix=pin.fragment.public_id)
    return {**org_context(request, scope.org, "overview"), "scope": scope, "pins": pins,
            "can_pin": seen.may("pin", scope), **pin_budget(pins)}


def typical_budget() -> int:
    """The token budget of a retrieval that names none (the API's and MCP's default)."""
    return RetrieveRequestSerializer().fields["budget_tokens"].default


def pin_budget(pins: list[Pin]) -> dict:
    """How much of a typical budget the pins take: the packed size retrieval counts (each
    pin's ``tokens`` is set too), for the pins a retrieval would return (active, unexpired)."""
    for pin in pins:
        fragment = pin.fragment
        pin.tokens = (fragment.packed_tokens if fragment.packed_tokens is not None
                      else packed_tokens(fragment.body, fragment.heading_path))
    used = sum(pin.tokens for pin in pins
               if pin.is_active and pin.fragment.status == FragmentStatus.ACTIVE)
    budget = typical_budget()
    return {"pin_tokens": used, "budget_tokens": budget,
            "budget_percent": min(100, round(100 * used / budget)) if budget else 100,
            "pins_fill_budget": used >= budget, "pins_half_budget": used * 2 >= budget}


def _board(request: HttpRequest, scope: Scope) -> HttpResponse:
    if htmx_partial(request):
        return render_page(request, "console/pins.html", "htmx/pins_board.html",
                           _board_context(request, scope))
    return redirect("console:scope-pins", scope_id=scope.public_id)


@login_required
@require_GET
def pins_board(request: HttpRequest, scope_id: str) -> HttpResponse:
    scope = get_scope(request, scope_id)
    return render_page(request, "console/pins.html", "htmx/pins_board.html",
                       _board_context(request, scope), target=BOARD_TARGET)


def _pin(request: HttpRequest, scope: Scope, fragment_id: str) -> Pin:
    fragment = get_fragment(request, fragment_id)
    pin = Pin.objects.filter(scope=scope, fragment=fragment).select_related("fragment").first()
    if pin is None:
        raise Http404
    return pin


@login_required
@require_POST
def pin_move(request: HttpRequest, scope_id: str, fragment_id: str) -> HttpResponse:
    scope = get_scope(request, scope_id)
    pin = _pin(request, scope, fragment_id)
    offset = -1 if request.POST.get("direction") == "up" else 1
    curation.move_pin(request.user, scope, pin.fragment, offset)
    return _board(request, scope)


@login_required
@require_POST
def pin_remove(request: HttpRequest, scope_id: str, fragment_id: str) -> HttpResponse:
    scope = get_scope(request, scope_id)
    pin = _pin(request, scope, fragment_id)
    curation.unpin(request.user, pin.fragment, scope)
    return _board(request, scope)


@login_required
@require_POST
def pin_expiry(request: HttpRequest, scope_id: str, fragment_id: str) -> HttpResponse:
    scope = get_scope(request, scope_id)
    pin = _pin(request, scope, fragment_id)
    form = PinExpiryForm(request.POST, prefix=pin.fragment.public_id)
    if not form.is_valid():
        messages.error(request, "Give the expiry as a date and time.")
        return _board(request, scope)
    try:
        curation.pin(request.user, pin.fragment, scope, reason=pin.reason,
                     expires_at=form.cleaned_data["expires_at"])
    except InvalidOperation as exc:  # e.g. the fragment was retired: restore it first
        messages.error(request, str(exc))
    return _board(request, scope)


@login_required
@require_POST
def pin_reorder(request: HttpRequest, scope_id: str) -> HttpResponse:
    """The drag-and-drop order (``order``: comma-separated fragment ids, every pin once)."""
    scope = get_scope(request, scope_id)
    order = [parse_public_id(item, "order")
             for item in request.POST.get("order", "").split(",") if item]
    try:
        curation.reorder_pins(request.user, scope, order)
    except InvalidOperation as exc:
        return HttpResponseBadRequest(str(exc))
    return _board(request, scope)
