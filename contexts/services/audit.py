"""Writing audit events; every service function that changes state calls :func:`record`."""

from __future__ import annotations

import contextvars
from typing import Any

from accounts.models import ApiToken
from accounts.permissions import principal_user
from contexts.models import AuditEvent

# Set by middleware / API views so events can be correlated with the request that caused them.
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id",
                                                                        default="")


def record(principal: Any, action: str, obj: Any, *, org=None, before: dict | None = None,
           after: dict | None = None) -> AuditEvent:
    event = build(principal, action, obj, org=org, before=before, after=after)
    event.save()
    return event


def record_many(events: list[AuditEvent]) -> list[AuditEvent]:
    """Write events made with :func:`build` in one statement (bulk changes: one event per
    object still, so an object's history reads the same as after a single change)."""
    return AuditEvent.objects.bulk_create(events, batch_size=500)


def build(principal: Any, action: str, obj: Any, *, org=None, before: dict | None = None,
          after: dict | None = None) -> AuditEvent:
    """An unsaved event, for :func:`record` or :func:`record_many`."""
    # A person acting through a personal token: the person, and the token they used.
    token = (principal if isinstance(principal, ApiToken)
             else getattr(principal, "personal_token", None))
    user = principal_user(principal)
    return AuditEvent(
        org=org if org is not None else getattr(obj, "org", None),
        actor=user,
        actor_token=token,
        action=action,
        object_type=type(obj).__name__.lower(),
        object_id=getattr(obj, "public_id", None) or str(obj.pk),
        before=before,
        after=after,
        request_id=current_request_id.get(),
    )
