"""The ingestion lane: sources → normalize → chunk → dedup → embed → index, per group of files.

Idempotent by construction:

* a SourcePointer (document, anchor) is the identity of a chunk; a new fragment's id is the
  UUID5 of scope + source path + anchor, so a rerun maps onto the same rows;
* a document whose content hash is unchanged is skipped outright, a chunk whose hash is
  unchanged is left alone — re-ingesting identical content writes nothing;
* each group of files is written in one transaction (fragments, versions, pointers, vectors),
  so a worker killed mid-job leaves either all of a group or none of it; the rerun redoes the
  missing groups, and the lexical index is reconciled for every fragment the job touched;
* one run at a time per repository (``target_lock``): a second run into it waits, then finds
  the first's documents unchanged instead of racing it to create them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

import numpy as np
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from accounts.models import Organization, Repository, Scope
from accounts.permissions import SYSTEM
from contexts.indexes import follower, indexing
from contexts.ingestion import target_lock, upstream
from contexts.ingestion.chunk import CHUNKER_VERSION, chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.owners import OwnerChain, Resolved
from contexts.ingestion.simhash import BandIndex, simhash, to_signed64, to_unsigned64
from contexts.ingestion.sources import Skipped, SourceFile
from contexts.ingestion.types import CODE_LANGUAGES, Chunk, NormalizedDocument
from contexts.kernel.tokens import count_tokens
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
from contexts.models.jobs import IngestionJob
from contexts.models.secrets import SecretAction, SecretOrigin
from contexts.secret_scan import PLACEHOLDER_MARK, Finding, describe
from contexts.services import db_retry
from contexts.services import evidence as evidence_service
from contexts.services import fragments as fragment_service
from contexts.services import secrets as secret_service

logger = logging.getLogger(__name__)
UID_NAMESPACE = uuid.UUID("6f1c3a52-8a43-4c1e-9a57-2f0c8e7b9d10")
NEAR_DUPLICATE_DISTANCE = 3
FRONT_MATTER_KINDS = {"adr", "runbook", "policy", "negative", "session-summary"}
# A group of files is written — searchable, and counted in the job's progress — once encoded.
# The first is small so the first fragments are searchable within seconds; each next one holds
# about GROUP_SECONDS of encoding at the rate measured so far (at most batch_chunks), so the
# progress a person watches moves every few seconds on a busy machine as on a quiet one. The
# model batches up to 32 texts at a time whatever the group: smaller groups cost little
# throughput (docs/performance.md, "First run").
FIRST_GROUP_CHUNKS = 16
MIN_GROUP_CHUNKS = 8
GROUP_SECONDS = 5.0


@dataclass
class Target:
    """Where a job's fragments go, and who owns them by default."""

    org: Organization
    scope: Scope
    repository: Repository | None = None
    context: Context | None = None
    default_owner: object | None = None
    job: IngestionJob | None = None  # whose findings of secrets these are
    # A git source's sync: the commit the files are read at, recorded on each document
    # written (``source_commit``) and in each fragment version's metadata.
    commit: str | None = None
    # Which source this run reads (``SourceDocument.origin``): ``git:<source id>``,
    # ``path:<root>``. A file may name its own (an upload job's files and archives). A run
    # removes or prunes only documents of the origins it reads, never "" (a document no
    # migration could attribute) nor another source's.
    origin: str = ""
    # Who owns its files (contexts/ingestion/owners.py): the source root's CODEOWNERS and git
    # history. None: front matter, then the scope's tech lead.
    owners: OwnerChain | None = None


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
    warnings: list[dict] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)
    # The fragments behind the counters (ids), for the record of what a sync did.
    created_ids: list[int] = field(default_factory=list)
    updated_ids: list[int] = field(default_factory=list)
    retired_ids: list[int] = field(default_factory=list)
    merged: list[int] = field(default_factory=list)      # a person's edit merged with upstream
    conflicted: list[int] = field(default_factory=list)  # overlapping: the person's text kept
    gone: list[int] = field(default_factory=list)  # source text deleted, kept: a person edited it
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
    # Secrets the file held (kind, file line), already redacted out of ``doc``.
    secrets: list[Finding] = field(default_factory=list)


def document_hash(doc: NormalizedDocument, policy_kind: str | None = None) -> str:
    """Body and front matter: an edit of only ``owner:`` or ``kind:`` is still a change. So is
    a new kind from the policy file (folded in only when there is one, so documents without
    stay unchanged)."""
    meta = json.dumps(doc.front_matter, sort_keys=True, default=str)
    policy = f"\npolicy-kind={policy_kind}" if policy_kind else ""
    return hashlib.sha256(f"{doc.content_hash}\n{meta}{policy}".encode()).hexdigest()


def fragment_uid(scope: Scope, path: str, anchor: str) -> uuid.UUID:
    return uuid.uuid5(UID_NAMESPACE, f"{scope.public_id}|{path}#{anchor}")


def dedup_text(chunk_: Chunk) -> str:
    """The chunk without its context header line, so that the same code or prose in two files
    hashes alike."""
    first, _, rest = chunk_.text.partition("\n")
    return rest if rest.strip() else chunk_.text


@dataclass
class ChunkPlan:
    """What to do with one chunk, decided before any write.

    ``action``: ``unchanged``; ``update`` (new version of ``fragment_id``); ``create`` (a new
    fragment with ``uid``); ``duplicate`` (one more source of ``fragment_id``, or of the
    fragment another chunk of this run creates with ``uid``).
    """

    chunk: Chunk
    text_hash: str
    fingerprint: int
    action: str
    pointer: SourcePointer | None = None

    fragment_id: int | None = None
    uid: uuid.UUID | None = None
    written_id: int | None = None  # the fragment a create or update wrote
    # Where its fragment stands against the source after the write (upstream.IN_SYNC, MERGED,
    # CONFLICT): a person's edit met this chunk's change (ADR 0020).
    outcome: str = ""
    # The texts the model reads (Embedder.passages: the chunk, then windows of a long one) and
    # their vectors, one row each.
    passages: list[str] | None = None
    vectors: np.ndarray | None = None

    def passage_keys(self) -> list[str]:
        return [indexing.vector_key(text) for text in self.passages or ()]


@dataclass
class FilePlan:
    planned: Planned
    chunks: list[ChunkPlan]
    dropped: list[SourcePointer]


class Ingestor:
    """Runs the lane over a stream of files, in groups.

    Encoding a group (the expensive part, in a background thread — torch releases the GIL)
    overlaps with writing the previous group, so the pipeline costs little beyond the model
    itself. Which chunk is new, changed or a duplicate is decided when a group is planned,
    from in-memory indexes that already include earlier groups' plans.
    """

    def __init__(self, target: Target, *, batch_chunks: int = 256,
                 on_progress: Callable[[Stats], None] | None = None,
                 reuse_vectors: bool = True, whole_documents: bool = False,
                 prune_missing: bool = False) -> None:
        self.target = target
        # A full walk of a source root: documents it no longer yields are removed — of the
        # origins it read only (``_prune``).
        self.prune_missing = prune_missing
        self._seen: dict[str, set[str]] = {}  # origin → paths the walk yielded under it
        # One fragment per document (benchmarks in BEIR layout), instead of chunking.
        self.whole_documents = whole_documents
        self.batch_chunks = batch_chunks
        self.reuse_vectors = reuse_vectors
        self.on_progress = on_progress or (lambda stats: None)
        self.stats = Stats()
        # Dedup state for the home scope: band index over SimHashes, exact content hashes.
        # Keys are fragment pks, or uids of fragments this run will create. Filled by run(),
        # under the target's lock, so that it includes what a run it waited for committed.
        self.bands: BandIndex[int | uuid.UUID] = BandIndex()
        self.by_hash: dict[str, int | uuid.UUID] = {}
        self.owners = target.owners or OwnerChain(target.org, target.scope, target.repository)
        if self.owners.fallback is None:
            self.owners.fallback = target.default_owner
        self._policy_kinds: dict[str, str] = {}  # path → kind the source's policy gives it
        self._name_findings: dict[str, list[Finding]] = {}  # path → secrets its name held
        self._generations = {ns: indexing.active_generation(ns) for ns in indexing.NAMESPACES}

    # -- driving -------------------------------------------------------------------------------
    def run(self, files: Iterable[SourceFile | Skipped], *, removed: Iterable[str] = (),
            moved: dict[str, str] | None = None) -> Stats:
        """Ingest ``files`` — one run at a time per document set (target_lock: a second run
        into the same repository waits, then finds the first's rows).

        Before them (a git source's sync, which knows what changed): the documents at
        ``removed`` paths are gone — their fragments retired —, and each document ``moved``
        from an old path to a new one takes the new path, keeping its fragments, to be read
        again there (its files should be among ``files``). Both are idempotent: a path with
        no document is nothing to do, a move already made is not made twice."""
        with target_lock.one_run_per_target(
                self.target.org.pk, self.target.repository.pk if self.target.repository else None,
                on_wait=self._waited), self._provenance():
            # Paths as they are stored: a secret in a name is replaced there too.
            moved = {self._path(old): self._path(new) for old, new in (moved or {}).items()}
            if moved:
                self._move(moved)
            self._remove(self._own_documents(self.target.origin)
                         .filter(path__in=[self._path(p) for p in removed]))
            self._load_dedup_index()
            return self._run(self._screened_names(files))

    def _path(self, path: str) -> str:
        """``path`` as documents hold it: each secret in it replaced by its placeholder
        (deterministic, so a rerun finds the same document)."""
        return secret_service.screen_path(path)[0]

    def _screened_names(self, files: Iterable[SourceFile | Skipped]
                        ) -> Iterator[SourceFile | Skipped]:
        """The files with their paths screened before anything — a document's path, title,
        headings, a citation, a warning, a log line — is derived from them (a folder or an
        archive member named after a token). Under policy ``refuse`` a file whose path held a
        secret is not read at all; two files whose paths redact alike, the second is not."""
        taken: set[str] = set()
        for item in files:
            path, found = secret_service.screen_path(item.path)
            if isinstance(item, Skipped):
                yield Skipped(path, secret_service.screen_name(item.reason))
                continue
            if found and secret_service.policy() == secret_service.REFUSE:
                with transaction.atomic():
                    self._record(found, path)
                yield Skipped(path, f"not stored: {describe(found)}")
                continue
            if found and path in taken:
                yield Skipped(path, "another file's path reads the same once the secret in "
                                    "it is redacted")
                continue
            taken.add(path)
            if found:
                self._name_findings[path] = found
                item = replace(item, path=path)
            # An uploaded file's or archive's own name (``upload:<name>``), stored as the
            # document's origin.
            if item.origin and self._path(item.origin) != item.origin:
                item = replace(item, origin=self._path(item.origin))
            yield item

    def _provenance(self):
        return (fragment_service.versions_record(commit=self.target.commit)
                if self.target.commit else contextlib.nullcontext())

    def _documents(self):
        return SourceDocument.objects.filter(org=self.target.org,
                                             repository=self.target.repository)

    def _own_documents(self, origin: str):
        """The documents ``origin`` brought: the only ones its run may remove. None for ""
        (a run with no origin, or a document no migration could attribute: never pruned)."""
        documents = self._documents()
        return documents.filter(origin=origin) if origin else documents.none()

    def _origin_of(self, source: SourceFile) -> str:
        return source.origin or self.target.origin

    def _waited(self, seconds: float) -> None:
        self.stats.warnings.append({"path": "", "reason": (
            f"waited {seconds:.1f} s for another ingestion into the same "
            f"{'repository' if self.target.repository else 'organization'} to finish")})

    def _load_dedup_index(self) -> None:
        self.bands, self.by_hash = BandIndex(), {}
        for pk, value, text_hash in Fragment.objects.filter(
                scope=self.target.scope, status=FragmentStatus.ACTIVE).values_list(
                "pk", "simhash", "content_hash"):
            if value is not None:
                self.bands.add(pk, to_unsigned64(value))
            self.by_hash.setdefault(text_hash, pk)

    def _run(self, files: Iterable[SourceFile | Skipped]) -> Stats:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="encode") as encoder:
            pending: tuple[list[FilePlan], Future] | None = None
            for group in self._groups(files):
                plans = [self._plan_file(planned) for planned in group]
                if self.reuse_vectors:
                    self._reuse_vectors(plans)
                encoding = encoder.submit(self._encode, plans)
                if pending is not None:
                    self._write_group(*pending)
                pending = (plans, encoding)
            if pending is not None:
                self._write_group(*pending)
        if self.prune_missing:
            self._prune()
        self._assign_owners()
        self._write_links()
        # This node's index caught up (a no-op on a worker node), so the job ends searchable here;
        # every other node follows the feed.
        if self.stats.touched:
            follower.catch_up(self.target.org.pk)
        return self.stats

    def _groups(self, files: Iterable[SourceFile | Skipped]) -> Iterator[list[Planned]]:
        group: list[Planned] = []
        size = 0
        for item in files:
            if isinstance(item, Skipped):
                self.stats.skipped.append({"path": item.path, "reason": item.reason})
                continue
            self._seen.setdefault(self._origin_of(item), set()).add(item.path)
            if item.kind:
                self._policy_kinds[item.path] = item.kind
            planned = self._parse(item)
            if planned is None:
                continue
            group.append(planned)
            size += len(planned.chunks)
            if size >= self._group_limit():
                yield group
                group, size = [], 0
        if group:
            yield group

    def _group_limit(self) -> int:
        """How many chunks the group being gathered holds (FIRST_GROUP_CHUNKS, GROUP_SECONDS)."""
        seconds, texts = self.stats.encode_seconds, self.stats.encoded_texts
        if seconds <= 0 or texts <= 0:
            return min(self.batch_chunks, FIRST_GROUP_CHUNKS)
        per_group = int(texts / seconds * GROUP_SECONDS)
        return min(self.batch_chunks, max(MIN_GROUP_CHUNKS, per_group))

    def _parse(self, source: SourceFile) -> Planned | None:
        """Normalize and chunk one file; None when it failed or its content is unchanged."""
        try:
            # Secrets out first, on the file's own lines, so that no chunk, title, link or
            # vector ever holds one (contexts/services/secrets.py, ADR 0016).
            text, found = secret_service.screen_file(source.path, source.raw)
            found = [*self._name_findings.get(source.path, ()), *found]
            doc = normalize(source.path, text)
            document = self._document(source.path)
            if document is not None and document.content_hash == document_hash(doc,
                                                                               source.kind):
                known = list(document.pointers.values_list("fragment_id", flat=True))
                if known:  # identical content: nothing to chunk, embed or write
                    self._claim(document, self._origin_of(source))
                    self.stats.unchanged += len(known)
                    self.stats.touched.update(known)
                    self.stats.files_done += 1
                    self.on_progress(self.stats)
                    return None
            if not doc.text.strip():
                chunks = []
            elif self.whole_documents:
                chunks = [whole_document_chunk(doc)]
            else:
                chunks = chunk(doc)
        except Exception as exc:  # noqa: BLE001 - one bad file never fails the job
            if db_retry.is_transient(exc):
                raise  # the database, not the file: the job waits for it and resumes
            logger.exception("could not chunk %s", source.path)
            self._fail(source.path, f"{type(exc).__name__}: {exc}")
            return None
        if found and secret_service.policy() == secret_service.REFUSE:
            # Policy refuse: a chunk that held a secret is not stored at all (an earlier
            # version of it is retired like any chunk its file no longer yields).
            chunks = [c for c in chunks if PLACEHOLDER_MARK not in c.text]
        return Planned(source, doc, chunks, document, secrets=found)

    def _claim(self, document: SourceDocument, origin: str) -> None:
        """The latest source to bring a path owns its document, unchanged content or not:
        the source it took the path from no longer removes it."""
        if origin and document.origin != origin:
            SourceDocument.objects.filter(pk=document.pk).update(origin=origin)

    def _document(self, path: str) -> SourceDocument | None:
        return self._documents().filter(path=path).first()

    def _fail(self, path: str, reason: str) -> None:
        self.stats.errors.append({"path": path, "reason": reason[:500]})
        self.stats.files_done += 1
        self.on_progress(self.stats)

    # -- planning ------------------------------------------------------------------------------
    def _plan_file(self, planned: Planned) -> FilePlan:
        pointers = ({} if planned.document is None else
                    {p.anchor: p for p in planned.document.pointers.all()})
        shared = set()
        if pointers:
            counts = (SourcePointer.objects.filter(fragment_id__in=[p.fragment_id for p in
                                                                    pointers.values()])
                      .values_list("fragment_id").annotate(n=Count("id")))
            shared = {fragment_id for fragment_id, n in counts if n > 1}
        plans = []
        for chunk_ in planned.chunks:
            text_hash = fragment_service.content_hash(chunk_.text)
            plan = ChunkPlan(chunk_, text_hash, simhash(dedup_text(chunk_)), "create")
            pointer = pointers.pop(chunk_.anchor, None)
            if pointer is not None and pointer.content_hash == text_hash:
                plan.action, plan.fragment_id = "unchanged", pointer.fragment_id
                plan.pointer = pointer
            elif pointer is not None and pointer.fragment_id not in shared:
                plan.action, plan.pointer = "update", pointer
                plan.fragment_id = pointer.fragment_id
            else:
                plan.pointer = pointer  # a collapsed source that changed: detach, re-place
                canonical = self._duplicate_of(plan)
                if canonical is not None:
                    plan.action = "duplicate"
                    if isinstance(canonical, uuid.UUID):
                        plan.uid = canonical
                    else:
                        plan.fragment_id = canonical
                else:
                    plan.uid = fragment_uid(self.target.scope, planned.doc.path, chunk_.anchor)
                    self.by_hash.setdefault(text_hash, plan.uid)
                    self.bands.add(plan.uid, plan.fingerprint)
            plans.append(plan)
        return FilePlan(planned, plans, list(pointers.values()))

    def _duplicate_of(self, plan: ChunkPlan) -> int | uuid.UUID | None:
        if plan.text_hash in self.by_hash:
            return self.by_hash[plan.text_hash]
        near = self.bands.near(plan.fingerprint, NEAR_DUPLICATE_DISTANCE)
        return near[0][0] if near else None

    def _passages(self, plan: ChunkPlan) -> list[str]:
        if plan.passages is None:
            embedder = indexing.embedder_for(self._generations[plan.chunk.namespace])
            plan.passages = embedder.passages(chunk_embedding_text(plan.chunk))
        return plan.passages

    def _reuse_vectors(self, plans: list[FilePlan]) -> None:
        """Take vectors this model already computed for the same texts (any organization)."""
        for namespace, generation in self._generations.items():
            wanted = [c for p in plans for c in p.chunks
                      if c.action in ("create", "update") and c.chunk.namespace == namespace]
            if not wanted:
                continue
            for plan in wanted:
                self._passages(plan)
            known = indexing.cached_vectors(
                generation, [key for plan in wanted for key in plan.passage_keys()])
            for plan in wanted:
                keys = plan.passage_keys()
                if all(key in known for key in keys):
                    plan.vectors = np.stack([np.asarray(known[key], dtype=np.float32)
                                             for key in keys])

    def _encode(self, plans: list[FilePlan]) -> None:
        """Vectors for every new or changed chunk (runs in the encoder thread: model only)."""
        for namespace in indexing.NAMESPACES:
            todo = [c for p in plans for c in p.chunks if c.vectors is None
                    and c.action in ("create", "update") and c.chunk.namespace == namespace]
            if not todo:
                continue
            started = time.perf_counter()
            embedder = indexing.embedder_for(self._generations[namespace])
            texts = [text for plan in todo for text in self._passages(plan)]
            counts = [len(plan.passages or ()) for plan in todo]
            for plan, rows in zip(todo, indexing.split_rows(embedder.encode(texts), counts),
                                  strict=True):
                plan.vectors = rows
            self.stats.encode_seconds += time.perf_counter() - started
            self.stats.encoded_texts += len(texts)

    # -- writing -------------------------------------------------------------------------------
    def _write_group(self, plans: list[FilePlan], encoding: Future) -> None:
        """Write these files, their versions, pointers and vectors in one transaction."""
        try:
            encoding.result()
            with transaction.atomic(), fragment_service.indexing_handled_by_caller():
                written: list[tuple[Fragment, ChunkPlan]] = []
                for plan in plans:
                    written.extend(self._write_file(plan))
                for namespace, generation in self._generations.items():
                    pairs = [(f, c) for f, c in written if f.namespace == namespace]
                    if pairs:
                        vectors = [c.vectors for _, c in pairs]
                        indexing.write_embeddings(generation, [f for f, _ in pairs], vectors)
                        indexing.cache_vectors(
                            generation, [key for _, c in pairs for key in c.passage_keys()],
                            np.concatenate(vectors))
        except Exception as exc:  # noqa: BLE001 - retry one file at a time to isolate it
            if db_retry.is_transient(exc):
                # The database went away, not a bad file: none of these files is written
                # (the transaction rolled back), and no file is to blame for it.
                raise
            if len(plans) == 1:
                path = plans[0].planned.source.path
                logger.exception("could not ingest %s", path)
                self._fail(path, f"{type(exc).__name__}: {exc}")
                return
            for plan in plans:
                self._write_group([plan], _done())
            return
        for plan in plans:
            self._count(plan)
        self.stats.files_done += len(plans)
        self.on_progress(self.stats)

    def _record(self, findings: list[Finding], path: str,
                document: SourceDocument | None = None) -> None:
        """A file's findings by file and line, never the values: rows and audit events in
        the caller's transaction, the owner's nudge once it commits."""
        job = self.target.job
        secret_service.record(
            SYSTEM, findings, org=self.target.org, path=path, job=job, document=document,
            origin=(SecretOrigin.UPLOAD if job is not None and job.source_kind == "upload"
                    else SecretOrigin.INGESTION),
            action=(SecretAction.REFUSED if secret_service.policy() == secret_service.REFUSE
                    else SecretAction.REDACTED))

    def _count(self, plan: FilePlan) -> None:
        verb = ("not stored" if secret_service.policy() == secret_service.REFUSE
                else "redacted")
        for finding in plan.planned.secrets:
            self.stats.warnings.append({"path": plan.planned.doc.path, "reason": (
                f"secret {verb}: {finding} (Governance → Secrets)")})
        for chunk_plan in plan.chunks:
            self.stats.chunk_tokens.append(chunk_plan.chunk.token_count)
            # A person's edit met the chunk's change: merged, or in conflict (ADR 0020).
            if chunk_plan.outcome == upstream.MERGED:
                self.stats.merged.append(chunk_plan.written_id)
            elif chunk_plan.outcome == upstream.CONFLICT:
                self.stats.conflicted.append(chunk_plan.written_id)
            elif chunk_plan.action == "create":
                self.stats.created += 1
                if chunk_plan.written_id is not None:
                    self.stats.created_ids.append(chunk_plan.written_id)
            elif chunk_plan.action == "update":
                self.stats.updated += 1
                if chunk_plan.written_id is not None:
                    self.stats.updated_ids.append(chunk_plan.written_id)
            elif chunk_plan.action == "duplicate":
                self.stats.duplicates += 1
            else:
                self.stats.unchanged += 1

    def _write_file(self, plan: FilePlan) -> list[tuple[Fragment, ChunkPlan]]:
        doc = plan.planned.doc
        document = self._save_document(plan.planned)
        if plan.planned.secrets:
            self._record(plan.planned.secrets, doc.path, document)
        written = []
        for chunk_plan in plan.chunks:
            fragment = self._apply(document, doc, chunk_plan)
            if fragment is not None and chunk_plan.action in ("create", "update"):
                written.append((fragment, chunk_plan))
                chunk_plan.written_id = fragment.pk  # counted once the group commits
        for pointer in plan.dropped:
            self._drop_pointer(pointer)
        self._apply_front_matter(document, doc)
        self._announce([document.path])
        return written

    def _announce(self, paths: list[str]) -> None:
        """Once this write commits, the fragments resting on these documents (what a person's
        text cites, ``contexts.governance.evidence``) are re-checked against them."""
        evidence_service.announce_documents(
            self.target.org.pk, self.target.repository.pk if self.target.repository else None,
            paths)

    def _apply_front_matter(self, document: SourceDocument, doc: NormalizedDocument) -> None:
        """Front matter describes every fragment of its document, changed text or not.

        Through the fragment service like any metadata change (a version, an audit event and
        the change signal per fragment that changes). One read finds the fragments that
        differ; the writes are batched per kind of change, and a document whose fragments
        already agree costs that one read only.
        """
        policy_kind = self._policy_kinds.get(doc.path)
        if not doc.front_matter and not policy_kind:
            return
        # (The owner is not decided here: ``_assign_owners`` resolves it for every document
        # of the run, CODEOWNERS first, front matter next.)
        rows = (Fragment.objects.filter(sources__document=document, scope=self.target.scope)
                .values_list("pk", "namespace", "kind").distinct())
        batches: dict[tuple, list[Fragment]] = {}
        for pk, namespace, kind in rows:
            changes: dict = {}
            wanted = self._kind_for(doc, namespace, policy_kind)
            if kind != wanted:  # a kind from the front matter decides the negative flag too
                changes.update(kind=wanted, negative=wanted == FragmentKind.NEGATIVE)
            if changes:
                batches.setdefault(tuple(sorted(changes.items(), key=lambda kv: kv[0])),
                                   []).append(Fragment(pk=pk))
        for changes, fragments in batches.items():
            fragment_service.update_metadata(
                SYSTEM, fragments, reason=(f"front matter of {doc.path}" if doc.front_matter
                                           else f"kind policy for {doc.path}"), **dict(changes))

    def _save_document(self, planned: Planned) -> SourceDocument:
        source, doc, document = planned.source, planned.doc, planned.document
        fields = {"language": doc.language, "author": source.author, "links": list(doc.links),
                  "front_links": list(doc.front_matter.get("links") or []),
                  "authored_at": source.authored_at,
                  "content_hash": document_hash(doc, source.kind),
                  "size_bytes": len(source.raw), "changed_at": timezone.now(),
                  "source_commit": self.target.commit,
                  "declared_owner": _declared_owner(doc)}
        origin = self._origin_of(source)
        if origin:  # the latest writer takes the path (``_claim``); "" keeps the old owner
            fields["origin"] = origin
        if document is None:
            resolved = self._owner_of(doc)
            return SourceDocument.objects.create(org=self.target.org,
                                                 repository=self.target.repository,
                                                 path=source.path, owner=resolved.user,
                                                 owner_source=resolved.source, **fields)
        SourceDocument.objects.filter(pk=document.pk).update(**fields)
        return document

    def _apply(self, document: SourceDocument, doc: NormalizedDocument,
               plan: ChunkPlan) -> Fragment | None:
        chunk_ = plan.chunk
        pointer_fields = {"start_line": chunk_.start_line, "end_line": chunk_.end_line,
                          "content_hash": plan.text_hash}
        chunk_fields = {"simhash": to_signed64(plan.fingerprint),
                        "token_count": chunk_.token_count,
                        "chunker_version": chunk_.chunker_version}
        if plan.action == "unchanged":
            pointer = plan.pointer
            if (pointer.start_line, pointer.end_line) != (chunk_.start_line, chunk_.end_line):
                SourcePointer.objects.filter(pk=pointer.pk).update(
                    start_line=chunk_.start_line, end_line=chunk_.end_line)
            self.stats.touched.add(plan.fragment_id)
            return None
        if plan.action == "update":
            locked = upstream.lock(plan.fragment_id)
            followed = self._follow(locked, upstream.base_of(plan.pointer, locked),
                                    plan.pointer.base_commit, doc, plan)
            SourcePointer.objects.filter(pk=plan.pointer.pk).update(
                **pointer_fields, base_text=followed.base, base_commit=followed.base_commit)
            return self._followed(plan, followed)
        if plan.pointer is not None:
            plan.pointer.delete()
        # The chunk text a fragment is written from is its base: a person's later edit is
        # measured against it, and merged with the file's next change (ADR 0020).
        pointer_fields.update(base_text=chunk_.text, base_commit=self.target.commit or "")
        if plan.action == "duplicate":
            target = plan.fragment_id or Fragment.objects.get(uid=plan.uid).pk
            SourcePointer.objects.create(document=document, anchor=chunk_.anchor,
                                         fragment_id=target, **pointer_fields)
            self.stats.touched.add(target)
            return None
        existing = Fragment.objects.filter(uid=plan.uid).first()
        if existing is not None and existing.sources.exclude(document=document).exists():
            # The id belongs to a fragment other sources share now: never rewrite their text.
            plan.uid = uuid.uuid5(UID_NAMESPACE, f"{plan.uid}|{plan.text_hash}")
            existing = Fragment.objects.filter(uid=plan.uid).first()
        if existing is not None:  # its first source moved on; keep the id, take the new text
            # (Or its text came back: a person's edit of it meets the text as any change does,
            # from the last text the source gave it.)
            locked = upstream.lock(existing.pk)
            followed = self._follow(locked, upstream.base_of(None, locked), "", doc, plan)
            fragment = followed.fragment
            pointer_fields.update(base_text=followed.base, base_commit=followed.base_commit)
            if fragment.status == FragmentStatus.RETIRED:
                # Retired when its file went away (or its chunk did), and now back at the same
                # path and anchor: active again, as a fresh ingest's would be. A superseded one
                # stays superseded — a person replaced it.
                fragment = fragment_service.restore_fragment(
                    SYSTEM, fragment, reason=f"back in {doc.path}{self._at()}")
            if followed.state != upstream.IN_SYNC:
                SourcePointer.objects.create(document=document, anchor=chunk_.anchor,
                                             fragment=fragment, **pointer_fields)
                return self._followed(plan, followed)
        else:
            fragment = fragment_service.create_fragment(
                SYSTEM, self.target.scope, uid=plan.uid, body=chunk_.text, title=chunk_.title,
                kind=self._kind(doc, chunk_), namespace=chunk_.namespace,
                owner=self._owner(doc), heading_path=list(chunk_.heading_path),
                language=chunk_.language, symbol=chunk_.symbol or "",
                contexts=[self.target.context] if self.target.context else [],
                reason=f"ingested from {doc.path}{self._at()}",
                natural_language=doc.natural_language or "",
                source_state=upstream.IN_SYNC,
                valid_from=document.authored_at or timezone.now(), **chunk_fields)
        SourcePointer.objects.create(document=document, anchor=chunk_.anchor,
                                     fragment=fragment, **pointer_fields)
        self.stats.touched.add(fragment.pk)
        return fragment

    def _follow(self, locked: Fragment, base: str, base_commit: str, doc: NormalizedDocument,
                plan: ChunkPlan) -> upstream.Followed:
        """The chunk's new text meets its fragment: taken as it is, merged with a person's
        edit, or — where they overlap — a conflict for the owner (ingestion/upstream.py)."""
        chunk_ = plan.chunk
        return upstream.follow(
            locked, base=base, base_commit=base_commit, theirs=chunk_.text, title=chunk_.title,
            where=upstream.Upstream(doc.path, self.target.commit, chunk_.start_line,
                                    chunk_.end_line),
            metadata={"heading_path": list(chunk_.heading_path), "symbol": chunk_.symbol or "",
                      "simhash": to_signed64(plan.fingerprint),
                      "token_count": chunk_.token_count,
                      "chunker_version": chunk_.chunker_version})

    def _followed(self, plan: ChunkPlan, followed: upstream.Followed) -> Fragment | None:
        """The fragment to embed with the chunk's vectors, or None: a merged text is not the
        chunk's (embedded here, from its own text), a conflict's is the person's, unchanged."""
        fragment = followed.fragment
        self.stats.touched.add(fragment.pk)
        plan.outcome = followed.state
        if followed.state == upstream.IN_SYNC:
            return fragment
        plan.written_id = fragment.pk
        if followed.text_changed:
            indexing.embed_fragments([fragment])
        return None

    def _at(self) -> str:
        """`` at <commit>`` in a version's reason, when a git source's sync writes it."""
        return f" at {self.target.commit[:12]}" if self.target.commit else ""

    def _drop_pointer(self, pointer: SourcePointer) -> None:
        fragment = pointer.fragment
        path = pointer.document.path
        base = upstream.base_of(pointer, fragment)
        pointer.delete()
        if not fragment.sources.exists() and fragment.status == FragmentStatus.ACTIVE:
            if upstream.edited_by_person(fragment, base):
                # A person's words are never retired behind their back: kept, and asked.
                upstream.gone(fragment, base=base,
                              where=upstream.Upstream(path, self.target.commit))
                self.stats.gone.append(fragment.pk)
                self.stats.touched.add(fragment.pk)
                return
            fragment_service.retire_fragment(
                SYSTEM, fragment, reason=f"removed from its source {path}{self._at()}")
            self.stats.retired += 1
            self.stats.retired_ids.append(fragment.pk)
            self.stats.touched.add(fragment.pk)

    def _kind(self, doc: NormalizedDocument, chunk_: Chunk) -> str:
        return self._kind_for(doc, chunk_.namespace, self._policy_kinds.get(doc.path))

    @staticmethod
    def _kind_for(doc: NormalizedDocument, namespace: str, policy_kind: str | None = None) -> str:
        """Front matter (the author's word on this document) over the source's policy
        (``.contexts.toml`` and its defaults, contexts/ingestion/policy.py) over the
        namespace's kind."""
        if doc.kind in FRONT_MATTER_KINDS:
            return doc.kind
        if policy_kind:
            return policy_kind
        return FragmentKind.CODE if namespace == "code" else FragmentKind.PROSE

    def _owner_of(self, doc: NormalizedDocument) -> Resolved:
        """Who the repository says owns ``doc`` (contexts/ingestion/owners.py: CODEOWNERS,
        front matter, git history, the scope's tech lead)."""
        return self.owners.resolve(doc.path, _declared_owner(doc))

    def _owner(self, doc: NormalizedDocument):
        return self._owner_of(doc).user

    def _assign_owners(self) -> None:
        """Every document of this run's sources takes the owner the repository names now, and
        its fragments follow — except a fragment whose owner a person chose in the console
        (``owner_set_by_person``): that choice stands until they clear it. Unchanged files
        too, so a changed CODEOWNERS re-assigns. One version and audit event per fragment
        whose owner changes (through the fragment service), nothing for the rest."""
        origins = {self.target.origin, *self._seen} - {""}
        seen = {path for paths in self._seen.values() for path in paths}
        documents = self._documents().filter(path__in=sorted(seen))
        for origin in sorted(origins):
            documents = documents | self._own_documents(origin)
        rows = documents.values_list("pk", "path", "declared_owner", "owner_id", "owner_source")
        wanted: dict[int, tuple[Resolved, str]] = {}
        for pk, path, declared, owner_id, source in rows:
            resolved = self.owners.resolve(path, declared)
            if resolved.user is None:
                continue  # nobody may own it here (an organization without members)
            wanted[pk] = (resolved, path)
            if (owner_id, source) != (resolved.user.pk, resolved.source):
                SourceDocument.objects.filter(pk=pk).update(owner=resolved.user,
                                                            owner_source=resolved.source)
        differing = (SourcePointer.objects
                     .filter(document_id__in=list(wanted), fragment__scope=self.target.scope,
                             fragment__status=FragmentStatus.ACTIVE,
                             fragment__owner_set_by_person=False)
                     .values_list("document_id", "fragment_id", "fragment__owner_id"))
        changes: dict[int, list[int]] = {}  # document → its fragments to re-own
        for document_id, fragment_id, owner_id in differing:
            if owner_id != wanted[document_id][0].user.pk:
                changes.setdefault(document_id, []).append(fragment_id)
        if changes:
            # An owner is no part of what is embedded: the feed and signal, no re-indexing.
            with transaction.atomic(), fragment_service.indexing_handled_by_caller():
                for document_id, fragment_ids in changes.items():
                    resolved, path = wanted[document_id]
                    fragment_service.update_metadata(
                        SYSTEM, [Fragment(pk=pk) for pk in fragment_ids], owner=resolved.user,
                        reason=f"owner from the repository: {resolved.why} for {path}")
                    self.stats.touched.update(fragment_ids)
        for warning in self.owners.warnings:
            if warning not in self.stats.warnings:
                self.stats.warnings.append(warning)

    # -- removals and citation links ------------------------------------------------------------
    def _prune(self) -> None:
        """Documents the walk no longer yields, of the origins it read (the run's own, and each
        that a file of it named: an archive uploaded again): their fragments are retired.
        Another source's documents in the same scope are never this walk's to prune."""
        origins = {self.target.origin, *self._seen} - {""}
        for origin in sorted(origins):
            self._remove(self._own_documents(origin)
                         .exclude(path__in=self._seen.get(origin, set())))

    def _remove(self, documents) -> None:
        """These documents are gone: their fragments retired (unless another source still
        holds them), the rows deleted — one transaction per document."""
        for document in documents:
            with transaction.atomic(), fragment_service.indexing_handled_by_caller():
                for pointer in document.pointers.select_related("fragment"):
                    self._drop_pointer(pointer)
                document.delete()
                self._announce([document.path])

    def _move(self, moved: dict[str, str]) -> None:
        """Each document at an old path takes its new one, fragments and history kept (a
        SourcePointer is (document, anchor)); its content hash is cleared so the file is read
        again under the new path — a code chunk's header names the path, and the language and
        the policy's kind follow it. Where a document already holds the new path, the old one
        is removed instead. (A rename goes from a path the old tree had to one it had not, so
        no move waits for another.) A move an earlier, interrupted run made is recognised by
        the document at the new path having been read at this run's commit."""
        documents = self._own_documents(self.target.origin)  # another source's stay put
        own = set(documents.filter(path__in=list(moved)).values_list("path", flat=True))
        rows = dict(self._documents().filter(path__in=list(moved.values()))
                    .values_list("path", "source_commit"))
        for old, new in sorted(moved.items()):
            if old not in own or (self.target.commit and rows.get(new) == self.target.commit):
                continue  # no document of ours to move, or moved already
            if new in rows:  # the new path has a document (maybe another source's): read there
                self._remove(documents.filter(path=old))
            else:
                documents.filter(path=old).update(path=new, content_hash="",
                                                  source_commit=self.target.commit)
                self._announce([old])  # what cites the old path finds nothing there now

    def _write_links(self) -> None:
        """Citation edges from every document's recorded links — derived from the database,
        so a rerun after a crash rebuilds them too."""
        documents = SourceDocument.objects.filter(
            org=self.target.org, repository=self.target.repository).exclude(links=[])
        first_fragment = {}
        for path, fragment_id in (SourcePointer.objects.filter(
                document__org=self.target.org, document__repository=self.target.repository,
                fragment__status=FragmentStatus.ACTIVE)
                .order_by("document__path", "-start_line")
                .values_list("document__path", "fragment_id")):
            first_fragment[path] = fragment_id  # ordered so the first line wins
        for document in documents:
            fragments = list(Fragment.objects.filter(sources__document=document,
                                                     status=FragmentStatus.ACTIVE)
                             .order_by("sources__start_line").distinct())
            front = set(document.front_links)
            for target in document.links:
                target_id = first_fragment.get(resolve_link(document.path, target) or "")
                if target_id is None:
                    continue
                kind = LinkKind.FRONT_MATTER if target in front else LinkKind.MARKDOWN
                holders = [f for f in fragments if target in f.body] or fragments[:1]
                for fragment in holders:
                    if fragment.pk != target_id:
                        Link.objects.get_or_create(source=fragment, target_id=target_id,
                                                   kind=kind)


def _declared_owner(doc: NormalizedDocument) -> str:
    """The front matter's ``owner:`` (a username), as the document states it."""
    return str(doc.front_matter.get("owner") or "").strip()[:150]


def whole_document_chunk(doc: NormalizedDocument) -> Chunk:
    title = doc.title or PurePosixPath(doc.path).stem
    code = doc.language in CODE_LANGUAGES
    return Chunk(anchor="document", title=title, heading_path=() if code else (title,),
                 symbol=None, text=doc.text, start_line=1,
                 end_line=doc.text.count("\n") + 1, token_count=count_tokens(doc.text),
                 language=doc.language, namespace="code" if code else "prose",
                 chunker_version=f"{CHUNKER_VERSION}+whole-document")


def chunk_embedding_text(chunk_: Chunk) -> str:
    return indexing.embedding_text_for(chunk_.title, chunk_.heading_path, chunk_.text,
                                       namespace=chunk_.namespace, symbol=chunk_.symbol or "")


def _done() -> Future:
    future: Future = Future()
    future.set_result(None)
    return future


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
