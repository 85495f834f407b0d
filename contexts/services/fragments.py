"""Creating and changing fragments. Every change checks permission, keeps history, audits.

Nothing is destroyed: an edit writes a new immutable :class:`FragmentVersion`, retiring hides a
fragment from retrieval but keeps it, superseding links old → new and closes the old one's
validity interval.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import django.dispatch
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Scope
from accounts.permissions import SYSTEM, may, principal_user
from contexts.kernel.compression import packed_tokens
from contexts.kernel.tokens import count_tokens
from contexts.models import (
    Context,
    Fragment,
    FragmentContext,
    FragmentKind,
    FragmentStatus,
    FragmentVersion,
    Link,
    Pin,
    SourcePointer,
)
from contexts.models.changes import ChangeKind
from contexts.models.fragments import LinkKind, Namespace
from contexts.models.secrets import SecretAction, SecretOrigin
from contexts.secret_scan import redact, scan
from contexts.services import audit, change_feed, secrets
from contexts.services import evidence as evidence_service
from contexts.services.errors import EditConflict, InvalidOperation

# Sent (after commit) with the ids of fragments whose text, metadata, status or visibility
# changed, so derived indexes (tantivy, embeddings) and open nudges can follow. Receivers:
# contexts.signals (reindexing) and contexts.governance.nudges (settled questions), connected
# in ContextsConfig.ready(). ``indexed=True`` says the sender already embedded and indexed the
# fragments itself (ingestion), so the reindexing receiver skips them.
fragments_changed = django.dispatch.Signal()

# What a version records beside title and body may be changed by these doors: text edits
# (edit_fragment) take the chunking metadata, metadata-only changes (update_metadata) the rest.
EDITABLE_METADATA = frozenset({"heading_path", "language", "symbol", "kind"})
# Derived from the text by ingestion's chunker; stored with the version that carries the text.
CHUNK_FIELDS = frozenset({"simhash", "token_count", "chunker_version"})
METADATA_FIELDS = frozenset({"kind", "negative", "owner", "owner_set_by_person"})

CODE_KINDS = {FragmentKind.CODE}


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# Inside rescanning_stored_text(): the door records what it finds as found in stored text, and
# audit snapshots carry title and body redacted.
_rescanning: contextvars.ContextVar[bool] = contextvars.ContextVar("rescanning_stored_text",
                                                                  default=False)


@contextmanager
def rescanning_stored_text() -> Iterator[None]:
    """For re-screening text stored before the secret scan existed
    (``contexts.usecases.stored_secrets``), which changes it through this same door.

    Within the block an edit's findings are recorded with origin ``rescan`` (not ``edit``),
    and every audit snapshot (:func:`snapshot`) carries title and body with their secrets
    replaced by placeholders: an edit's or a retirement's "before" is the stored text itself,
    which an audit event must not copy. Outside it nothing changes — any text stored since
    passed the scan, so its snapshots need none.
    """
    token = _rescanning.set(True)
    try:
        yield
    finally:
        _rescanning.reset(token)


def _audited_text(text: str) -> str:
    return redact(text, scan(text)) if text and _rescanning.get() else text


def snapshot(fragment: Fragment) -> dict:
    """The audited, user-visible state of a fragment."""
    return {
        "title": _audited_text(fragment.title),
        "body": _audited_text(fragment.body),
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


# Inside indexing_handled_by_caller(): the changes so far (fragment pk → kind), appended to
# the feed and signalled once when it ends.
_collected: contextvars.ContextVar[dict[int, str] | None] = contextvars.ContextVar(
    "fragments_changed_collected", default=None)


@contextmanager
def indexing_handled_by_caller() -> Iterator[None]:
    """For the ingestion pipeline, which embeds its own fragments in bulk.

    Every change still goes through the same door — the feed rows are appended in the block's
    transaction, and the change signal fires — but once for the whole block (one statement
    per organization instead of one per fragment) and marked ``indexed=True``, so the
    reindexing receiver does not queue embedding work the caller has done. Nothing is
    appended or signalled when the block fails: its transaction rolls back.
    """
    collected: dict[int, str] = {}
    token = _collected.set(collected)
    try:
        yield
    finally:
        _collected.reset(token)
    change_feed.append(collected)
    _send_on_commit(collected, indexed=True)


def _send_on_commit(fragment_ids: Iterable[int], *, indexed: bool) -> None:
    ids = sorted(set(fragment_ids))
    if ids:
        transaction.on_commit(lambda: fragments_changed.send(
            sender=Fragment, fragment_ids=ids, indexed=indexed))


def notify_changed(fragment_ids: Iterable[int], kind: ChangeKind) -> None:
    """Record that these fragments changed (in the change feed, in the caller's transaction)
    and tell the receivers once it commits. Every service below that changes what retrieval
    can see ends here."""
    changes = dict.fromkeys(fragment_ids, kind)
    collected = _collected.get()
    if collected is not None:
        collected.update(changes)
        return
    change_feed.append(changes)
    _send_on_commit(changes, indexed=False)


def visibility_scope_ids(fragment: Fragment) -> list[int]:
    """Home scope plus the scopes of every context the fragment belongs to."""
    ids = {fragment.scope_id}
    if fragment.pk:
        ids.update(fragment.contexts.values_list("scope_id", flat=True))
    return sorted(ids)


# Inside versions_record(): facts about where this block's writes come from (a git source's
# commit), added to the metadata of every version written in it.
_provenance: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "fragment_version_provenance", default=None)


@contextmanager
def versions_record(**facts: Any) -> Iterator[None]:
    """Every version written inside the block records ``facts`` in its metadata — a git
    source's sync records the commit its text was read at (``{"commit": sha}``), whichever
    door below writes the version (a new fragment, a re-ingested text, front matter)."""
    token = _provenance.set({**(_provenance.get() or {}), **facts})
    try:
        yield
    finally:
        _provenance.reset(token)


def _write_version(fragment: Fragment, editor: Any, reason: str) -> FragmentVersion:
    version = _version_row(fragment, editor, reason)
    version.save()
    return version


def _version_row(fragment: Fragment, editor: Any, reason: str) -> FragmentVersion:
    """The fragment's current state as an unsaved version (numbered ``fragment.version``)."""
    return FragmentVersion(
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
            **(_provenance.get() or {}),
        },
        editor=principal_user(editor),
        reason=reason,
    )


def create_fragment(principal: Any, scope: Scope, **kwargs: Any) -> Fragment:
    """Create a fragment in ``scope``; agents may only write into sessions. Its text is
    screened for secrets first (``contexts.services.secrets``): redacted, or refused — a
    refusal is recorded after the write's transaction has rolled back."""
    try:
        return _create_fragment(principal, scope, **kwargs)
    except secrets.SecretRefused as refused:
        secrets.record_refusal(principal, refused)
        raise


@transaction.atomic
def _create_fragment(principal: Any, scope: Scope, *, body: str, title: str = "",
                     kind: str = FragmentKind.PROSE, owner=None,
                     heading_path: list[str] | None = None,
                     language: str = "", symbol: str = "", token_count: int = 0,
                     contexts: Iterable[Context] = (), uid: uuid.UUID | None = None,
                     reason: str = "created", **fields: Any) -> Fragment:
    require(principal, "contribute" if scope.kind == "session" else "curate", scope)
    if not body or not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    if kind not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {kind!r}", field="kind")
    screened = secrets.screen_write(body=body, title=title, org_id=scope.org_id,
                                    origin=SecretOrigin.WRITE, heading_path=heading_path)
    body, title, heading_path = screened.body, screened.title, screened.heading_path
    if screened.findings:
        token_count = 0  # counted again below, on the text stored
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
    _resolve_evidence(principal, fragment)
    _write_version(fragment, principal, reason)
    audit.record(principal, "fragment.create", fragment, after=snapshot(fragment))
    secrets.record(principal, screened.findings, org=scope.org_id, origin=SecretOrigin.WRITE,
                   action=SecretAction.REDACTED, fragment=fragment)
    notify_changed([fragment.pk], ChangeKind.CREATE)
    return fragment


def _resolve_evidence(principal: Any, fragment: Fragment) -> None:
    """A person's text: what it cites is resolved now, in this transaction (the receiver,
    ``contexts.governance.evidence.record``, parses code, which this layer cannot). Ingestion
    writes as the system what files say: a source fragment rests on its file's lines."""
    if principal is not SYSTEM:
        evidence_service.text_written.send(sender=Fragment, fragment=fragment)


def _locked(fragment: Fragment) -> Fragment:
    # Lock only the fragment row (owner is a nullable join FOR UPDATE cannot cover).
    return Fragment.objects.select_for_update(of=("self",)).select_related("owner", "scope").get(
        pk=fragment.pk)


def _same_text_since(current: Fragment, version: int) -> bool:
    """Whether only metadata changed after ``version`` (an owner, kind or negative flag, which
    write versions too): an edit of the text it was based on then conflicts with nothing."""
    if version > current.version:
        return False
    return FragmentVersion.objects.filter(fragment=current, number=version,
                                          title=current.title, body=current.body).exists()


def edit_fragment(principal: Any, fragment: Fragment, **kwargs: Any) -> Fragment:
    """Write a new version, if ``based_on_version`` is still the current one.

    Optimistic concurrency: the row is locked, its version compared with the editor's; a stale
    edit raises :class:`EditConflict` carrying both texts and changes nothing. The new text is
    screened for secrets first, as :func:`create_fragment`'s is.
    """
    try:
        return _edit_fragment(principal, fragment, **kwargs)
    except secrets.SecretRefused as refused:
        secrets.record_refusal(principal, refused)
        raise


@transaction.atomic
def _edit_fragment(principal: Any, fragment: Fragment, *, based_on_version: int, body: str,
                   title: str | None = None, reason: str = "", **metadata: Any) -> Fragment:
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    origin = SecretOrigin.RESCAN if _rescanning.get() else SecretOrigin.EDIT
    # Before the conflict check, so that a conflict's answer carries no secret back either.
    screened = secrets.screen_write(body=body, title=title or "", org_id=current.org_id,
                                    origin=origin, fragment=current,
                                    heading_path=metadata.get("heading_path"))
    body = screened.body
    if screened.heading_path is not None:
        metadata["heading_path"] = screened.heading_path
    title = title if title is None else screened.title
    if screened.findings:
        metadata.pop("token_count", None)  # counted again below, on the text stored
    new_title = current.title if title is None else title[:300]
    if based_on_version != current.version and not _same_text_since(current, based_on_version):
        raise EditConflict(
            fragment_id=current.public_id, based_on=based_on_version,
            current_version=current.version, current_title=current.title,
            current_body=current.body, submitted_title=new_title, submitted_body=body,
        )
    if not body or not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    for key in metadata:
        if key not in EDITABLE_METADATA | CHUNK_FIELDS:
            raise InvalidOperation(f"{key} cannot be edited here", field=key)
    if "kind" in metadata and metadata["kind"] not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {metadata['kind']!r}", field="kind")
    before = snapshot(current)
    # The chunker's own count, when ingestion gives it, is what the chunk was sized by.
    token_count = metadata.pop("token_count", None) or count_tokens(body)
    changed = {key: value for key, value in metadata.items() if getattr(current, key) != value}
    if body == current.body and new_title == current.title and not changed:
        return current  # nothing changed: no empty version
    current.body = body
    current.title = new_title
    for key, value in changed.items():
        setattr(current, key, value)
    current.content_hash = content_hash(body)
    current.token_count = token_count
    current.version += 1
    current.last_edited_at = timezone.now()
    current.save()
    _resolve_evidence(principal, current)
    _write_version(current, principal, reason or "edited")
    audit.record(principal, "fragment.edit", current, before=before, after=snapshot(current))
    secrets.record(principal, screened.findings, org=current.org_id, origin=origin,
                   action=SecretAction.REDACTED, fragment=current)
    notify_changed([current.pk], ChangeKind.VERSION)
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
    notify_changed([current.pk], ChangeKind.RETIRE)
    return current


@transaction.atomic
def restore_fragment(principal: Any, fragment: Fragment, *, reason: str = "") -> Fragment:
    """Make a retired or superseded fragment active again; recorded in the audit trail, and
    retrieval sees it again through the change feed. An active fragment is left as it is."""
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    if current.status == FragmentStatus.ACTIVE:
        return current
    before = snapshot(current)
    current.status = FragmentStatus.ACTIVE
    current.superseded_by = None
    current.valid_to = None
    current.save(update_fields=["status", "superseded_by", "valid_to"])
    audit.record(principal, "fragment.restore", current, before=before,
                 after={**snapshot(current), "reason": reason})
    notify_changed([current.pk], ChangeKind.RESTORE)
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
    notify_changed([current.pk, new.pk], ChangeKind.SUPERSEDE)
    return current


def mark_negative(principal: Any, fragment: Fragment, negative: bool = True) -> Fragment:
    changed = update_metadata(
        principal, [fragment], negative=negative,
        action="fragment.mark_negative" if negative else "fragment.unmark_negative",
        reason="marked negative" if negative else "no longer negative")
    return changed[0] if changed else Fragment.objects.get(pk=fragment.pk)


def reassign_owner(principal: Any, fragment: Fragment, new_owner) -> Fragment:
    """A person's choice of owner (the console, a nudge's hand-over): it wins over what the
    repository says (CODEOWNERS, front matter, history) until they clear it
    (:func:`follow_repository_owner`); a sync no longer re-assigns the fragment."""
    name = new_owner.get_username() if new_owner is not None else "nobody"
    changes: dict[str, Any] = {"owner": new_owner}
    if principal_user(principal) is not None:
        changes["owner_set_by_person"] = True
    changed = update_metadata(principal, [fragment], action="fragment.reassign_owner",
                              reason=f"owner: {name}", **changes)
    return changed[0] if changed else Fragment.objects.get(pk=fragment.pk)


def follow_repository_owner(principal: Any, fragment: Fragment) -> Fragment:
    """Clear a person's choice of owner: the fragment takes the owner its source's repository
    names now (the owner its document last resolved to; kept when it has none, or that member
    is deactivated), and every later sync re-assigns it again."""
    owner_id = (SourcePointer.objects.filter(fragment_id=fragment.pk,
                                             document__owner__isnull=False,
                                             document__owner__is_active=True)
                .order_by("document__path").values_list("document__owner_id", flat=True)
                .first())
    changes: dict[str, Any] = {"owner_set_by_person": False}
    if owner_id is not None:
        changes["owner"] = get_user_model().objects.get(pk=owner_id)
    changed = update_metadata(principal, [fragment], action="fragment.follow_repository_owner",
                              reason="owner: as the repository says", **changes)
    return changed[0] if changed else Fragment.objects.get(pk=fragment.pk)


def _differs(fragment: Fragment, field: str, value: Any) -> bool:
    if field == "owner":
        return fragment.owner_id != (value.pk if value is not None else None)
    return getattr(fragment, field) != value


@transaction.atomic
def update_metadata(principal: Any, fragments: Iterable[Fragment], *, reason: str = "",
                    action: str = "fragment.edit_metadata", **changes: Any) -> list[Fragment]:
    """Set kind, negative flag and/or owner of ``fragments``, leaving their text alone.

    The one door for metadata-only changes: the console's row actions, a nudge's hand-over,
    ingestion's front matter and the admin all come here. Every fragment that actually
    changes gets what a console edit gets — a new version (these fields are part of a
    version's metadata), an audit event and the change signal; fragments already in the
    wanted state are left untouched, so re-applying writes nothing. Permission is checked
    once per scope, and the writes are a few statements whatever the number of fragments
    (ingestion applies one document's front matter to all its chunks at once). Returns the
    changed fragments.
    """
    for key in changes:
        if key not in METADATA_FIELDS:
            raise InvalidOperation(f"{key} cannot be changed here", field=key)
    if "kind" in changes and changes["kind"] not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {changes['kind']!r}", field="kind")
    new_owner = changes.get("owner")
    if new_owner is not None and not new_owner.is_active:
        raise InvalidOperation("the new owner's account is deactivated", field="owner")
    ids = sorted({fragment.pk for fragment in fragments})
    if not ids or not changes:
        return []
    # Locked in primary-key order, so two bulk changes cannot deadlock; only the fragment
    # rows (owner and superseded_by are nullable joins FOR UPDATE cannot cover).
    rows = list(Fragment.objects.select_for_update(of=("self",))
                .select_related("owner", "scope", "org", "superseded_by")
                .filter(pk__in=ids).order_by("pk"))
    for scope in {row.scope_id: row.scope for row in rows}.values():
        require(principal, "curate", scope)
    changed, versions, events = [], [], []
    for row in rows:
        diff = {key: value for key, value in changes.items() if _differs(row, key, value)}
        if not diff:
            continue
        before = snapshot(row)
        for key, value in diff.items():
            setattr(row, key, value)
        row.version += 1
        changed.append(row)
        versions.append(_version_row(row, principal, reason or "metadata changed"))
        events.append(audit.build(principal, action, row, org=row.org, before=before,
                                  after=snapshot(row)))
    if changed:
        Fragment.objects.bulk_update(changed, [*changes, "version"], batch_size=500)
        FragmentVersion.objects.bulk_create(versions, batch_size=500)
        audit.record_many(events)
        notify_changed((row.pk for row in changed), ChangeKind.METADATA)
    return changed


@transaction.atomic
def verify_fragment(principal: Any, fragment: Fragment, *, now: dt.datetime | None = None,
                    note: dict | None = None, evidence: list[dict] | None = None) -> Fragment:
    """"Still accurate": ``verified_at = now``, ``verified_by`` the person, and — given
    ``evidence``, what the fragment rests on as it stands now — that evidence recorded as
    current. Neither text nor metadata changed, so no version; audited, and signalled (open
    nudges close, freshness follows)."""
    current = _locked(fragment)
    require(principal, "curate", current.scope)
    now = now or timezone.now()
    before = {"verified_at": current.verified_at.isoformat() if current.verified_at else None,
              "verified_by": current.verified_by.get_username() if current.verified_by_id
              else None, "evidence_state": current.evidence_state}
    current.verified_at = now
    current.verified_by = principal_user(principal)
    current.save(update_fields=["verified_at", "verified_by"])
    if evidence is not None:
        evidence_service.store(current, evidence)
    audit.record(principal, "fragment.verify", current, before=before,
                 after={"verified_at": now.isoformat(),
                        "verified_by": current.verified_by.get_username()
                        if current.verified_by_id else None,
                        "evidence_state": current.evidence_state, **(note or {})})
    notify_changed([current.pk], ChangeKind.METADATA)
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
    notify_changed([current.pk], ChangeKind.SCOPE)
    return current


# --- merging duplicates -------------------------------------------------------------------------
def _move_links(keep: Fragment, drop: Fragment) -> int:
    moved = 0
    for link in Link.objects.filter(Q(source=drop) | Q(target=drop)):
        source = keep.pk if link.source_id == drop.pk else link.source_id
        target = keep.pk if link.target_id == drop.pk else link.target_id
        if source != target:  # keep ↔ drop links would become self-citations
            _, created = Link.objects.get_or_create(source_id=source, target_id=target,
                                                    kind=link.kind,
                                                    defaults={"created_at": link.created_at})
            moved += created
        link.delete()
    return moved


def _move_pins(keep: Fragment, drop: Fragment) -> int:
    moved = 0
    for pin in Pin.objects.filter(fragment=drop):
        if Pin.objects.filter(fragment=keep, scope_id=pin.scope_id).exists():
            pin.delete()  # keep is pinned there already; its own position wins
        else:
            Pin.objects.filter(pk=pin.pk).update(fragment=keep)
            moved += 1
    return moved


@transaction.atomic
def merge_fragments(principal: Any, keep: Fragment, drop: Fragment) -> tuple[Fragment, dict]:
    """Fold ``drop`` into ``keep`` (permission ``curate`` on both scopes).

    ``keep`` takes every source pointer, citation link (both directions), pin, context
    membership and supersession reference of ``drop``, and its use counters; ``drop`` is
    retired ("merged into …"), never deleted. Fragments ``drop`` superseded now name ``keep``
    as their successor, each with its own audit event. Audited as ``fragment.merge`` on
    ``keep``; returns ``keep`` and what moved. Governance's dedup review decides and keeps its
    own records (proposals, nudges) around this.
    """
    if keep.pk == drop.pk:
        raise InvalidOperation("a fragment cannot be merged into itself", field="keep")
    # Both rows locked in primary-key order, so two concurrent merges cannot deadlock.
    locked = {f.pk: f for f in Fragment.objects.select_for_update(of=("self",))
              .select_related("scope").filter(pk__in=[keep.pk, drop.pk]).order_by("pk")}
    keep, drop = locked[keep.pk], locked[drop.pk]
    if keep.org_id != drop.org_id:
        raise InvalidOperation("duplicates must be in the same organization", field="drop")
    require(principal, "curate", keep.scope)
    require(principal, "curate", drop.scope)
    for fragment, field in ((keep, "keep"), (drop, "drop")):
        if fragment.status != FragmentStatus.ACTIVE:
            raise InvalidOperation(f"{fragment.public_id} is {fragment.status}", field=field)
    before = {"keep": snapshot(keep), "drop": snapshot(drop),
              "keep_sources": keep.sources.count(), "drop_sources": drop.sources.count()}

    # Pointers are unique per (document, anchor) across all fragments: moving never collides.
    pointers = SourcePointer.objects.filter(fragment=drop).update(fragment=keep)
    links = _move_links(keep, drop)
    pins = _move_pins(keep, drop)
    successors = list(Fragment.objects.select_for_update(of=("self",))
                      .select_related("owner", "org").filter(superseded_by=drop).order_by("pk"))
    events = []
    for older in successors:
        was = snapshot(older)
        older.superseded_by = keep
        events.append(audit.build(principal, "fragment.supersede", older, org=older.org,
                                  before=was, after={**snapshot(older),
                                                     "reason": f"{drop.public_id} merged into "
                                                               f"{keep.public_id}"}))
    if successors:
        Fragment.objects.bulk_update(successors, ["superseded_by"])
        audit.record_many(events)
    contexts = set(drop.contexts.all()) - set(keep.contexts.all())
    if contexts:  # whoever could read drop through a context keeps reading its content
        set_contexts(principal, keep, [*keep.contexts.all(), *contexts])
    # Use counters are running totals, not versioned state: the merge event records them.
    Fragment.objects.filter(pk=keep.pk).update(
        retrieved_count=F("retrieved_count") + drop.retrieved_count,
        cited_count=F("cited_count") + drop.cited_count,
        helped_count=F("helped_count") + drop.helped_count,
        hurt_count=F("hurt_count") + drop.hurt_count)
    retire_fragment(principal, drop, reason=f"merged into {keep.public_id}")
    keep.refresh_from_db()
    moved = {"keep": keep.public_id, "dropped": drop.public_id, "moved_sources": pointers,
             "moved_links": links, "moved_pins": pins, "repointed_supersessions": len(successors),
             "added_contexts": sorted(c.public_id for c in contexts),
             "sources": keep.sources.count()}
    audit.record(principal, "fragment.merge", keep, before=before, after=moved)
    # keep's lexical document lists its source paths: re-index it (and the repointed ones).
    notify_changed([keep.pk, *(older.pk for older in successors)], ChangeKind.MERGE)
    return keep, moved


# --- use counters and derived scores ------------------------------------------------------------
FEEDBACK_COUNTERS = {"helped": "helped_count", "hurt": "hurt_count", "cited": "cited_count"}


def count_feedback(fragment_id: int, signal: str) -> None:
    """One more helped / hurt / cited for the fragment (the feedback task).

    Use counters are running totals, not the fragment's state: no version, no audit event and
    no change signal, like the retrieval counters ``contexts.services.usage`` folds in (one audit
    event per signal would drown the history of the fragment's actual changes)."""
    field = FEEDBACK_COUNTERS[signal]
    Fragment.objects.filter(pk=fragment_id).update(**{field: F(field) + 1})


def store_authority(scores: dict[int, float]) -> int:
    """Store PageRank scores (``contexts.governance.authority``); returns how many changed.

    Authority is derived data, recomputed nightly from the citation links and rebuildable,
    like the vectors: no version, no audit event and no change signal (retrieval reads it
    from the row, the indexes do not hold it). It still comes through this module so that
    every write to a fragment row has one home.
    """
    rounded = {pk: round(score, 6) for pk, score in scores.items()}
    current = dict(Fragment.objects.filter(pk__in=list(rounded))
                   .values_list("pk", "authority"))
    changed = [Fragment(pk=pk, authority=score) for pk, score in rounded.items()
               if abs(current.get(pk, -1.0) - score) > 1e-9]
    with transaction.atomic():
        Fragment.objects.bulk_update(changed, ["authority"], batch_size=1000)
    return len(changed)


@transaction.atomic
def import_fragments(principal: Any, org_scope: Scope, fragments: list[Fragment],
                     versions: list[FragmentVersion], *,
                     in_contexts: Iterable[tuple[Fragment, Context]] = (),
                     supersessions: Iterable[tuple[Fragment, Fragment]] = ()) -> list[Fragment]:
    """Write an organization's fragments as an archive holds them (``manage.py import_org``,
    ``contexts.portability``): each with its every version, status and supersession
    as they were, not as new edits — no version is added (the archive carries the history and
    its audit trail); one ``fragment.import`` event per fragment says who brought it in. The
    change feed records each one as created and the receivers embed it, unless the caller
    does (:func:`indexing_handled_by_caller`)."""
    require(principal, "curate", org_scope)
    memberships = list(in_contexts)
    scopes: dict[int, set[int]] = {}
    for fragment, context in memberships:
        scopes.setdefault(id(fragment), set()).add(context.scope_id)
    for fragment in fragments:
        fragment.scope_ids = sorted({fragment.scope_id, *scopes.get(id(fragment), ())})
        fragment.packed_tokens = packed_tokens(fragment.body, fragment.heading_path)
    Fragment.objects.bulk_create(fragments, batch_size=500)
    FragmentContext.objects.bulk_create(
        [FragmentContext(org_id=org_scope.org_id, fragment=f, context=c)
         for f, c in memberships], batch_size=500)
    replaced = []
    for old, new in supersessions:
        old.superseded_by_id = new.pk
        replaced.append(old)
    Fragment.objects.bulk_update(replaced, ["superseded_by"], batch_size=500)
    FragmentVersion.objects.bulk_create(versions, batch_size=500)
    audit.record_many([
        audit.build(principal, "fragment.import", f,
                    after={"version": f.version, "status": f.status, "kind": f.kind,
                           "negative": f.negative})
        for f in fragments])
    notify_changed([f.pk for f in fragments], ChangeKind.CREATE)
    return fragments
