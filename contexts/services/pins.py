"""Pins: a tech lead puts a fragment at the top of a scope's retrievals, in a chosen order."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max

from accounts.models import Scope
from accounts.permissions import principal_user
from contexts.models import Fragment, FragmentStatus, Pin
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import require


@transaction.atomic
def pin_fragment(principal: Any, fragment: Fragment, scope: Scope, *, reason: str = "",
                 expires_at: dt.datetime | None = None) -> Pin:
    require(principal, "pin", scope)
    require(principal, "view", fragment.scope)
    if fragment.org_id != scope.org_id:
        raise InvalidOperation("a fragment can only be pinned in its own organization",
                               field="scope")
    # The stored status, locked, not the caller's copy: a retirement that committed after the
    # caller read the fragment must still refuse the pin. Retrieval never returns a retired or
    # superseded fragment, so a pin of one would promise what it cannot keep.
    status = (Fragment.objects.select_for_update().filter(pk=fragment.pk)
              .values_list("status", flat=True).first())
    if status != FragmentStatus.ACTIVE:
        raise InvalidOperation(f"a {status} fragment cannot be pinned: restore it first",
                               field="fragment_id")
    pin = Pin.objects.filter(fragment=fragment, scope=scope).first()
    if pin is None:
        last = Pin.objects.filter(scope=scope).aggregate(m=Max("position"))["m"]
        pin = Pin.objects.create(
            fragment=fragment, scope=scope, pinned_by=principal_user(principal), reason=reason,
            expires_at=expires_at, position=0 if last is None else last + 1,
        )
    else:
        pin.reason, pin.expires_at = reason or pin.reason, expires_at
        pin.save(update_fields=["reason", "expires_at"])
    audit.record(principal, "pin.create", fragment, org=scope.org,
                 after={"scope": scope.public_id, "position": pin.position, "reason": reason})
    return pin


@transaction.atomic
def unpin_fragment(principal: Any, fragment: Fragment, scope: Scope) -> bool:
    require(principal, "pin", scope)
    deleted, _ = Pin.objects.filter(fragment=fragment, scope=scope).delete()
    if deleted:
        audit.record(principal, "pin.delete", fragment, org=scope.org,
                     before={"scope": scope.public_id})
    return bool(deleted)


@transaction.atomic
def reorder_pins(principal: Any, scope: Scope, fragment_ids: Sequence[str]) -> list[Pin]:
    """Set pin order to ``fragment_ids`` (public ids); every pin of the scope must be named."""
    require(principal, "pin", scope)
    pins = {p.fragment.public_id: p for p in
            Pin.objects.select_for_update().filter(scope=scope).select_related("fragment")}
    if sorted(pins) != sorted(fragment_ids) or len(set(fragment_ids)) != len(fragment_ids):
        raise InvalidOperation("name every pinned fragment of the scope exactly once",
                               field="order")
    before = sorted(pins, key=lambda fid: pins[fid].position)
    for position, fid in enumerate(fragment_ids):
        if pins[fid].position != position:
            pins[fid].position = position
            pins[fid].save(update_fields=["position"])
    audit.record(principal, "pin.reorder", scope, org=scope.org, before={"order": before},
                 after={"order": list(fragment_ids)})
    return [pins[fid] for fid in fragment_ids]


def move_pin(principal: Any, scope: Scope, fragment: Fragment, offset: int) -> list[Pin]:
    """Move one pin up (offset -1) or down (+1) — the console's buttons."""
    order = list(Pin.objects.filter(scope=scope).order_by("position", "created_at")
                 .values_list("fragment__public_id", flat=True))
    index = order.index(fragment.public_id)
    target = max(0, min(len(order) - 1, index + offset))
    order.insert(target, order.pop(index))
    return reorder_pins(principal, scope, order)
