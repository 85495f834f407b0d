"""What a fragment rests on (issue 38, docs/governance.md "Evidence"): its evidence, stored
and summarised here, resolved and re-checked by :mod:`contexts.governance.evidence`.

Two kinds of evidence, one shape — ``{ref, kind, path, symbol, fragment, hash, commit, state}``:

* a fragment a source file brought rests on those lines of that file at that commit. That is
  what its :class:`~contexts.models.SourcePointer` already records (path, lines, the hash of
  the chunk text, the commit): :func:`entries` derives a ``file`` entry from each pointer rather
  than copying it, and whether the fragment still stands with its file is its
  ``source_state`` (the sync's merge, ``contexts.ingestion.pipeline``);
* a fragment a person wrote or proposed rests on what its text cites — repository paths,
  symbols, other fragments — resolved when it is written and stored in ``Fragment.evidence``
  (``evidence_paths``: the paths alone, GIN-indexed, so a sync finds the fragments it touches).

This layer cannot parse code (the chunker's grammars live above it), so the resolution is a
receiver of :data:`text_written`, and the re-check after a sync one of
:data:`documents_changed`; both are connected in ``ContextsConfig.ready()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import django.dispatch
from django.db import transaction

from contexts.models import Fragment, SourcePointer
from contexts.models.fragments import EvidenceState

# Sent inside the transaction of a person's create or edit (never the system's: ingestion
# writes what files say), with ``fragment``: its evidence is resolved before the write commits.
text_written = django.dispatch.Signal()
# Sent once a write of source documents committed (a sync, a job), with ``org_id``,
# ``repository_id`` and ``paths``: the fragments resting on those paths are re-checked.
documents_changed = django.dispatch.Signal()

# The states a retrieval may exclude (``exclude_states``): a fragment's evidence_state values
# beside its source_state values (contexts.models.FragmentSourceState).
STATES = tuple(EvidenceState.values)


def fragment_state(entries: Iterable[dict]) -> str:
    """The fragment's evidence state from its entries: ``changed`` when anything it cites
    changed, else ``missing`` when something it cites is gone, else ``current``; empty when it
    cites nothing resolvable."""
    states = {entry.get("state") for entry in entries}
    if not states:
        return ""
    if EvidenceState.CHANGED in states:
        return EvidenceState.CHANGED
    if EvidenceState.MISSING in states:
        return EvidenceState.MISSING
    return EvidenceState.CURRENT


def store(fragment: Fragment, entries: list[dict]) -> Fragment:
    """Record ``entries`` as the fragment's evidence (in the caller's transaction). Derived
    data, like authority: no version, no audit event of its own — the write or the sync that
    caused it is audited — and no change signal (retrieval reads the columns from the row)."""
    fragment.evidence = entries
    fragment.evidence_paths = sorted({e["path"] for e in entries if e.get("path")})
    fragment.evidence_state = fragment_state(entries)
    Fragment.objects.filter(pk=fragment.pk).update(
        evidence=fragment.evidence, evidence_paths=fragment.evidence_paths,
        evidence_state=fragment.evidence_state)
    return fragment


def announce_documents(org_id: int, repository_id: int | None, paths: Iterable[str]) -> None:
    """Tell the receivers, once the caller's transaction commits, that these documents of
    the repository were written or removed."""
    paths = sorted(set(paths))
    if paths:
        transaction.on_commit(lambda: documents_changed.send(
            sender=SourcePointer, org_id=org_id, repository_id=repository_id, paths=paths))


def source_entries(fragment: Fragment) -> list[dict]:
    """A source fragment's ``file`` entries, one per source pointer: the lines it was cut
    from, the hash of that chunk text and the commit the file was read at."""
    state = EvidenceState.MISSING if fragment.source_state == "gone" else (
        EvidenceState.CHANGED if fragment.source_state == "conflict" else EvidenceState.CURRENT)
    rows = (SourcePointer.objects.filter(fragment=fragment)
            .order_by("document__path", "start_line")
            .values_list("document__path", "start_line", "end_line", "content_hash",
                         "document__source_commit"))
    return [{"ref": f"{path}#L{start}-L{end}" if start else path, "kind": "file", "path": path,
             "symbol": "", "fragment": "", "lines": [start, end], "hash": text_hash,
             "commit": commit or "", "state": state, "source": True}
            for path, start, end, text_hash, commit in rows]


def entries(fragment: Fragment) -> list[dict]:
    """Everything the fragment rests on: its source lines, then what its text cites."""
    return [*source_entries(fragment), *(dict(e) for e in fragment.evidence or [])]


def summary(state: str, *, cited: int, changed: int, sources: int = 0) -> dict[str, Any]:
    """What an answer says of a fragment's evidence: ``state`` its evidence_state (null when it
    cites nothing), ``refs`` how many things it rests on (what its text cites plus its source
    pointers), ``changed`` how many of the cited ones changed or are missing. Shared by
    retrieval answers (REST, MCP, the console's preview) and ``GET /api/fragments/{id}``."""
    return {"state": state or None, "refs": cited + sources, "changed": changed}


def summary_of(fragment: Fragment) -> dict[str, Any]:
    """:func:`summary` of a fragment row (one query for its source pointers)."""
    cited = fragment.evidence or []
    return summary(fragment.evidence_state, cited=len(cited),
                   changed=sum(e.get("state") != EvidenceState.CURRENT for e in cited),
                   sources=SourcePointer.objects.filter(fragment_id=fragment.pk).count())


def public(entries_: Iterable[dict]) -> list[dict[str, Any]]:
    """Entries as an API shows them (no hashes or stored texts)."""
    keys = ("ref", "kind", "path", "symbol", "fragment", "lines", "commit", "state")
    return [{key: entry.get(key) for key in keys if key in entry} for entry in entries_]
