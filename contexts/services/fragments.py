"""Creating and changing fragments. Every change checks permission, keeps history, audits.

Nothing is destroyed: an edit writes a new immutable :class:`FragmentVersion`, retiring hides a
fragment from retrieval but keeps it, superseding links old → new and closes the old one's
validity interval.
"""

from __future__ import annotations

import contextvars
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import django.dispatch
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from accounts.models import Scope
from accounts.permissions import may, principal_user
from contexts.models import (
    Context,
    Fragment,
    FragmentKind,
    FragmentStatus,
    FragmentVersion,
    Link,
)
from contexts.models.fragments import LinkKind, Namespace
from contexts.services import audit
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.tokens import count_tokens

# Sent (after commit) with the ids of fragments whose text, status or visibility changed, so
# derived indexes (tantivy, embeddings) can follow. Receivers: contexts.indexing.
fragments_changed = django.dispatch.Signal()

CODE_KINDS = {FragmentKind.CODE}


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot(fragment: Fragment) -> dict:
    """The audited, user-visible state of a fragment."""
    return {
        "title": fragment.title,
        "body": fragment.body,
        "kind": fragment.kind,
        "status": fragment.status,
        "negative": fragment.negative,
        "owner": fragment.owner.get_username() if fragment.owner_id else None,
        "version": fragment.version,
        "superseded_by": fragment.superseded_by.public_id if fragment.superseded_by_id else None,
    }


def require(principal: Any, action: str, scope: Scope) -> None:
    if not may(principal, action, scope):
        raise PermissionDenied(f"you may not {action} in this scope")


_signals_suppressed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fragments_changed_suppressed", default=False)


@contextmanager
def indexing_handled_by_caller() -> Iterator[None]:
    """For the ingestion pipeline, which embeds and indexes its own fragments in bulk."""
    token = _signals_suppressed.set(True)
    try:
        yield
    finally:
        _signals_suppressed.reset(token)


def notify_changed(fragment_ids: Iterable[int]) -> None:
    ids = sorted(set(fragment_ids))
    if ids and not _signals_suppressed.get():
        transaction.on_commit(lambda: fragments_changed.send(sender=Fragment, fragment_ids=ids))


def visibility_scope_ids(fragment: Fragment) -> list[int]:
    """Home scope plus the scopes of every context the fragment belongs to."""
    ids = {fragment.scope_id}
    if fragment.pk:
        ids.update(fragment.contexts.values_list("scope_id", flat=True))
    return sorted(ids)


def _write_version(fragment: Fragment, editor: Any, reason: str) -> FragmentVersion:
    return FragmentVersion.objects.create(
        fragment=fragment,
        number=fragment.version,
        title=fragment.title,
        body=fragment.body,
        metadata={
            "kind": fragment.kind,
            "heading_path": fragment.heading_path,
            "language": fragment.language,
            "symbol": fragment.symbol,
            "status": fragment.status,
            "negative": fragment.negative,
            "owner": fragment.owner.get_username() if fragment.owner_id else None,
            "chunker_version": fragment.chunker_version,
        },
        editor=principal_user(editor),
        reason=reason,
    )


@transaction.atomic
def create_fragment(principal: Any, scope: Scope, *, body: str, title: str = "",
                    kind: str = FragmentKind.PROSE, owner=None,
                    heading_path: list[str] | None = None,
                    language: str = "", symbol: str = "", token_count: int = 0,
                    contexts: Iterable[Context] = (), uid: uuid.UUID | None = None,
                    reason: str = "created", **fields: Any) -> Fragment:
    """Create a fragment in ``scope``; agents may only write into sessions."""
    require(principal, "contribute" if scope.kind == "session" else "curate", scope)
    if not body or not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    if kind not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {kind!r}", field="kind")
    fragment = Fragment(
        uid=uid or uuid.uuid4(),
        org_id=scope.org_id,
        scope=scope,
        kind=kind,
        namespace=fields.pop("namespace", None) or (
            Namespace.CODE if kind in CODE_KINDS else Namespace.PROSE),
        negative=kind == FragmentKind.NEGATIVE or fields.pop("negative", False),
        title=title[:300],
        heading_path=heading_path or [],
        body=body,
        language=language,
        symbol=symbol[:300],
        token_count=token_count or count_tokens(body),
        content_hash=content_hash(body),
        owner=owner if owner is not None else principal_user(principal),
        **fields,
    )
    contexts = list(contexts)
    fragment.scope_ids = sorted({scope.id, *(c.scope_id for c in contexts)})
    fragment.save()
    if contexts:
        fragment.contexts.set(contexts)
    _write_version(fragment, principal, reason)
    audit.record(principal, "fragment.create", fragment, after=snapshot(fragment))
    notify_changed([fragment.pk])
    return fragment


def _locked(fragment: Fragment) -> Fragment:
    # Lock only the fragment row (owner is a nullable join FOR UPDATE cannot cover).
    return Fragment.objects.select_for_update(of=("self",)).select_related("owner", "scope").get(
        pk=fragment.pk)


@transaction.atomic
def edit_fragment(principal: Any, fragment: Fragment, *, based_on_version: int, body: str,
                  title: str | None = None, reason: str = "", **metadata: Any) -> Fragment:
    """Write a new version, if ``based_on_version`` is still the current one.

    Optimistic concurrency: the row is locked, its version compared with the editor's; a stale
    edit raises :class:`EditConflict` carrying both texts and changes nothing.
    """
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    new_title = current.title if title is None else title[:300]
    if based_on_version != current.version:
        raise EditConflict(
            fragment_id=current.public_id, based_on=based_on_version,
            current_version=current.version, current_title=current.title,
            current_body=current.body, submitted_title=new_title, submitted_body=body,
        )
    if not body or not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    before = snapshot(current)
    if body == current.body and new_title == current.title and not metadata:
        return current  # nothing changed: no empty version
    current.body = body
    current.title = new_title
    for key, value in metadata.items():
        if key not in {"heading_path", "language", "symbol", "kind"}:
            raise InvalidOperation(f"{key} cannot be edited here", field=key)
        setattr(current, key, value)
    current.content_hash = content_hash(body)
    current.token_count = count_tokens(body)
    current.version += 1
    current.last_edited_at = timezone.now()
    current.save()
    _write_version(current, principal, reason or "edited")
    audit.record(principal, "fragment.edit", current, before=before, after=snapshot(current))
    notify_changed([current.pk])
    return current


@transaction.atomic
def retire_fragment(principal: Any, fragment: Fragment, *, reason: str = "") -> Fragment:
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    if current.status == FragmentStatus.RETIRED:
        return current
    before = snapshot(current)
    current.status = FragmentStatus.RETIRED
    current.valid_to = current.valid_to or timezone.now()
    current.save(update_fields=["status", "valid_to"])
    audit.record(principal, "fragment.retire", current, before=before,
                 after={**snapshot(current), "reason": reason})
    notify_changed([current.pk])
    return current


@transaction.atomic
def supersede_fragment(principal: Any, old: Fragment, new: Fragment, *,
                       reason: str = "") -> Fragment:
    """``new`` replaces ``old`` from now on; ``old`` stays for "what did we believe on X"."""
    if old.pk == new.pk:
        raise InvalidOperation("a fragment cannot supersede itself", field="superseded_by")
    if old.org_id != new.org_id:
        raise InvalidOperation("the replacement must be in the same organization",
                               field="superseded_by")
    current = _locked(old)
    require(principal, "curate", current.scope)
    require(principal, "view", new.scope)
    # Refuse cycles: walking new's chain must not reach old.
    node, seen = new, set()
    while node.superseded_by_id and node.pk not in seen:
        seen.add(node.pk)
        if node.superseded_by_id == current.pk:
            raise InvalidOperation("this would create a supersession cycle",
                                   field="superseded_by")
        node = node.superseded_by
    before = snapshot(current)
    now = timezone.now()
    current.status = FragmentStatus.SUPERSEDED
    current.superseded_by = new
    current.valid_to = now
    current.save(update_fields=["status", "superseded_by", "valid_to"])
    Link.objects.get_or_create(source=new, target=current, kind=LinkKind.SUPERSEDES)
    audit.record(principal, "fragment.supersede", current, before=before,
                 after={**snapshot(current), "reason": reason})
    notify_changed([current.pk, new.pk])
    return current


@transaction.atomic
def mark_negative(principal: Any, fragment: Fragment, negative: bool = True) -> Fragment:
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    if current.negative == negative:
        return current
    before = snapshot(current)
    current.negative = negative
    current.save(update_fields=["negative"])
    audit.record(principal, "fragment.mark_negative" if negative else "fragment.unmark_negative",
                 current, before=before, after=snapshot(current))
    notify_changed([current.pk])
    return current


@transaction.atomic
def reassign_owner(principal: Any, fragment: Fragment, new_owner) -> Fragment:
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    if new_owner is not None and not new_owner.is_active:
        raise InvalidOperation("the new owner's account is deactivated", field="owner")
    before = snapshot(current)
    current.owner = new_owner
    current.save(update_fields=["owner"])
    audit.record(principal, "fragment.reassign_owner", current, before=before,
                 after=snapshot(current))
    return current


@transaction.atomic
def set_contexts(principal: Any, fragment: Fragment, contexts: Iterable[Context]) -> Fragment:
    """Put the fragment in exactly these contexts; its visibility follows."""
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    contexts = list(contexts)
    if any(ctx.org_id != current.org_id for ctx in contexts):
        raise InvalidOperation("contexts must be in the fragment's organization",
                               field="contexts")
    before = {"contexts": sorted(current.contexts.values_list("public_id", flat=True))}
    current.contexts.set(contexts)
    current.scope_ids = visibility_scope_ids(current)
    current.save(update_fields=["scope_ids"])
    audit.record(principal, "fragment.set_contexts", current, before=before,
                 after={"contexts": sorted(c.public_id for c in contexts)})
    notify_changed([current.pk])
    return current
