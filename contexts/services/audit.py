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
    token = principal if isinstance(principal, ApiToken) else None
    user = principal_user(principal)
    return AuditEvent.objects.create(
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
