"""The evaluation harness: a dataset goes through the REAL ingestion lane into a throwaway
organization, every query of a split through the REAL :func:`retrieve`, and the returned
order is scored (``metrics.py``). The organization and its lexical index are removed
afterwards, whatever happens.

Nothing here ranks, fuses or filters by itself — a number this harness reports is a number the
product would produce for the same content and configuration. In a fresh organization the
compose stage's freshness and authority are the same for every fragment, so the returned order
is the relevance order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection

from accounts.models import Organization, Repository
from contexts.evaluation import metrics
from contexts.evaluation.dataset import Dataset, Document, is_code_corpus
from contexts.evaluation.labels import Label, Pointer, SourceTree
from contexts.indexes import indexing
from contexts.ingestion.chunk import CHUNKER_VERSION
from contexts.ingestion.pipeline import Ingestor, Stats, Target
from contexts.ingestion.policy import Policy
from contexts.ingestion.sources import SKIP_DIRS, Skipped, SourceFile, walk
from contexts.models import SourcePointer
from contexts.retrieval import adaptive
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.rerank import get_reranker
from contexts.retrieval.types import ComposedFragment, RetrievalRequest

logger = logging.getLogger(__name__)

# Deep enough that Recall@100 is measurable; a budget no realistic top-100 reaches, so the
# token budget never cuts a ranking short.
DEPTH = 100
BUDGET_TOKENS = 50_000_000
UNSCOPED = "(organization)"
UNTYPED = "(untyped)"  # a query without metadata.type in a set where others have one


@dataclass(frozen=True)
class PipelineSpec:
    legs: tuple[str, ...]
    reranker: str  # "none" | "cross-encoder": explicit, so the configured default never leaks in


PIPELINES: dict[str, PipelineSpec] = {
    "bm25": PipelineSpec(("lexical",), "none"),
    "dense": PipelineSpec(("dense",), "none"),
    "hybrid": PipelineSpec(("lexical", "dense"), "none"),
    "hybrid+rerank": PipelineSpec(("lexical", "dense"), "cross-encoder"),
}


@dataclass
class EvalOptions:
    split: str = "test"
    pipelines: tuple[str, ...] = tuple(PIPELINES)
    ignore_identical_ids: bool = False
    limit: int | None = None
    chunk: bool = False


@dataclass
class PipelineResult:
    metrics: dict[str, float]
    per_scope: dict[str, dict[str, float]]
    per_query: dict[str, dict]
    # metadata.type → the same metrics over that type's queries (+ "queries"); empty when the
    # set has no types.
    by_type: dict[str, dict[str, float]] = field(default_factory=dict)

    def summary(self) -> dict:
        """The metrics as the JSON report and the stored run carry them: ``by_type`` inside."""
        return {**self.metrics, "by_type": self.by_type} if self.by_type else dict(self.metrics)


@dataclass
class EvalReport:
    dataset: str
    split: str
    queries: int
    documents: int
    fragments: int
    duplicates: int
    ingest_seconds: float
    config: dict
    config_hash: str
    pipelines: dict[str, PipelineResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    corpus_kind: str = "prose"
    cleanup_error: str | None = None

    def as_json(self) -> dict:
        out: dict = {
            "dataset": self.dataset, "split": self.split,
            "pipelines": {name: result.summary() for name, result in self.pipelines.items()},
            "queries": self.queries, "documents": self.documents, "fragments": self.fragments,
            "config_hash": self.config_hash, "skipped": self.skipped,
            "warnings": self.warnings,
        }
        if any(result.per_scope for result in self.pipelines.values()):
            out["per_scope"] = {name: result.per_scope for name, result in self.pipelines.items()}
        out["per_query"] = {name: result.per_query for name, result in self.pipelines.items()}
        return out


# --- configuration identity ----------------------------------------------------------------------
def pipeline_config(pipelines: tuple[str, ...], *, whole_documents: bool) -> dict:
    """Everything that decides what the pipelines return for the same content."""
    generations = {ns: indexing.active_generation(ns) for ns in indexing.NAMESPACES}
    return {
        "retrieval": settings.RETRIEVAL,
        # The adaptive-fusion model decides the legs' weights: a re-fit is another config.
        "fusion_model": (adaptive.load().version
                         if settings.RETRIEVAL.get("fusion") == "adaptive" else None),
        "default_weights": settings.DEFAULT_WEIGHTS,
        "embedding_models": {ns: f"{g.model_name}@{g.model_version}"
                             for ns, g in sorted(generations.items())},
        "chunker": CHUNKER_VERSION + ("+whole-document" if whole_documents else ""),
        "pipelines": {name: {"legs": list(PIPELINES[name].legs),
                             "reranker": PIPELINES[name].reranker} for name in pipelines},
        "request": {"k_lexical": DEPTH, "k_dense": DEPTH, "rerank_top": DEPTH,
                    "max_fragments": DEPTH},
    }


def config_hash(config: dict) -> str:
    canonical = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- the throwaway organization -----------------------------------------------------------------
def create_org(dataset_name: str) -> Organization:
    slug = f"eval-{secrets.token_hex(4)}"
    return Organization.objects.create(slug=slug, name=f"eval {dataset_name}"[:200])


def drop_org(org_id: int) -> None:
    """Delete the organization (cascading to everything ingested) and its lexical index."""
    try:
        try:
            for org in Organization.objects.filter(pk=org_id):
                org.delete()
        except Exception:
            # An interrupt mid-query can leave the connection unusable: retry once on a fresh
            # one — unless a caller's transaction holds this connection.
            if connection.in_atomic_block:
                raise
            connection.close()
            for org in Organization.objects.filter(pk=org_id):
                org.delete()
    finally:
        shutil.rmtree(indexing.index_path(org_id), ignore_errors=True)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI timeout, ``kill``) unwinds like Ctrl-C, so cleanup still runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def repository_slug(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:56] or "scope"
    if not base[0].isalnum():
        base = "s" + base
    slug, n = base, 1
    while slug in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug)
    return slug


# --- the harness --------------------------------------------------------------------------------
class Harness:
    def __init__(self, dataset: Dataset, options: EvalOptions,
                 log: Callable[[str], None] = print) -> None:
        unknown = [name for name in options.pipelines if name not in PIPELINES]
        if unknown:
            raise ValueError(f"unknown pipeline(s) {', '.join(unknown)}; "
                             f"choose from {', '.join(PIPELINES)}")
        if dataset.manifest is not None and dataset.scoped:
            raise ValueError("scopes.tsv is only supported with a corpus.jsonl dataset")
        self.dataset = dataset
        self.options = options
        self.log = log
        self.whole_documents = dataset.manifest is None and not options.chunk
        self.path_to_doc: dict[str, str] = {}
        self.tree: SourceTree | None = None
        self.scope_ids: dict[str, frozenset[int]] = {}
        self.stats: list[Stats] = []
        self.documents = 0
        self.corpus_kind = "source tree" if dataset.manifest is not None else "prose"
        self.cleanup_error: str | None = None

    # -- driving -------------------------------------------------------------------------------
    def run(self) -> EvalReport:
        queries = self._queries()
        config = pipeline_config(self.options.pipelines, whole_documents=self.whole_documents)
        org = create_org(self.dataset.name)
        self.log(f"throwaway organization {org.slug}")
        try:
            with sigterm_as_interrupt():
                started = time.perf_counter()
                self._ingest(org)
                ingest_seconds = time.perf_counter() - started
                report = EvalReport(
                    dataset=self.dataset.name, split=self.options.split, queries=len(queries),
                    documents=self.documents,
                    fragments=sum(s.created for s in self.stats),
                    duplicates=sum(s.duplicates for s in self.stats),
                    ingest_seconds=round(ingest_seconds, 1), config=config,
                    config_hash=config_hash(config), corpus_kind=self.corpus_kind)
                report.warnings.extend(self._ingest_warnings())
                report.warnings.extend(self._label_warnings(queries))
                for name in self.options.pipelines:
                    reason = self._unavailable(name)
                    if reason:
                        report.skipped[name] = reason
                        self.log(f"{name}: skipped — {reason}")
                        continue
                    report.pipelines[name] = self._run_pipeline(org, name, queries)
        finally:
            self.log(f"removing {org.slug} …")
            try:
                drop_org(org.pk)
            except Exception as exc:  # noqa: BLE001 - never lose the numbers to the cleanup
                logger.exception("could not remove %s", org.slug)
                self.cleanup_error = (f"could not remove the throwaway organization "
                                      f"{org.slug}: {type(exc).__name__}: {exc}")
                self.log(f"error: {self.cleanup_error}")
        report.cleanup_error = self.cleanup_error
        return report

    def _queries(self) -> list[tuple[str, str]]:
        """(id, text) of the split's queries with at least one relevant judgement."""
        missing = [qid for qid in self.dataset.qrels if qid not in self.dataset.queries]
        if missing:
            self.log(f"warning: {len(missing)} qrels query ids have no text in queries.jsonl "
                     f"(e.g. {missing[0]}); skipped")
        chosen = [(qid, self.dataset.queries[qid]) for qid, judged in self.dataset.qrels.items()
                  if qid in self.dataset.queries and any(g > 0 for g in judged.values())]
        if self.options.limit is not None:
            chosen = chosen[:self.options.limit]
        if not chosen:
            raise ValueError(f"no query of split {self.options.split!r} has a relevant "
                             f"judgement")
        return chosen

    def _unavailable(self, name: str) -> str | None:
        if PIPELINES[name].reranker != "cross-encoder":
            return None
        if not settings.RETRIEVAL.get("cross_encoder"):
            return "no cross-encoder configured (set CONTEXTS_CROSS_ENCODER to a local model)"
        try:
            get_reranker("cross-encoder")
        except Exception as exc:  # noqa: BLE001 - report why, run the other pipelines
            return f"the cross-encoder did not load: {type(exc).__name__}: {exc}"
        return None

    # -- ingestion -----------------------------------------------------------------------------
    def _ingest(self, org: Organization) -> None:
        if self.dataset.manifest is not None:
            files = list(self._source_files())
            self.tree = SourceTree({f.path: f.raw for f in files if isinstance(f, SourceFile)})
            self.documents = len(self.tree.files)
            self.scope_ids[UNSCOPED] = frozenset({org.scope_id})
            self._run_ingestor(Target(org=org, scope=org.scope), files)
            self.tree.remember_pointer_anchors(self._pointers(org))
            return
        code = is_code_corpus(self.dataset)
        self.corpus_kind = "python code" if code else "prose"
        self.log(f"corpus looks like {self.corpus_kind}: documents become "
                 f"{'<id>.py (code namespace)' if code else '<id>.md'}")
        by_scope: dict[str | None, list[SourceFile]] = {}
        for doc in self.dataset.documents():
            source = self._source_file(doc, code)
            self.path_to_doc[source.path] = doc.doc_id
            by_scope.setdefault(self.dataset.doc_scopes.get(doc.doc_id), []).append(source)
        self.documents = len(self.path_to_doc)
        taken: set[str] = set()
        names = sorted({*(s for s in by_scope if s), *self.dataset.query_scopes.values()})
        repos = {name: Repository.objects.create(org=org, slug=repository_slug(name, taken),
                                                 name=name[:200]) for name in names}
        every = frozenset({org.scope_id, *(r.scope_id for r in repos.values())})
        self.scope_ids = {name: frozenset({org.scope_id, repo.scope_id})
                          for name, repo in repos.items()}
        self.scope_ids[UNSCOPED] = every
        for name, files in sorted(by_scope.items(), key=lambda item: item[0] or ""):
            target = (Target(org=org, scope=repos[name].scope, repository=repos[name]) if name
                      else Target(org=org, scope=org.scope))
            if name:
                self.log(f"scope {name}: {len(files)} documents")
            self._run_ingestor(target, files)

    @staticmethod
    def _source_file(doc: Document, code: bool) -> SourceFile:
        if code:
            # A title (rare in code corpora) survives as a comment, keeping the file Python.
            raw = f"# {doc.title}\n{doc.text}" if doc.title.strip() else doc.text
            return SourceFile(f"{doc.doc_id}.py", raw.encode())
        raw = f"# {doc.title}\n\n{doc.text}" if doc.title.strip() else doc.text
        return SourceFile(f"{doc.doc_id}.md", raw.encode())

    def _source_files(self) -> Iterator[SourceFile | Skipped]:
        """The manifest's files, each through the ingestion walker's own checks (size, binary,
        generated) — enumerated here rather than by walking the root, so no ``git log`` runs
        and only the manifest decides what is in the corpus."""
        manifest = self.dataset.manifest
        assert manifest is not None
        kinds = Policy()  # the kinds a source's default policy gives (test code is `test`)
        for directory, dirnames, filenames in os.walk(manifest.root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS
                                 and not d.startswith("."))
            for name in sorted(filenames):
                full = Path(directory) / name
                rel = full.relative_to(manifest.root).as_posix()
                if not manifest.wants(rel):
                    continue
                for item in walk(full, max_bytes=settings.INGEST_MAX_FILE_BYTES):
                    yield (SourceFile(rel, item.raw, kind=kinds.kind_for(rel))
                           if isinstance(item, SourceFile) else Skipped(rel, item.reason))

    def _run_ingestor(self, target: Target, files: list[SourceFile | Skipped]) -> None:
        total = len(files)
        started = time.perf_counter()
        last = [started]

        def progress(stats: Stats) -> None:
            now = time.perf_counter()
            if now - last[0] >= 15 or stats.files_done == total:
                last[0] = now
                rate = stats.files_done / max(now - started, 1e-6)
                self.log(f"  ingested {stats.files_done}/{total} files "
                         f"({rate:.1f}/s, {stats.encoded_texts} embedded)")

        ingestor = Ingestor(target, whole_documents=self.whole_documents,
                            batch_chunks=settings.INGEST_EMBED_BATCH_CHUNKS,
                            on_progress=progress)
        self.stats.append(ingestor.run(files))

    @staticmethod
    def _pointers(org: Organization) -> list[Pointer]:
        return [Pointer(path, anchor, start, end) for path, anchor, start, end in
                SourcePointer.objects.filter(document__org=org).values_list(
                    "document__path", "anchor", "start_line", "end_line")]

    def _ingest_warnings(self) -> list[str]:
        out = []
        errors = [e for s in self.stats for e in s.errors]
        if errors:
            out.append(f"{len(errors)} documents failed to ingest (e.g. {errors[0]['path']}: "
                       f"{errors[0]['reason']})")
        duplicates = sum(s.duplicates for s in self.stats)
        if duplicates and self.whole_documents:
            out.append(f"{duplicates} documents collapsed into near-duplicate fragments; such a "
                       f"fragment stands for all its documents, at adjacent ranks")
        for warning in out:
            self.log(f"warning: {warning}")
        return out

    def _label_warnings(self, queries: list[tuple[str, str]]) -> list[str]:
        if self.tree is None:
            return []
        stale = sorted({label for qid, _ in queries for label in self.dataset.qrels[qid]
                        if not self.tree.resolves(Label.parse(label))})
        out = [f"label {label} names nothing in the ingested tree" for label in stale]
        for warning in out:
            self.log(f"warning: {warning}")
        return out

    # -- queries -------------------------------------------------------------------------------
    def _request(self, org: Organization, spec: PipelineSpec, qid: str,
                 text: str) -> RetrievalRequest:
        scope = self.dataset.query_scopes.get(qid, UNSCOPED)
        return RetrievalRequest(
            query=text, org_id=org.pk,
            scope_ids=self.scope_ids.get(scope, self.scope_ids[UNSCOPED]),
            budget_tokens=BUDGET_TOKENS, k_lexical=DEPTH, k_dense=DEPTH, rerank_top=DEPTH,
            legs=spec.legs, reranker=spec.reranker, max_fragments=DEPTH, include_pins=False,
            count_use=False)

    def _run_pipeline(self, org: Organization, name: str,
                      queries: list[tuple[str, str]]) -> PipelineResult:
        spec = PIPELINES[name]
        # Untimed warm-up: model loads and first-query allocations are not per-query latency.
        retrieve(self._request(org, spec, *queries[0]), record_trace=False)
        per_query: dict[str, dict] = {}
        latencies: dict[str, float] = {}
        started = time.perf_counter()
        for n, (qid, text) in enumerate(queries, start=1):
            request = self._request(org, spec, qid, text)
            t0 = time.perf_counter()
            result = retrieve(request, record_trace=False)
            latencies[qid] = (time.perf_counter() - t0) * 1000
            ranked = self._ranked_ids(qid, result.fragments)
            if self.options.ignore_identical_ids:
                ranked = [doc for doc in ranked if doc != qid]
            scores = metrics.query_metrics(ranked, self.dataset.qrels[qid])
            per_query[qid] = {**{k: round(v, 4) for k, v in scores.items()},
                              "ms": round(latencies[qid], 1), "top": ranked[:10]}
            if self.dataset.query_types:
                per_query[qid]["type"] = self.dataset.query_types.get(qid, UNTYPED)
            if time.perf_counter() - started >= 30 and n % 50 == 0:
                self.log(f"  {name}: {n}/{len(queries)} queries")
        result = PipelineResult(
            metrics=metrics.aggregate(per_query, list(latencies.values())),
            per_scope=self._per_scope(per_query, latencies), per_query=per_query,
            by_type=self._by_type(per_query, latencies))
        self.log(f"{name}: done ({len(queries)} queries, nDCG@10 "
                 f"{result.metrics['ndcg@10']:.4f})")
        return result

    def _per_scope(self, per_query: dict[str, dict],
                   latencies: dict[str, float]) -> dict[str, dict[str, float]]:
        if not self.dataset.scoped:
            return {}
        groups: dict[str, list[str]] = {}
        for qid in per_query:
            groups.setdefault(self.dataset.query_scopes.get(qid, UNSCOPED), []).append(qid)
        return {scope: {**metrics.aggregate({q: per_query[q] for q in qids},
                                            [latencies[q] for q in qids]),
                        "queries": len(qids)}
                for scope, qids in sorted(groups.items())}

    def _by_type(self, per_query: dict[str, dict],
                 latencies: dict[str, float]) -> dict[str, dict[str, float]]:
        types = self.dataset.query_types
        if not types:
            return {}
        groups: dict[str, list[str]] = {}
        for qid in per_query:
            groups.setdefault(types.get(qid, UNTYPED), []).append(qid)
        return {kind: {**metrics.aggregate({q: per_query[q] for q in qids},
                                           [latencies[q] for q in qids]),
                       "queries": len(qids)}
                for kind, qids in sorted(groups.items())}

    def _ranked_ids(self, qid: str, fragments: list[ComposedFragment]) -> list[str]:
        """The returned fragments as a ranking of corpus ids (or labels), first occurrence
        kept — several chunks of one document count once, at the best chunk's rank."""
        ranked: list[str] = []
        seen: set[str] = set()
        labels = None
        if self.tree is not None:
            judged = self.dataset.qrels[qid]
            labels = [Label.parse(text) for text in
                      sorted(judged, key=lambda text: (-judged[text], text))]
        for item in fragments:
            pointers = [Pointer(c.path, c.anchor, c.start_line, c.end_line)
                        for c in item.sources]
            if labels is None:
                ids = sorted(self.path_to_doc[p.path] for p in pointers
                             if p.path in self.path_to_doc)
            else:
                ids = [label.text for label in labels if self.tree.matches(label, pointers)]
                if not ids:
                    # Not any labelled source: a distinct, non-relevant entry of the ranking,
                    # named by its first source so a labeller can read the miss.
                    first = min(pointers, key=lambda p: (p.path, p.anchor), default=None)
                    ids = [f"other:{first.path}#{first.anchor}" if first
                           else f"other:{item.fragment.public_id}"]
            for doc in ids:
                if doc not in seen:
                    seen.add(doc)
                    ranked.append(doc)
        return ranked
