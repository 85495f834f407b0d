"""The ingestion lane: sources → normalize → chunk → dedup → embed → index, per group of files.

Idempotent by construction:

* a SourcePointer (document, anchor) is the identity of a chunk; a new fragment's id is the
  UUID5 of scope + source path + anchor, so a rerun maps onto the same rows;
* a document whose content hash is unchanged is skipped outright, a chunk whose hash is
  unchanged is left alone — re-ingesting identical content writes nothing;
* each group of files is written in one transaction (fragments, versions, pointers, vectors),
  so a worker killed mid-job leaves either all of a group or none of it; the rerun redoes the
  missing groups, and the lexical index is reconciled for every fragment the job touched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization, Repository, Scope
from accounts.permissions import SYSTEM
from contexts import indexing
from contexts.ingestion.chunk import chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.simhash import BandIndex, simhash, to_signed64, to_unsigned64
from contexts.ingestion.sources import Skipped, SourceFile
from contexts.ingestion.types import Chunk, NormalizedDocument
from contexts.models import (
    Context,
    Fragment,
    FragmentKind,
    FragmentStatus,
    Link,
    SourceDocument,
    SourcePointer,
)
from contexts.models.fragments import LinkKind
from contexts.services import fragments as fragment_service

logger = logging.getLogger(__name__)
UID_NAMESPACE = uuid.UUID("6f1c3a52-8a43-4c1e-9a57-2f0c8e7b9d10")
NEAR_DUPLICATE_DISTANCE = 3
FRONT_MATTER_KINDS = {"adr", "runbook", "policy", "negative", "session-summary"}


@dataclass
class Target:
    """Where a job's fragments go, and who owns them by default."""

    org: Organization
    scope: Scope
    repository: Repository | None = None
    context: Context | None = None
    default_owner: object | None = None


@dataclass
class Stats:
    files_done: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0
    duplicates: int = 0
    errors: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)
    chunk_tokens: list[int] = field(default_factory=list)
    encode_seconds: float = 0.0
    encoded_texts: int = 0


@dataclass
class Planned:
    """A file after normalize + chunk, before anything is written."""

    source: SourceFile
    doc: NormalizedDocument
    chunks: list[Chunk]
    document: SourceDocument | None


def document_hash(doc: NormalizedDocument) -> str:
    """Body and front matter: an edit of only ``owner:`` or ``kind:`` is still a change."""
    meta = json.dumps(doc.front_matter, sort_keys=True, default=str)
    return hashlib.sha256(f"{doc.content_hash}\n{meta}".encode()).hexdigest()


def fragment_uid(scope: Scope, path: str, anchor: str) -> uuid.UUID:
    return uuid.uuid5(UID_NAMESPACE, f"{scope.public_id}|{path}#{anchor}")


def dedup_text(chunk_: Chunk) -> str:
    """The chunk without its context header line, so that the same code or prose in two files
    hashes alike."""
    first, _, rest = chunk_.text.partition("\n")
    return rest if rest.strip() else chunk_.text


class Ingestor:
    def __init__(self, target: Target, *, batch_chunks: int = 64,
                 on_progress: Callable[[Stats], None] | None = None) -> None:
        self.target = target
        self.batch_chunks = batch_chunks
        self.on_progress = on_progress or (lambda stats: None)
        self.stats = Stats()
        self.bands: BandIndex[int] = BandIndex()
        self._owners: dict[str, object | None] = {}
        self._links: list[tuple[int, str, str, str]] = []  # fragment, doc path, target, kind
        for pk, value in Fragment.objects.filter(
                scope=target.scope, status=FragmentStatus.ACTIVE,
                simhash__isnull=False).values_list("pk", "simhash"):
            self.bands.add(pk, to_unsigned64(value))

    # -- driving -------------------------------------------------------------------------------
    def run(self, files: Iterable[SourceFile | Skipped]) -> Stats:
        group: list[Planned] = []
        pending_chunks = 0
        for item in files:
            if isinstance(item, Skipped):
                self.stats.skipped.append({"path": item.path, "reason": item.reason})
                continue
            planned = self._plan(item)
            if planned is None:
                continue
            group.append(planned)
            pending_chunks += len(planned.chunks)
            if pending_chunks >= self.batch_chunks:
                self._write_group(group)
                group, pending_chunks = [], 0
        if group:
            self._write_group(group)
        self._write_links()
        indexing.sync_lexical(self.stats.touched)
        return self.stats

    def _plan(self, source: SourceFile) -> Planned | None:
        """Normalize and chunk one file; None when it failed or its content is unchanged."""
        try:
            doc = normalize(source.path, source.raw)
            document = self._document(source.path)
            if document is not None and document.content_hash == document_hash(doc):
                known = list(document.pointers.values_list("fragment_id", flat=True))
                if known:  # identical content: nothing to chunk, embed or write
                    self.stats.unchanged += len(known)
                    self.stats.touched.update(known)
                    self.stats.files_done += 1
                    self.on_progress(self.stats)
                    return None
            chunks = chunk(doc) if doc.text.strip() else []
        except Exception as exc:  # noqa: BLE001 - one bad file never fails the job
            logger.exception("could not chunk %s", source.path)
            self._fail(source.path, f"{type(exc).__name__}: {exc}")
            return None
        return Planned(source, doc, chunks, document)

    def _fail(self, path: str, reason: str) -> None:
        self.stats.errors.append({"path": path, "reason": reason[:500]})
        self.stats.files_done += 1
        self.on_progress(self.stats)

    # -- writing -------------------------------------------------------------------------------
    def _write_group(self, group: list[Planned]) -> None:
        """Write these files and their vectors in one transaction."""
        try:
            with transaction.atomic(), fragment_service.indexing_handled_by_caller():
                changed: list[Fragment] = []
                for planned in group:
                    changed.extend(self._write_file(planned))
                self._embed(changed)
        except Exception as exc:  # noqa: BLE001 - retry one file at a time to isolate it
            if len(group) == 1:
                logger.exception("could not ingest %s", group[0].source.path)
                self._fail(group[0].source.path, f"{type(exc).__name__}: {exc}")
                return
            for planned in group:
                self._write_group([planned])
            return
        self.stats.files_done += len(group)
        self.on_progress(self.stats)

    def _document(self, path: str) -> SourceDocument | None:
        return SourceDocument.objects.filter(org=self.target.org,
                                             repository=self.target.repository,
                                             path=path).first()

    def _write_file(self, planned: Planned) -> list[Fragment]:
        source, doc, document = planned.source, planned.doc, planned.document
        now = timezone.now()
        if document is None:
            document = SourceDocument.objects.create(
                org=self.target.org, repository=self.target.repository, path=source.path,
                language=doc.language, author=source.author, authored_at=source.authored_at,
                content_hash=document_hash(doc), size_bytes=len(source.raw), changed_at=now,
            )
        elif document.content_hash != document_hash(doc):
            document.content_hash = document_hash(doc)
            document.size_bytes = len(source.raw)
            document.author, document.authored_at = source.author, source.authored_at
            document.language, document.changed_at = doc.language, now
            document.save()
        pointers = {p.anchor: p for p in document.pointers.select_related("fragment")}
        changed: list[Fragment] = []
        seen: set[str] = set()
        for chunk_ in planned.chunks:
            seen.add(chunk_.anchor)
            chunk_hash = fragment_service.content_hash(chunk_.text)
            self.stats.chunk_tokens.append(chunk_.token_count)
            pointer = pointers.get(chunk_.anchor)
            if pointer is not None and pointer.content_hash == chunk_hash:
                self.stats.unchanged += 1
                self.stats.touched.add(pointer.fragment_id)
                continue
            fragment = self._upsert_chunk(document, doc, chunk_, chunk_hash, pointer)
            if fragment is not None:
                changed.append(fragment)
        for anchor, pointer in pointers.items():
            if anchor not in seen:
                self._drop_pointer(pointer)
        self._remember_links(document, doc, changed)
        return changed

    def _upsert_chunk(self, document: SourceDocument, doc: NormalizedDocument, chunk_: Chunk,
                      chunk_hash: str, pointer: SourcePointer | None) -> Fragment | None:
        lines = {"start_line": chunk_.start_line, "end_line": chunk_.end_line}
        if pointer is not None and pointer.fragment.sources.count() == 1:
            # The chunk changed in place: a new version of its fragment.
            fragment = fragment_service.edit_fragment(
                SYSTEM, pointer.fragment, based_on_version=pointer.fragment.version,
                body=chunk_.text, title=chunk_.title, reason=f"re-ingested from {doc.path}",
                heading_path=list(chunk_.heading_path), symbol=chunk_.symbol or "",
            )
            self._set_chunk_fields(fragment, chunk_)
            SourcePointer.objects.filter(pk=pointer.pk).update(content_hash=chunk_hash, **lines)
            self.stats.updated += 1
            self.stats.touched.add(fragment.pk)
            return fragment
        if pointer is not None:  # was collapsed into a shared fragment: detach, then re-place
            pointer.delete()
        duplicate = self._near_duplicate(chunk_, chunk_hash)
        if duplicate is not None:
            SourcePointer.objects.update_or_create(
                document=document, anchor=chunk_.anchor,
                defaults={"fragment": duplicate, "content_hash": chunk_hash, **lines})
            self.stats.duplicates += 1
            self.stats.touched.add(duplicate.pk)
            return None
        uid = fragment_uid(self.target.scope, doc.path, chunk_.anchor)
        existing = Fragment.objects.filter(uid=uid).first()
        if existing is not None:  # its first source moved on; keep the id, take the new text
            fragment = fragment_service.edit_fragment(
                SYSTEM, existing, based_on_version=existing.version, body=chunk_.text,
                title=chunk_.title, reason=f"re-ingested from {doc.path}")
            self.stats.updated += 1
        else:
            fragment = fragment_service.create_fragment(
                SYSTEM, self.target.scope, uid=uid, body=chunk_.text, title=chunk_.title,
                kind=self._kind(doc, chunk_), owner=self._owner(doc),
                heading_path=list(chunk_.heading_path), language=chunk_.language,
                symbol=chunk_.symbol or "", token_count=chunk_.token_count,
                contexts=[self.target.context] if self.target.context else [],
                reason=f"ingested from {doc.path}",
                natural_language=doc.natural_language or "",
                chunker_version=chunk_.chunker_version,
                valid_from=document.authored_at or timezone.now(),
            )
            self.stats.created += 1
        self._set_chunk_fields(fragment, chunk_)
        SourcePointer.objects.update_or_create(
            document=document, anchor=chunk_.anchor,
            defaults={"fragment": fragment, "content_hash": chunk_hash, **lines})
        self.stats.touched.add(fragment.pk)
        return fragment

    def _set_chunk_fields(self, fragment: Fragment, chunk_: Chunk) -> None:
        value = simhash(dedup_text(chunk_))
        fragment.simhash = to_signed64(value)
        fragment.token_count = chunk_.token_count
        fragment.chunker_version = chunk_.chunker_version
        fragment.namespace = chunk_.namespace
        fragment.save(update_fields=["simhash", "token_count", "chunker_version", "namespace"])
        self.bands.add(fragment.pk, value)

    def _near_duplicate(self, chunk_: Chunk, chunk_hash: str) -> Fragment | None:
        exact = Fragment.objects.filter(scope=self.target.scope, content_hash=chunk_hash,
                                        status=FragmentStatus.ACTIVE).first()
        if exact is not None:
            return exact
        near = self.bands.near(simhash(dedup_text(chunk_)), NEAR_DUPLICATE_DISTANCE)
        if not near:
            return None
        best = min(near, key=lambda pair: pair[1])[0]
        return Fragment.objects.filter(pk=best, status=FragmentStatus.ACTIVE).first()

    def _drop_pointer(self, pointer: SourcePointer) -> None:
        fragment = pointer.fragment
        pointer.delete()
        if not fragment.sources.exists() and fragment.status == FragmentStatus.ACTIVE:
            fragment_service.retire_fragment(SYSTEM, fragment, reason="removed from its source")
            self.stats.retired += 1
            self.stats.touched.add(fragment.pk)

    def _kind(self, doc: NormalizedDocument, chunk_: Chunk) -> str:
        if doc.kind in FRONT_MATTER_KINDS:
            return doc.kind
        return FragmentKind.CODE if chunk_.namespace == "code" else FragmentKind.PROSE

    def _owner(self, doc: NormalizedDocument):
        username = str(doc.front_matter.get("owner") or "").strip()
        if not username:
            return self.target.default_owner
        if username not in self._owners:
            self._owners[username] = get_user_model().objects.filter(
                username=username, is_active=True).first()
        return self._owners[username] or self.target.default_owner

    def _embed(self, fragments: list[Fragment]) -> None:
        if not fragments:
            return
        started = time.perf_counter()
        indexing.embed_fragments(fragments)
        self.stats.encode_seconds += time.perf_counter() - started
        self.stats.encoded_texts += len(fragments)

    # -- citation links ------------------------------------------------------------------------
    def _remember_links(self, document: SourceDocument, doc: NormalizedDocument,
                        changed: list[Fragment]) -> None:
        if not doc.links:
            return
        front = set(doc.front_matter.get("links") or [])
        fragments = list(Fragment.objects.filter(sources__document=document).distinct())
        for target in doc.links:
            kind = LinkKind.FRONT_MATTER if target in front else LinkKind.MARKDOWN
            holders = [f for f in fragments if target in f.body] or fragments[:1]
            for fragment in holders:
                self._links.append((fragment.pk, doc.path, target, kind))

    def _write_links(self) -> None:
        for fragment_id, doc_path, target, kind in self._links:
            path = resolve_link(doc_path, target)
            if path is None:
                continue
            first = (SourcePointer.objects.filter(
                document__org=self.target.org, document__repository=self.target.repository,
                document__path=path, fragment__status=FragmentStatus.ACTIVE)
                .order_by("start_line").values_list("fragment_id", flat=True).first())
            if first is not None and first != fragment_id:
                Link.objects.get_or_create(source_id=fragment_id, target_id=first, kind=kind)


def resolve_link(doc_path: str, target: str) -> str | None:
    """A relative Markdown link target → repository path (None for URLs and anchors)."""
    target = target.split("#", 1)[0].split("?", 1)[0].strip()
    if not target or "://" in target or target.startswith(("mailto:", "/")):
        return None
    parts: list[str] = []
    for part in (PurePosixPath(doc_path).parent / target).parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)
