"""Agents open their own sessions: a write naming a ``session_id`` the organization does not
know yet creates that session (REST ``POST /api/fragments``, MCP ``write_session_fragment``).

- **Who:** an agent token that reads the repository it names (``repo_id``, required to open
  one) — a token bound to the repository or its organization. People create sessions by no
  write: an unknown ``session_id`` is refused to them as any unknown scope is.
- **Names:** external ids are unique per organization. A name already taken by a session the
  token cannot read is refused as an unreadable scope (a 403, never a second session): agents
  should use names unique to their work, such as an issue key.
- **Race-safe:** ``get_or_create`` under the unique key ``(org, external_id)``; two first
  writes with one new id make one session.
- **Bounded:** at most ``CONTEXTS_SESSIONS_PER_TOKEN`` open sessions per token (the token row
  is locked while counting, so concurrent first writes cannot pass the bound together); past
  it the write is refused naming ``scope.session_id``.
- **Idle expiry:** a session a token opened expires ``CONTEXTS_SESSION_IDLE_MINUTES`` after
  its last write (each write moves ``expires_at`` on); then, like a closed one, it takes no
  more writes (``accounts.permissions.may``) and its fragments stay readable inside it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.lookups import find_in_org
from accounts.models import ApiToken, Organization, Session
from accounts.permissions import may
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import Refused
from contexts.usecases.retrieval import ScopeRef
from contexts.usecases.scoping import refuse, resolve_in_org

SESSION_FIELD = "scope.session_id"


def idle_expiry(now: dt.datetime | None = None) -> dt.datetime:
    return (now or timezone.now()) + dt.timedelta(
        minutes=settings.CONTEXTS_SESSION_IDLE_MINUTES)


def open_sessions_of(token: ApiToken, now: dt.datetime | None = None):
    now = now or timezone.now()
    return Session.objects.filter(org_id=token.org_id, opened_by=token, closed_at__isnull=True
                                  ).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))


def session_for_write(principal: Any, org: Organization, ref: ScopeRef) -> Session:
    """The session a write names (public id or external id), opened on first write when the
    principal is a token that may open it there."""
    session = find_in_org(Session, org, ref.session_id, "external_id")
    if session is not None:
        return session
    if not isinstance(principal, ApiToken):
        raise refuse()
    return _open(principal, org, ref)


def _open(token: ApiToken, org: Organization, ref: ScopeRef) -> Session:
    external_id = ref.session_id.strip()
    if not external_id or external_id.startswith("sess_"):
        # A public id names an existing session; one that matches none is not a new name.
        raise refuse()
    if not ref.repo_id or ref.repo_id == "*":
        # A session is opened in a repository; an unknown session_id named without one is
        # refused as any unknown scope is (the same answer as an unreadable one).
        raise refuse()
    repository = resolve_in_org(org, "repo", ref.repo_id)
    persona = resolve_in_org(org, "persona", ref.persona_id)
    if not may(token, "view", repository.scope) or (
            persona is not None and not may(token, "view", persona.scope)):
        raise refuse()
    limit = settings.CONTEXTS_SESSIONS_PER_TOKEN
    with transaction.atomic():
        # Counted under the token's row lock: concurrent first writes queue here.
        ApiToken.objects.select_for_update().filter(pk=token.pk).first()
        now = timezone.now()
        session, created = Session.objects.get_or_create(
            org=org, external_id=external_id,
            defaults={"repository": repository, "persona": persona, "opened_by": token,
                      "created_at": now, "expires_at": idle_expiry(now)})
        if not created:  # opened by a concurrent write meanwhile
            if not may(token, "view", session.scope):
                raise refuse()
            return session
        if open_sessions_of(token, now).exclude(pk=session.pk).count() >= limit:
            raise InvalidOperation(
                f"this token already has {limit} open sessions, the most it may open "
                "(CONTEXTS_SESSIONS_PER_TOKEN): write into one of them, or ask an "
                "administrator to close some", field=SESSION_FIELD)
        audit.record(token, "session.open", session, after={
            "external_id": session.external_id,
            "repository": repository.public_id,
            "persona": persona.public_id if persona else None,
            "expires_at": session.expires_at.isoformat()})
    return session


def refuse_if_not_open(principal: Any, session: Session) -> None:
    """A closed or expired session's refusal, in words, to whoever may read it."""
    state = session.state
    if state != "open" and may(principal, "view", session.scope):
        raise Refused(f"session {session.external_id} is {state}: it takes no more writes "
                      "(name a new session_id to open another)")


def touch(session: Session) -> None:
    """A write into a session an agent opened moves its idle expiry on."""
    if session.opened_by_id is not None and session.state == "open":
        Session.objects.filter(pk=session.pk, closed_at__isnull=True).update(
            expires_at=idle_expiry())
