"""An agent's writes: a fragment into a scope it may write (agents: sessions), and feedback
on a fragment it read. REST (``POST /api/fragments``, ``…/feedback``) and the MCP tools
``write_session_fragment`` and ``feedback`` call these."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from accounts.models import Scope
from accounts.permissions import may
from accounts.scopes import readable_scopes
from contexts.ids import parse_public_id
from contexts.models import Fragment, FragmentKind
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment
from contexts.tasks import record_feedback as record_feedback_task
from contexts.usecases.errors import NotVisible, Refused
from contexts.usecases.retrieval import ScopeRef
from contexts.usecases.scoping import refuse, resolve_in_org, resolve_org

# The longest fragment body a caller may write (REST, MCP and the console's editor).
MAX_BODY_CHARS = 50_000
SIGNALS = ("helped", "hurt", "cited")


@dataclasses.dataclass(frozen=True)
class WriteFragment:
    scope: ScopeRef
    body: str
    title: str = ""
    kind: str = FragmentKind.SESSION_SUMMARY
    heading_path: Sequence[str] = ()


@dataclasses.dataclass(frozen=True)
class Feedback:
    fragment_id: str  # a public id, as the caller sent it (checked here)
    signal: str       # one of SIGNALS


def target_scope(principal: Any, scope: ScopeRef) -> Scope:
    """The most specific scope named (session > persona > repo > org)."""
    org = resolve_org(principal, scope.org_id)
    for kind, ref in (("session", scope.session_id), ("persona", scope.persona_id),
                      ("repo", scope.repo_id)):
        obj = resolve_in_org(org, kind, ref)
        if obj is not None:
            return obj.scope
    return org.scope


def write_fragment(principal: Any, command: WriteFragment) -> Fragment:
    scope = target_scope(principal, command.scope)
    action = "contribute" if scope.kind == "session" else "curate"
    if not may(principal, action, scope):
        if may(principal, "view", scope):
            raise Refused(f"you may not write fragments into this {scope.kind}; "
                          "agents write into sessions")
        raise refuse()
    try:
        return create_fragment(principal, scope, body=command.body, title=command.title,
                               kind=command.kind, heading_path=list(command.heading_path),
                               reason="written through the API")
    except InvalidOperation as exc:
        raise InvalidOperation(str(exc), field=exc.field or "body") from exc


def visible_fragment(principal: Any, public_id: str) -> Fragment:
    # From a URL the converter has checked it; from an MCP tool argument this is the check.
    public_id = parse_public_id(public_id, "fragment_id")
    fragment = Fragment.objects.filter(public_id=public_id).first()
    if fragment is None or not set(fragment.scope_ids) & readable_scopes(principal):
        raise NotVisible("fragment")
    return fragment


def record_feedback(principal: Any, command: Feedback) -> Fragment:
    """Count a signal on a fragment the principal reads; the counter is bumped by a task."""
    fragment = visible_fragment(principal, command.fragment_id)
    record_feedback_task.delay_on_commit(fragment.pk, command.signal)
    return fragment
