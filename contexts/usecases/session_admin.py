"""Agents' sessions of an organization as people manage them (the console's Sessions page):
list them with their last write, close them, expire them.

A session is *open*, *closed* (a person closed it: ``closed_at``) or *expired* (its
``expires_at`` has passed). Only an open session takes writes: ``accounts.permissions.may``
refuses ``contribute`` and ``curate`` in the others, to agents and people alike; its fragments
stay readable inside it either way. Closing and expiring need ``administer`` on the session's scope
(an organization administrator, or a guardian grant on the session or its repository).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from accounts.models import Session
from accounts.permissions import may
from contexts.models import Fragment
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import NotVisible, Refused

STATES = ("open", "closed", "expired")


def with_last_write(sessions: QuerySet[Session]) -> QuerySet[Session]:
    """Each session annotated with ``last_write``: when a fragment of it was last written."""
    last = (Fragment.objects.filter(org_id=OuterRef("org_id"), scope_id=OuterRef("scope_id"))
            .order_by("-last_edited_at").values("last_edited_at")[:1])
    return sessions.annotate(last_write=Subquery(last))


def in_state(sessions: QuerySet[Session], state: str, now: dt.datetime | None = None
             ) -> QuerySet[Session]:
    now = now or timezone.now()
    if state == "closed":
        return sessions.filter(closed_at__isnull=False)
    if state == "expired":
        return sessions.filter(closed_at__isnull=True, expires_at__lte=now)
    if state == "open":
        return sessions.filter(closed_at__isnull=True).exclude(expires_at__lte=now)
    return sessions


def _check(principal: Any, session: Session) -> None:
    if not may(principal, "view", session.scope):
        raise NotVisible("session")
    if not may(principal, "administer", session.scope):
        raise Refused("only administrators close and expire sessions")


def _snapshot(session: Session) -> dict:
    return {"external_id": session.external_id, "state": session.state,
            "closed_at": session.closed_at.isoformat() if session.closed_at else None,
            "expires_at": session.expires_at.isoformat() if session.expires_at else None}


def close_session(principal: Any, session: Session) -> Session:
    _check(principal, session)
    with transaction.atomic():
        session = Session.objects.select_for_update().select_related("scope", "org").get(
            pk=session.pk)
        if session.closed_at is None:
            before = _snapshot(session)
            session.closed_at = timezone.now()
            session.save(update_fields=["closed_at"])
            audit.record(principal, "session.close", session, before=before,
                         after=_snapshot(session))
    return session


def expire_session(principal: Any, session: Session, at: dt.datetime | None = None
                   ) -> Session:
    """Set when the session expires: ``at``, or now (it stops taking writes at once)."""
    _check(principal, session)
    now = timezone.now()
    at = at or now
    if timezone.is_naive(at):
        raise InvalidOperation("give the expiry with a time zone", field="expires_at")
    with transaction.atomic():
        session = Session.objects.select_for_update().select_related("scope", "org").get(
            pk=session.pk)
        if session.closed_at is not None:
            raise InvalidOperation("the session is closed already", field="expires_at")
        before = _snapshot(session)
        session.expires_at = at
        session.save(update_fields=["expires_at"])
        audit.record(principal, "session.expire", session, before=before,
                     after=_snapshot(session))
    return session
