"""Answering a source conflict: a person's edit of a source fragment and an upstream change of
the same lines (ADR 0020, ``docs/sources.md``).

A sync that finds them overlapping keeps serving the person's text, marks the fragment
``conflict`` and asks its owner with a ``source_conflict`` nudge holding the base, upstream and
curated texts. :func:`resolve_conflict` takes one of three answers:

* ``keep_mine`` — the curated text stays; the merge base moves to the upstream text, so the next
  sync merges from there (state ``merged``: the text differs from its file on purpose);
* ``take_upstream`` — a new version holding the upstream text (state ``in_sync``);
* ``edit_merge`` — a new version holding the text the person merged by hand (state ``merged``,
  or ``in_sync`` when it is the upstream text).

Each moves the base, answers the nudge and is audited (``fragment.source_resolved`` naming the
commit, plus the version the edit writes). Who may answer: the fragment's owner, the nudge's
addressee, a tech lead, or a curator of its scope (``nudges.may_answer``). An answer given on
an upstream text a later sync has replaced is refused (the person decides on what they saw),
as is an edit based on a version someone else has replaced (:class:`EditConflict`, a 409).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from accounts.permissions import OnBehalfOf, may
from contexts.governance import nudges
from contexts.ingestion import merge3, upstream
from contexts.models import Fragment, Nudge
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services import audit
from contexts.services import fragments as fragment_service
from contexts.services.errors import EditConflict, InvalidOperation

KEEP_MINE, TAKE_UPSTREAM, EDIT_MERGE = "keep_mine", "take_upstream", "edit_merge"
ANSWERS = {KEEP_MINE: NudgeAnswer.KEPT_MINE, TAKE_UPSTREAM: NudgeAnswer.TOOK_UPSTREAM,
           EDIT_MERGE: NudgeAnswer.EDITED_MERGE}
_MARKER = re.compile(rf"^({merge3.MINE_MARK}|{merge3.SEPARATOR}|{merge3.THEIRS_MARK})( |$)",
                     re.MULTILINE)


@dataclass(frozen=True)
class Conflict:
    """What the owner is shown: the three texts, where they come from, and a starting point for
    "edit the merge" (the merge with conflict markers around the overlapping lines)."""

    base: str
    upstream: str
    curated: str
    attempt: str
    path: str
    commit: str
    start_line: int | None
    end_line: int | None
    upstream_hash: str  # posted back with the answer: the upstream text the person saw


def conflict_of(nudge: Nudge) -> Conflict:
    if nudge.kind != NudgeKind.SOURCE_CONFLICT:
        raise InvalidOperation("this nudge is not a source conflict", field="nudge")
    detail = nudge.detail or {}
    base, theirs = detail.get("base", ""), detail.get("upstream", "")
    curated = nudge.fragment.body  # the text served now (a person may have edited it since)
    attempt = merge3.merge(base, curated, theirs, mine_label="curated",
                           theirs_label="upstream").text
    return Conflict(base=base, upstream=theirs, curated=curated, attempt=attempt,
                    path=detail.get("path", ""), commit=detail.get("commit", ""),
                    start_line=detail.get("start_line"), end_line=detail.get("end_line"),
                    upstream_hash=fragment_service.content_hash(theirs))


def resolve_conflict(user: AbstractBaseUser, nudge: Nudge, choice: str, text: str | None = None,
                     *, upstream_hash: str | None = None,
                     based_on_version: int | None = None) -> Fragment:
    """Apply ``choice`` to the source conflict ``nudge``; returns the fragment as it is now.

    Raises :class:`PermissionDenied`, :class:`nudges.NudgeAlreadyAnswered`,
    :class:`EditConflict` or :class:`InvalidOperation` naming the field (``choice``, ``text``,
    ``upstream``, ``nudge``)."""
    if choice not in ANSWERS:
        raise InvalidOperation(f"choose one of {', '.join(ANSWERS)}", field="choice")
    if choice == EDIT_MERGE:
        if not text or not text.strip():
            raise InvalidOperation("the merged text must not be empty", field="text")
        if _MARKER.search(text):
            raise InvalidOperation("the merged text still holds conflict markers (<<<<<<<, "
                                   "=======, >>>>>>>): settle each conflict first", field="text")
    with transaction.atomic():
        # The fragment first, then the nudge: the order a sync takes them in (it locks the
        # fragment, then refreshes its nudge), so the two never deadlock.
        fragment = upstream.lock(nudge.fragment_id)
        nudge = (Nudge.objects.select_for_update(of=("self",))
                 .select_related("fragment__scope", "fragment__owner").get(pk=nudge.pk))
        if nudge.state == NudgeState.ANSWERED:
            raise nudges.NudgeAlreadyAnswered(nudge)
        if not nudges.may_answer(user, nudge):
            raise PermissionDenied("only the owner, a tech lead or a curator may answer this")
        conflict = conflict_of(nudge)
        if upstream_hash is not None and upstream_hash != conflict.upstream_hash:
            raise InvalidOperation(
                f"{conflict.path} changed again upstream (commit {conflict.commit[:12]}) since "
                "you looked: review the new text", field="upstream")
        version = fragment.version if based_on_version is None else based_on_version
        if version != fragment.version:
            raise EditConflict(
                fragment_id=fragment.public_id, based_on=version,
                current_version=fragment.version, current_title=fragment.title,
                current_body=fragment.body, submitted_title=fragment.title,
                submitted_body=text if text is not None else fragment.body)
        fragment = _apply(user, fragment, conflict, choice, text)
        upstream.rebase(fragment, conflict.upstream, conflict.commit)
        now = timezone.now()
        nudge.state, nudge.answer = NudgeState.ANSWERED, ANSWERS[choice]
        nudge.answered_by, nudge.answered_at = user, now
        nudge.save(update_fields=["state", "answer", "answered_by", "answered_at"])
        audit.record(user, "fragment.source_resolved", fragment, after={
            "nudge": nudge.public_id, "choice": choice, "path": conflict.path,
            "commit": conflict.commit, "version": fragment.version,
            "state": fragment.source_state})
    return fragment


def _apply(user: AbstractBaseUser, fragment: Fragment, conflict: Conflict, choice: str,
           text: str | None) -> Fragment:
    # An owner who is not a curator answers by the owner's right, as in nudges.answer_nudge.
    principal = user if may(user, "curate", fragment.scope) else OnBehalfOf(user)
    at = f" {conflict.commit[:12]}" if conflict.commit else ""
    if choice == KEEP_MINE:
        # The text stays as it is (no new version: nothing in it changed); the base moves.
        upstream.set_state(fragment, upstream.MERGED)
        return fragment
    body = conflict.upstream if choice == TAKE_UPSTREAM else text or ""
    reason = (f"took upstream{at} of {conflict.path} over the curated text"
              if choice == TAKE_UPSTREAM
              else f"merged upstream{at} of {conflict.path} with the curated text by hand")
    with fragment_service.versions_record(commit=conflict.commit or None):
        edited = fragment_service.edit_fragment(principal, fragment,
                                                based_on_version=fragment.version, body=body,
                                                reason=reason)
    upstream.set_state(edited, upstream.IN_SYNC if body == conflict.upstream
                       else upstream.MERGED)
    return edited
