"""Evidence: what a fragment's text cites, resolved when a person writes it, re-checked when a
sync changes it, re-snapshotted when someone verifies it (issue 38, docs/governance.md).

* :func:`extract` finds the references in a text: repository paths (``src/x.py``), symbols
  (```refill_bucket```, ``QuerySet.bulk_create``, ``refill_bucket()``, snake_case names) and
  fragment ids (``frag_…``).
* :func:`resolve` keeps the ones the fragment's scope can see — documents of its repository
  (of the organization-wide documents for a scope outside any repository), definitions in
  their code, fragments of its own scope chain — and records for each the hash of what it
  points at and the commit it was read at. A symbol is one *definition* (tree-sitter, the
  chunker's grammars), not the chunk that happens to hold it, so a change to another function
  of the same file leaves it alone; a path the text also cites a symbol in is narrowed to
  those symbols.
* :func:`recheck` compares a fragment's entries with what they point at after a sync or job
  wrote (or removed) documents — ``changed``, ``missing`` (the definition or file is gone) or
  still ``current``; :mod:`.evidence_follow` runs it for every fragment resting on those
  paths and nudges the owners (``evidence_changed``, with the unified diff).
* :func:`verify_due` lists the fragments whose kind's verify-by interval passed
  (``GOVERNANCE_VERIFY_AFTER_DAYS``); the staleness scan nudges them.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import logging
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q

from accounts.models import Repository, Scope
from accounts.permissions import principal_user
from contexts.governance.clock import per_kind, smallest
from contexts.governance.clock import resolve as resolve_now
from contexts.ingestion.chunk_code import definitions
from contexts.ingestion.normalize import normalize
from contexts.models import (
    Fragment,
    FragmentStatus,
    FragmentVersion,
    Nudge,
    SourceDocument,
    SourcePointer,
)
from contexts.models.fragments import EvidenceState, FragmentSourceState, Namespace
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services import audit
from contexts.services import evidence as evidence_service

logger = logging.getLogger(__name__)

# What an entry keeps of the text it was resolved against, to show a diff when it changes.
TEXT_LIMIT = 8000
# A symbol defined in more documents than this is too common a name to be evidence, unless
# the text also cites the path it lives in.
MAX_SYMBOL_DOCUMENTS = 3
# Documents searched for a symbol no chunk is named after (a method inside a merged chunk).
MAX_SEARCHED_DOCUMENTS = 25
DIFF_LIMIT = 6000
REASON = "evidence_changed"

FRAGMENT_REF = re.compile(r"\bfrag_[0-9a-f]{20}\b")
# A path: segments joined by "/", or a bare file name with an extension.
_PATH = re.compile(r"(?<![\w@/.-])(?:\./)?((?:[\w.-]+/)+[\w.-]+|[\w-]+\.[A-Za-z]\w{0,7})")
_TICKED = re.compile(r"`([A-Za-z_]\w*(?:(?:\.|::)[A-Za-z_]\w*)*)(?:\(\))?`")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\(")
_SNAKE = re.compile(r"(?<![\w.])([a-z][a-z0-9]*_[a-z0-9_]+)\b")
_DOTTED = re.compile(r"(?<![\w.])([A-Z]\w*\.[A-Za-z_]\w*)\b")


@dataclass(frozen=True)
class References:
    paths: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    fragments: tuple[str, ...] = ()


def extract(text: str) -> References:
    """The paths, symbols and fragment ids a text cites (candidates: :func:`resolve` keeps
    what exists)."""
    fragments = tuple(dict.fromkeys(FRAGMENT_REF.findall(text)))
    paths = []
    for match in _PATH.findall(text):
        path = match.rstrip(".,;:)")
        if "/" in path or "." in path.strip("."):
            paths.append(path)
    paths = list(dict.fromkeys(paths))
    symbols = []
    for pattern in (_TICKED, _CALLED, _SNAKE, _DOTTED):
        for name in pattern.findall(text):
            name = name.replace("::", ".")
            if name not in paths and not FRAGMENT_REF.fullmatch(name):
                symbols.append(name)
    return References(tuple(paths), tuple(dict.fromkeys(symbols)), fragments)


def text_hash(text: str) -> str:
    """A definition's hash, blind to what moving or re-indenting it changes (trailing
    spaces, blank lines, common indentation), so only a change of the code itself counts."""
    lines = [line.rstrip() for line in textwrap.dedent(text).splitlines() if line.strip()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


# --- where a scope's references point ---------------------------------------------------------
def scope_chain(scope: Scope) -> list[Scope]:
    """The scope and its ancestors (session → repository → organization)."""
    chain, node, seen = [], scope, set()
    while node is not None and node.pk not in seen:
        seen.add(node.pk)
        chain.append(node)
        node = node.parent
    return chain


def repository_of(scope: Scope) -> int | None:
    """The repository whose documents the scope's fragments may cite: the nearest repository
    scope up its chain; None (the organization-wide documents) outside any repository."""
    ids = [s.pk for s in scope_chain(scope) if s.kind == "repo"]
    if not ids:
        return None
    return Repository.objects.filter(scope_id=ids[0]).values_list("pk", flat=True).first()


class Documents:
    """The documents of one repository, each read back from its chunks once per call."""

    def __init__(self, org_id: int, repository_id: int | None) -> None:
        self.org_id, self.repository_id = org_id, repository_id
        self._text: dict[int, str] = {}
        self._definitions: dict[int, dict[str, str]] = {}

    def query(self):
        return SourceDocument.objects.filter(org_id=self.org_id,
                                             repository_id=self.repository_id)

    def by_path(self, paths: Iterable[str]) -> dict[str, SourceDocument]:
        return {d.path: d for d in self.query().filter(path__in=list(paths))}

    def text(self, document: SourceDocument) -> str:
        """The document's text as its chunks hold it: each chunk's lines put back at the lines
        it was cut from (a code chunk's header line dropped), gaps left blank. A chunk a person
        edited contributes the source text it was last written from, not the edit."""
        if document.pk not in self._text:
            lines: dict[int, str] = {}
            rows = (SourcePointer.objects.filter(document=document,
                                                 fragment__status=FragmentStatus.ACTIVE)
                    .order_by("start_line")
                    .values_list("start_line", "base_text", "fragment__body",
                                 "fragment__source_state", "fragment__namespace"))
            for start, base, body, state, namespace in rows:
                text = body if state in ("", FragmentSourceState.IN_SYNC) or not base else base
                chunk_lines = text.split("\n")
                if namespace == Namespace.CODE and document.path in chunk_lines[0]:
                    chunk_lines = chunk_lines[1:]  # "# src/x.py · refill_bucket"
                for offset, line in enumerate(chunk_lines):
                    lines.setdefault((start or 1) + offset, line)
            last = max(lines, default=0)
            self._text[document.pk] = "\n".join(lines.get(i, "") for i in range(1, last + 1))
        return self._text[document.pk]

    def definitions(self, document: SourceDocument) -> dict[str, str]:
        if document.pk not in self._definitions:
            text = self.text(document)
            self._definitions[document.pk] = definitions(normalize(document.path, text)) \
                if text.strip() else {}
        return self._definitions[document.pk]

    def find(self, document: SourceDocument, symbol: str) -> tuple[str, str] | None:
        """(qualified name, text) of ``symbol`` in the document: the exact qualified name,
        else the one definition whose name ends with it."""
        found = self.definitions(document)
        if symbol in found:
            return symbol, found[symbol]
        tails = [name for name in found if name.endswith(f".{symbol}")]
        # The outermost first: "Bucket.refill" before "Bucket.refill.inner.refill".
        tails.sort(key=lambda name: name.count("."))
        return (tails[0], found[tails[0]]) if tails else None

    def defining(self, symbol: str) -> list[SourceDocument]:
        """Documents of the repository that may define ``symbol``: those with a chunk named
        after it, else (a definition merged into a neighbour's chunk) those whose code
        mentions its last name."""
        last = symbol.rsplit(".", 1)[-1]
        code = (Fragment.objects.filter(org_id=self.org_id, status=FragmentStatus.ACTIVE,
                                        namespace=Namespace.CODE)
                .filter(sources__document__repository_id=self.repository_id))
        named = code.filter(Q(symbol=symbol) | Q(symbol__endswith=f".{symbol}")
                            | Q(symbol__endswith=f".{last}") | Q(symbol=last))
        ids = list(named.values_list("sources__document_id", flat=True).distinct()[
            :MAX_SEARCHED_DOCUMENTS])
        if not ids:
            ids = list(code.filter(body__contains=last)
                       .values_list("sources__document_id", flat=True).distinct()[
                           :MAX_SEARCHED_DOCUMENTS])
        return list(self.query().filter(pk__in=ids).order_by("path"))


def _clip(text: str) -> str:
    return text[:TEXT_LIMIT]


def _entry(ref: str, kind: str, document: SourceDocument | None = None, **fields: Any) -> dict:
    return {"ref": ref, "kind": kind, "path": document.path if document else "",
            "repository": document.repository_id if document else None,
            "symbol": "", "fragment": "", "commit": (document.source_commit or "")
            if document else "", "state": EvidenceState.CURRENT, **fields}


# --- resolving a fragment's references ----------------------------------------------------------
def resolve(fragment: Fragment) -> list[dict]:
    """The evidence entries of what the fragment's title and text cite, as the sources stand
    now (every entry ``current``)."""
    refs = extract(f"{fragment.title}\n{fragment.body}")
    if not (refs.paths or refs.symbols or refs.fragments):
        return []
    scope = Scope.objects.get(pk=fragment.scope_id)
    docs = Documents(fragment.org_id, repository_of(scope))
    cited_paths = docs.by_path(refs.paths) if refs.paths else {}
    entries: list[dict] = []
    narrowed: set[str] = set()
    for symbol in refs.symbols:
        found = _resolve_symbol(docs, symbol, cited_paths)
        for document, qualified, text in found:
            narrowed.add(document.path)
            entries.append(_entry(symbol, "symbol", document, symbol=qualified,
                                  hash=text_hash(text), text=_clip(text)))
    for path, document in cited_paths.items():
        if path not in narrowed:
            entries.append(_entry(path, "file", document, hash=document.content_hash,
                                  text=_clip(docs.text(document))))
    entries.extend(_fragment_entries(fragment, scope, refs.fragments))
    return entries


def _resolve_symbol(docs: Documents, symbol: str, cited: dict[str, SourceDocument]
                    ) -> list[tuple[SourceDocument, str, str]]:
    """(document, qualified name, definition text) for each place ``symbol`` is defined:
    in the cited files if it is defined there, else anywhere in the repository — unless it
    is defined in too many files to say which one the text means."""
    found = [(d, *hit) for d in cited.values() if (hit := docs.find(d, symbol))]
    if found:
        return found
    found = [(d, *hit) for d in docs.defining(symbol) if (hit := docs.find(d, symbol))]
    return found if len(found) <= MAX_SYMBOL_DOCUMENTS else []


def _fragment_entries(fragment: Fragment, scope: Scope, public_ids: Iterable[str]
                      ) -> list[dict]:
    """Cited fragments the citing one's readers can read: the same organization, homed in its
    scope or one of the scopes above it (an id from elsewhere is not evidence — a diff of it
    would show its text to people who may not read it)."""
    chain = [s.pk for s in scope_chain(scope)]
    rows = (Fragment.objects.filter(org_id=fragment.org_id, public_id__in=list(public_ids),
                                    scope_id__in=chain)
            .exclude(pk=fragment.pk).values_list("public_id", "content_hash", "body"))
    return [_entry(public_id, "fragment", fragment=public_id, hash=body_hash,
                   text=_clip(body)) for public_id, body_hash, body in rows]


def record(sender: Any = None, fragment: Fragment | None = None, **kwargs: Any) -> None:
    """Receiver of :data:`contexts.services.evidence.text_written`: a person's text is in,
    its evidence resolved and stored in the same transaction."""
    if fragment is not None:
        evidence_service.store(fragment, resolve(fragment))


# --- after a sync ------------------------------------------------------------------------------
@dataclass
class Recheck:
    fragment: Fragment
    entries: list[dict]
    flagged: list[dict] = field(default_factory=list)  # {ref, state, diff, commit}


def _current(docs: Documents, entry: dict, documents: dict[str, SourceDocument]
             ) -> tuple[str | None, str, str]:
    """(hash, text, commit) of what the entry points at now; hash None when it is gone."""
    document = documents.get(entry["path"])
    if document is None:
        return None, "", ""
    commit = document.source_commit or ""
    if entry["kind"] == "symbol":
        hit = docs.find(document, entry["symbol"])
        if hit is None:
            return None, "", commit
        return text_hash(hit[1]), hit[1], commit
    return document.content_hash, docs.text(document), commit


def diff(old: str, new: str, ref: str) -> str:
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"{ref} (verified)",
                                 f"{ref} (now)", lineterm="")
    text = "\n".join(lines)
    return text if len(text) <= DIFF_LIMIT else text[:DIFF_LIMIT] + "\n… (diff cut)"


def recheck(fragment: Fragment, docs: Documents, paths: set[str],
            documents: dict[str, SourceDocument]) -> Recheck:
    """The fragment's entries on ``paths`` of ``docs``' repository compared with what they
    point at now; each changed entry keeps its verified hash (the diff's old side)."""
    out = Recheck(fragment, [dict(e) for e in fragment.evidence or []])
    for entry in out.entries:
        if (entry.get("path") not in paths or entry.get("kind") not in ("file", "symbol")
                or entry.get("repository") != docs.repository_id):
            continue
        now_hash, now_text, commit = _current(docs, entry, documents)
        state = (EvidenceState.MISSING if now_hash is None else
                 EvidenceState.CURRENT if now_hash == entry.get("hash") else
                 EvidenceState.CHANGED)
        if state != entry.get("state"):
            entry["state"] = state
            if state != EvidenceState.CURRENT:
                out.flagged.append({"ref": entry["ref"], "path": entry["path"],
                                    "symbol": entry.get("symbol", ""), "state": state,
                                    "commit": commit,
                                    "diff": diff(entry.get("text", ""), now_text,
                                                 entry["ref"])})
    return out


# --- verifying -----------------------------------------------------------------------------
def resnapshot(fragment: Fragment) -> list[dict]:
    """The evidence as it stands now, every entry current: what verifying records."""
    return resolve(fragment)


def verify_due(org_id: int, now: dt.datetime | None = None) -> dict[int, str]:
    """fragment pk → reason, for every active fragment a person vouches for whose kind's
    verify-by interval (``GOVERNANCE_VERIFY_AFTER_DAYS``) passed since it was last verified or
    edited. "Vouches for": a person wrote one of its texts (not merely changed its owner or
    kind), its text is a person's merged with its file (merged, in conflict, gone), or someone
    verified it before — what the system wrote from files alone is kept true by the syncs,
    not by a calendar."""
    now = resolve_now(now)
    cutoff = now - dt.timedelta(days=smallest("GOVERNANCE_VERIFY_AFTER_DAYS"))
    # A version a person wrote whose text is new (not a metadata change such as a hand-over,
    # which copies the text before it).
    same_text_before = FragmentVersion.objects.filter(
        fragment=OuterRef("fragment"), number=OuterRef("number") - 1, body=OuterRef("body"))
    by_person = Exists(FragmentVersion.objects.filter(fragment=OuterRef("pk"),
                                                      editor__isnull=False)
                       .exclude(Exists(same_text_before)))
    rows = (Fragment.objects.filter(org_id=org_id, status=FragmentStatus.ACTIVE,
                                    last_edited_at__lt=cutoff)
            .filter(Q(verified_at__isnull=True) | Q(verified_at__lt=cutoff))
            .filter(by_person | Q(verified_at__isnull=False)
                    | Q(source_state__in=[FragmentSourceState.MERGED,
                                          FragmentSourceState.CONFLICT,
                                          FragmentSourceState.GONE]))
            .values_list("pk", "kind", "last_edited_at", "verified_at"))
    due = {}
    for pk, kind, edited, verified in rows:
        days = per_kind("GOVERNANCE_VERIFY_AFTER_DAYS", kind)
        since = max(edited, verified) if verified else edited
        if now - since > dt.timedelta(days=days):
            due[pk] = (f"not verified for {(now - since).days} days (since "
                       f"{since.date().isoformat()}; {kind} fragments are verified every "
                       f"{days:g} days)")
    return due


def settle(fragment: Fragment, principal: Any) -> int:
    """Answer the fragment's open ``evidence_changed`` and ``verify_due`` nudges "still
    accurate", as ``principal`` (it has just been verified). Returns how many. Each is audited
    ``nudge.answer`` like an answer given in the inbox: the trail says who closed it."""
    settled = list(Nudge.objects.filter(fragment=fragment, kind__in=[
        NudgeKind.EVIDENCE_CHANGED, NudgeKind.VERIFY_DUE]).exclude(state=NudgeState.ANSWERED)
        .order_by("pk").values_list("pk", "public_id", "kind"))
    if not settled:
        return 0
    Nudge.objects.filter(pk__in=[pk for pk, _, _ in settled]).update(
        state=NudgeState.ANSWERED, answer=NudgeAnswer.STILL_ACCURATE,
        answered_at=fragment.verified_at, answered_by=principal_user(principal))
    audit.record_many([audit.build(principal, "nudge.answer", fragment, after={
        "nudge": public_id, "kind": kind, "answer": NudgeAnswer.STILL_ACCURATE,
        "by": "verify"}) for _, public_id, kind in settled])
    return len(settled)
