"""An agent's writes: a fragment into a scope it may write (agents: sessions), and feedback
on a fragment it read. REST (``POST /api/fragments``, ``…/feedback``) and the MCP tools
``write_session_fragment`` and ``feedback`` call these. A person's write from the console's
"New fragment" page (:func:`write_new_fragment`, with :func:`near_duplicates` before it) comes
through the same door."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import Scope, Session
from accounts.permissions import may, may_own, principal_user
from accounts.scopes import readable_scopes
from contexts.governance.similarity import fingerprint
from contexts.ingestion.simhash import hamming, simhash
from contexts.kernel.ids import parse_public_id
from contexts.models import Fragment, FragmentKind, FragmentStatus
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment
from contexts.tasks import record_feedback as record_feedback_task
from contexts.usecases import agent_sessions
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
    return _target(principal, scope)[0]


def _target(principal: Any, scope: ScopeRef) -> tuple[Scope, Session | None]:
    """The most specific scope named, and the session when it is one — opened on first write
    when an agent names a new ``session_id`` (:mod:`contexts.usecases.agent_sessions`)."""
    org = resolve_org(principal, scope.org_id)
    if scope.session_id:
        session = agent_sessions.session_for_write(principal, org, scope)
        return session.scope, session
    for kind, ref in (("persona", scope.persona_id), ("repo", scope.repo_id)):
        obj = resolve_in_org(org, kind, ref)
        if obj is not None:
            return obj.scope, None
    return org.scope, None


def write_fragment(principal: Any, command: WriteFragment) -> Fragment:
    scope, session = _target(principal, command.scope)
    if session is not None:
        agent_sessions.refuse_if_not_open(principal, session)
    action = "contribute" if scope.kind == "session" else "curate"
    if not may(principal, action, scope):
        if may(principal, "view", scope):
            raise Refused(f"you may not write fragments into this {scope.kind}; "
                          "agents write into sessions")
        raise refuse()
    try:
        fragment = create_fragment(principal, scope, body=command.body, title=command.title,
                                   kind=command.kind, heading_path=list(command.heading_path),
                                   reason="written through the API")
    except InvalidOperation as exc:
        raise InvalidOperation(str(exc), field=exc.field or "body") from exc
    if session is not None:
        agent_sessions.touch(session)
    return fragment


@dataclasses.dataclass(frozen=True)
class NewFragment:
    """A fragment a person writes in the console: into a scope they may curate, owned by a
    member of its organization (``owner``: a username; empty: the writer), valid until
    ``expires_at`` if given (the fragment's ``valid_to``: retrieval stops returning it then),
    with ``tags`` (:func:`clean_tags`)."""

    scope_id: str  # a public id, as the form sent it
    body: str
    title: str = ""
    kind: str = FragmentKind.PROSE
    owner: str = ""
    expires_at: dt.datetime | None = None
    tags: Sequence[str] = ()


MAX_TAGS = 20
TAG = re.compile(r"[a-z0-9][a-z0-9._-]{0,49}")


def clean_tags(tags: Sequence[str]) -> list[str]:
    """Lower-cased, each once, in the order given: letters, digits, ``.``, ``_``, ``-``, up to
    50 characters each, at most :data:`MAX_TAGS`; anything else names the field ``tags``."""
    cleaned: list[str] = []
    for raw in tags:
        tag = raw.strip().lower()
        if not tag:
            continue
        if not TAG.fullmatch(tag):
            raise InvalidOperation(f"{raw.strip()[:60]!r} is not a tag: letters, digits, '.', "
                                   "'_' and '-', at most 50 characters", field="tags")
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise InvalidOperation(f"at most {MAX_TAGS} tags", field="tags")
    return cleaned


def write_new_fragment(principal: Any, command: NewFragment) -> Fragment:
    """Create the fragment through the one door (permission, secret screening, version,
    audit event, change feed). Unknown and unreadable scopes are :class:`NotVisible` alike;
    a readable scope the principal may not write is :class:`Refused`; a bad field is an
    ``InvalidOperation`` naming it."""
    public_id = parse_public_id(command.scope_id, "scope")
    scope = Scope.objects.filter(public_id=public_id).select_related("org").first()
    if scope is None or scope.id not in readable_scopes(principal):
        raise NotVisible("scope")
    action = "contribute" if scope.kind == "session" else "curate"
    if not may(principal, action, scope):
        raise Refused(f"you may not write fragments into this {scope.kind}")
    if command.kind not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {command.kind!r}", field="kind")
    owner = None  # the writer
    writer = principal_user(principal)
    if command.owner and not (writer and command.owner == writer.get_username()):
        owner = get_user_model().objects.filter(username=command.owner).first()
        if not may_own(owner, scope.org_id):
            raise InvalidOperation("the owner must be an active member of the organization",
                                   field="owner")
    if command.expires_at is not None and command.expires_at <= timezone.now():
        raise InvalidOperation("the expiry must be in the future", field="expires_at")
    fields = {"valid_to": command.expires_at} if command.expires_at else {}
    return create_fragment(principal, scope, body=command.body, title=command.title,
                           kind=command.kind, owner=owner, reason="written in the console",
                           tags=clean_tags(command.tags), **fields)


@dataclasses.dataclass(frozen=True)
class NearDuplicate:
    fragment: Fragment
    distance: int  # SimHash Hamming distance, 0–64 bits


def near_duplicates(principal: Any, org_id: int, body: str, *, limit: int = 5
                    ) -> list[NearDuplicate]:
    """Active fragments of the organization the principal reads whose SimHash is within
    ``GOVERNANCE_DEDUP_MAX_HAMMING`` bits of ``body``'s, closest first — what the dedup review
    would propose once both exist (``contexts.governance.dedup_review``). Stored hashes are
    compared without reading bodies; only fragments without one (written in the console) are
    hashed from their text."""
    if not body.strip():
        return []
    mine = simhash(body)
    limit_bits = settings.GOVERNANCE_DEDUP_MAX_HAMMING
    active = Fragment.objects.filter(org_id=org_id, status=FragmentStatus.ACTIVE,
                                     scope_ids__overlap=sorted(readable_scopes(principal)))
    close: list[tuple[int, int]] = []
    for pk, stored in active.filter(simhash__isnull=False).values_list("pk", "simhash"):
        distance = hamming(mine, fingerprint(stored, ""))
        if distance <= limit_bits:
            close.append((distance, pk))
    for pk, text in active.filter(simhash__isnull=True).values_list("pk", "body"):
        distance = hamming(mine, simhash(text))
        if distance <= limit_bits:
            close.append((distance, pk))
    close.sort()
    close = close[:limit]
    found = Fragment.objects.in_bulk([pk for _, pk in close])
    return [NearDuplicate(found[pk], distance) for distance, pk in close if pk in found]


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
