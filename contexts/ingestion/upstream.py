"""A source fragment follows its file; where a person edited it, the edit and the file's change
meet instead of one overwriting the other (issue 38, ADR 0020, ``docs/sources.md``).

Each source pointer remembers the chunk text its fragment was last written from (its *base*)
and the commit it was read at. When the chunk's text changes upstream:

* the fragment still holds its base (nobody edited it) → it takes the new text, ``in_sync``;
* a person edited it and the two changes touch different lines → a three-way merge
  (``merge3``), one version naming both, ``merged``;
* they overlap → the person's text stays, the base does not move, ``conflict``, and the owner
  is asked (a ``source_conflict`` nudge with base, upstream and curated text);
* its source text is deleted → an unedited fragment is retired as before; an edited one stays
  active, ``gone``, and its owner is asked (``source_gone``).

Every outcome writes an audit event, and every version a sync writes names its commit.

Governance, a layer above, opens the nudges: :data:`source_nudge` is sent *inside* the sync's
transaction (so a nudge exists exactly when its state does) and its receiver
(``contexts.governance.source_nudges``) e-mails once the transaction commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import django.dispatch

from accounts.permissions import SYSTEM
from contexts.ingestion import merge3
from contexts.models import Fragment, FragmentSourceState, FragmentVersion, SourcePointer
from contexts.models.governance import NudgeKind
from contexts.services import audit
from contexts.services import fragments as fragment_service

# Sent in the caller's transaction with ``fragment``, ``kind`` (a NudgeKind), ``action``
# ("open": open or refresh the fragment's nudge of that kind with ``reasons`` and ``detail``;
# "close": its question is settled by the source itself).
source_nudge = django.dispatch.Signal()

IN_SYNC, MERGED, CONFLICT, GONE = (FragmentSourceState.IN_SYNC, FragmentSourceState.MERGED,
                                   FragmentSourceState.CONFLICT, FragmentSourceState.GONE)


@dataclass(frozen=True)
class Upstream:
    """Where a chunk's new text comes from: its file, lines and commit (``None`` for a path
    job, an upload or an archive)."""

    path: str
    commit: str | None = None
    start_line: int | None = None
    end_line: int | None = None

    @property
    def short(self) -> str:
        return self.commit[:12] if self.commit else ""

    def at(self) -> str:
        """`` at <commit>`` for a reason, or nothing when there is no commit."""
        return f" at {self.short}" if self.commit else ""


@dataclass(frozen=True)
class Followed:
    """What following upstream did to one fragment: its ``state``, the fragment as it is now,
    whether its text changed, and the base its pointer should hold from now on."""

    state: str
    fragment: Fragment
    base: str
    base_commit: str
    text_changed: bool


def base_of(pointer: SourcePointer | None, fragment: Fragment) -> str:
    """The source text the fragment was last written from: its pointer's, else (a pointer made
    before bases were kept, or one already dropped) the newest version no person wrote."""
    if pointer is not None and pointer.base_text:
        return pointer.base_text
    newest = (FragmentVersion.objects.filter(fragment=fragment, editor__isnull=True)
              .order_by("-number").values_list("body", flat=True).first())
    return fragment.body if newest is None else newest


def edited_by_person(fragment: Fragment, base: str) -> bool:
    """A person changed the text since the source last gave it: it differs from the base, and
    a person wrote a version of it (a near-duplicate chunk collapsed into a fragment differs
    from its base too, but nobody edited it)."""
    return fragment.body != base and FragmentVersion.objects.filter(
        fragment=fragment, editor__isnull=False).exists()


def last_editor(fragment: Fragment) -> str:
    name = (FragmentVersion.objects.filter(fragment=fragment, editor__isnull=False)
            .order_by("-number").values_list("editor__username", flat=True).first())
    return name or "a person"


def set_state(fragment: Fragment, state: str) -> None:
    """Where the fragment stands against its source. Bookkeeping, not content: no version (the
    version and audit event of the change that caused it say what happened)."""
    if fragment.source_state != state:
        Fragment.objects.filter(pk=fragment.pk).update(source_state=state)
        fragment.source_state = state


def rebase(fragment: Fragment, text: str, commit: str | None) -> None:
    """The fragment's pointer holds ``text`` as its base from now on (a person settled a
    conflict: the next sync merges from there)."""
    SourcePointer.objects.filter(fragment=fragment).update(base_text=text,
                                                           base_commit=commit or "")


def follow(locked: Fragment, *, base: str, base_commit: str, theirs: str, title: str | None,
           where: Upstream, metadata: dict[str, Any]) -> Followed:
    """``locked`` (row-locked by the caller, in its transaction) meets the new upstream text
    ``theirs`` of a chunk whose last text was ``base``. ``metadata`` are the chunk fields an
    edit takes (heading path, symbol, simhash, ...)."""
    if not edited_by_person(locked, base):
        fragment = fragment_service.edit_fragment(
            SYSTEM, locked, based_on_version=locked.version, body=theirs, title=title,
            reason=f"re-ingested from {where.path}{where.at()}", **metadata)
        _settled(fragment, locked.source_state)
        set_state(fragment, IN_SYNC)
        return Followed(IN_SYNC, fragment, theirs, where.commit or "", True)
    editor = last_editor(locked)
    result = merge3.merge(base, locked.body, theirs, mine_label=f"curated ({editor})",
                          theirs_label=f"upstream {where.short or where.path}".strip())
    if not result.clean:
        return _conflict(locked, base=base, base_commit=base_commit, theirs=theirs,
                         where=where, editor=editor, attempt=result.text)
    # A person's title stays; the chunk's metadata (heading path, symbol) follows the file. The
    # token count is the merged text's, not the chunk's.
    metadata = {key: value for key, value in metadata.items() if key != "token_count"}
    fragment = fragment_service.edit_fragment(
        SYSTEM, locked, based_on_version=locked.version, body=result.text,
        reason=f"merged upstream{where.at()} of {where.path} with {editor}'s edit", **metadata)
    changed = fragment.version != locked.version
    if changed:
        audit.record(SYSTEM, "fragment.source_merged", fragment, after={
            "path": where.path, "commit": where.commit or "", "editor": editor,
            "version": fragment.version})
    _settled(fragment, locked.source_state)
    # Upstream took the person's change itself: nothing of theirs is left to remember.
    set_state(fragment, IN_SYNC if result.text == theirs else MERGED)
    return Followed(fragment.source_state, fragment, theirs, where.commit or "", changed)


def _conflict(locked: Fragment, *, base: str, base_commit: str, theirs: str, where: Upstream,
              editor: str, attempt: str) -> Followed:
    """The person's text keeps being served; the base stays where it was, so the next sync
    merges from it again; the owner is asked (a later change refreshes the same question)."""
    detail = {"base": base, "upstream": theirs, "curated": locked.body, "attempt": attempt,
              "commit": where.commit or "", "base_commit": base_commit, "path": where.path,
              "start_line": where.start_line, "end_line": where.end_line, "editor": editor,
              "version": locked.version}
    audit.record(SYSTEM, "fragment.source_conflict", locked, after={
        key: detail[key] for key in ("path", "commit", "start_line", "end_line", "editor",
                                     "version")})
    set_state(locked, CONFLICT)
    lines = (f" lines {where.start_line}-{where.end_line}" if where.start_line else "")
    source_nudge.send(sender=Fragment, fragment=locked, kind=NudgeKind.SOURCE_CONFLICT,
                      action="open", detail=detail, reasons=[{
                          "code": "source_conflict",
                          "detail": (f"{where.path}{lines} changed upstream{where.at()} where "
                                     f"{editor} edited it")}])
    return Followed(CONFLICT, locked, base, base_commit, False)


def gone(fragment: Fragment, *, base: str, where: Upstream) -> None:
    """The source text of an edited fragment was deleted: it stays active (a person's words are
    never retired behind their back), ``gone``, and its owner decides."""
    editor = last_editor(fragment)
    audit.record(SYSTEM, "fragment.source_gone", fragment, after={
        "path": where.path, "commit": where.commit or "", "editor": editor})
    set_state(fragment, GONE)
    source_nudge.send(sender=Fragment, fragment=fragment, kind=NudgeKind.SOURCE_GONE,
                      action="open", detail={"base": base, "curated": fragment.body,
                                             "commit": where.commit or "", "path": where.path,
                                             "editor": editor}, reasons=[{
                          "code": "source_gone",
                          "detail": (f"its text was deleted from {where.path}{where.at()}; "
                                     f"kept because {editor} edited it")}])


def _settled(fragment: Fragment, was: str) -> None:
    """A conflict that a later upstream text resolves by itself, or a deleted source text that
    came back: the open question is closed."""
    if was == CONFLICT:
        source_nudge.send(sender=Fragment, fragment=fragment, kind=NudgeKind.SOURCE_CONFLICT,
                          action="close", detail=None, reasons=None)
    elif was == GONE:
        source_nudge.send(sender=Fragment, fragment=fragment, kind=NudgeKind.SOURCE_GONE,
                          action="close", detail=None, reasons=None)


def lock(fragment_id: int) -> Fragment:
    """The fragment row, locked until the caller's transaction ends: a person's edit based on
    what was read here waits, then meets the version check (409) instead of being lost."""
    return (Fragment.objects.select_for_update(of=("self",)).select_related("owner", "scope")
            .get(pk=fragment_id))
