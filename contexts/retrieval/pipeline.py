"""The one retrieval function: lexical ∥ dense → fuse → rerank → compose, scope-safe and traced.

The REST API, the MCP tools, the console's search preview and the evaluation harness all call
:func:`retrieve`; there is no second implementation. Its stages, each in its own module:

1. start the legs (``legs.py``): the query's forward pass in the query encoder's process, then
   tantivy in the request's thread while that pass runs;
2. inside the row-level-security block for the request's scopes, every read of the retrieval:
   its inputs (``inputs.py``: generations, weights, pins); the legs collected, lexical first so
   that its rows and the pins' are read while the query vector is still on its way, then dense,
   whose hits' rows not read yet are read by primary key after its top-k (``lexical.py``,
   ``dense.py``, ``rows.py``); fusion (``fuse.py``, ``adaptive.py``), reranking
   (``rerank.py``), composition (``compose.py``) and the returned fragments with their
   citations (``returned.py``);
3. after the answer, the writes it does not depend on: the trace (``trace.py``), the use
   counters and the metrics — handed to ``defer`` when the caller has one (ADR 0010).

Scope safety: ``request.scope_ids`` comes from ``accounts.scopes.retrieval_scopes`` and is
applied inside each leg (tantivy term-set filter, pgvector ``scope_ids &&`` predicate), and
every database read runs under row-level security for exactly those scopes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from accounts.models import new_public_id
from contexts.kernel.metrics import observe_retrieval
from contexts.models import FragmentKind, RetrievalTrace
from contexts.retrieval import adaptive, compose, fuse, inputs
from contexts.retrieval.dense import DenseLeg, QueryEmbedding
from contexts.retrieval.legs import Leg, LegUnavailable, Pending, Ranked
from contexts.retrieval.lexical import LexicalLeg
from contexts.retrieval.rerank import get_reranker, rerank
from contexts.retrieval.returned import complete
from contexts.retrieval.rows import CandidateRows, candidate_files
from contexts.retrieval.trace import build_trace
from contexts.retrieval.types import Candidate, FusionConfig, RetrievalRequest, RetrievalResult
from contexts.services import traces, usage
from contexts.services.rls import retrieval_scope

Defer = Callable[[Callable[[], None]], None]

# Legs start longest first (the forward pass), and are fused in this order too.
LEG_ORDER = ("dense", "lexical")


def retrieve(request: RetrievalRequest, *, principal: Any = None, record_trace: bool = True,
             embedding: QueryEmbedding | None = None, defer: Defer | None = None
             ) -> RetrievalResult:
    """Retrieve, trace and count one request.

    ``embedding``: the query's embedding, already started by a caller that had other work to
    do first (the API resolves scopes meanwhile); started here otherwise. ``defer``: where to
    hand the writes the answer does not depend on (the trace row — its id is already in the
    result — the use counters and the metrics) so that they run after the response is sent;
    without it they run before this returns.
    """
    clock = _Clock()
    reranker = get_reranker(request.reranker)  # an unknown one is refused before any work
    pending = {leg.name: leg.start(request) for leg in _legs(request, embedding)}
    with retrieval_scope(request.scope_ids):
        given = inputs.read(request)
        rows = CandidateRows(request, wanted=given.pins)
        legs = _collect(pending, rows, given, clock)
        with clock("fuse"):
            candidates, fusion, adaptive_choice = _fuse(request, legs.ranked, rows)
        with clock("rerank"):
            rerank(reranker, request, candidates, rows)
        with clock("compose"):
            rows.count_unstored()
            compose.score(candidates, rows.by_pk, given.pins, request, given.weights,
                          given.halflives)
            packed = complete(compose.pack(candidates, rows.by_pk, request), rows)
    clock.timings["total"] = clock.since_start()
    result = RetrievalResult(packed, candidates, reranker.name, clock.timings, fusion,
                             given.weights, degraded=legs.degraded, adaptive=adaptive_choice,
                             sources=legs.sources, not_retrievable=legs.not_retrievable)
    _after_answer(request, result, rows, given, principal, record_trace, defer)
    return result


def _legs(request: RetrievalRequest, embedding: QueryEmbedding | None) -> list[Leg]:
    legs: dict[str, Leg] = {"dense": DenseLeg(embedding), "lexical": LexicalLeg()}
    return [legs[name] for name in LEG_ORDER if name in request.legs]


@dataclass
class _LegAnswers:
    """What the legs answered, by leg: their ranked hits (in LEG_ORDER); a code for a leg that
    could not answer or answered from a source behind; what its source was (the lexical
    index's mark); how many of its hits this request may not return."""

    ranked: dict[str, Ranked] = field(default_factory=dict)
    degraded: dict[str, str] = field(default_factory=dict)
    sources: dict[str, dict] = field(default_factory=dict)
    not_retrievable: dict[str, int] = field(default_factory=dict)


def _collect(pending: dict[str, Pending], rows: CandidateRows, given: inputs.Inputs,
             clock: _Clock) -> _LegAnswers:
    """Each leg's answer, lexical first (its statement reads the pins' rows along, while the
    query vector is still on its way)."""
    out = _LegAnswers()
    for name in reversed(LEG_ORDER):
        if name not in pending:
            continue
        try:
            collected = pending[name].collect(rows, given.generations)
        except LegUnavailable as exc:
            out.degraded[name] = exc.code
            continue
        out.ranked[name] = collected.ranked
        clock.timings.update(collected.timings)
        if collected.degraded:
            out.degraded[name] = collected.degraded
        if collected.source is not None:
            out.sources[name] = collected.source
        if collected.not_retrievable:
            out.not_retrievable[name] = collected.not_retrievable
    rows.read()  # the pins' rows, if no leg's statement read them
    out.ranked = {name: out.ranked[name] for name in LEG_ORDER if name in out.ranked}
    return out


def _fuse(request: RetrievalRequest, ranked: dict[str, Ranked], rows: CandidateRows
          ) -> tuple[dict[int, Candidate], FusionConfig, dict | None]:
    """The fused candidates, the fusion that ran and, with adaptive fusion, its choice."""
    fusion = request.fusion or FusionConfig.from_settings()
    # Only what this request may retrieve is fused (e.g. superseded rows a leg still holds).
    by_pk = rows.by_pk
    legs = {leg: [(pk, score) for pk, score in hits if pk in by_pk]
            for leg, hits in ranked.items()}
    namespaces = {pk: row.namespace for pk, row in by_pk.items()}
    tests = {pk for pk, row in by_pk.items() if row.kind == FragmentKind.TEST}
    choice = None
    if fusion.method == "adaptive":
        share, choice = adaptive.choose(request.query, legs, namespaces)
        fusion = FusionConfig.convex_share(share, choice["prose_discount"],
                                           choice["test_discount"], choice["file_evidence"],
                                           choice["file_evidence_parts"])
    # One more statement, only for a question in words with code among the candidates.
    files, anchors = (candidate_files(by_pk)
                      if fusion.file_evidence and "code" in namespaces.values() else (None, None))
    return fuse.fuse(legs, fusion, namespaces, tests, files, anchors), fusion, choice


def _after_answer(request: RetrievalRequest, result: RetrievalResult, rows: CandidateRows,
                  given: inputs.Inputs, principal: Any, record_trace: bool,
                  defer: Defer | None) -> None:
    """The writes the answer does not depend on, deferred when the caller can."""
    writes: list[Callable[[], None]] = []
    if record_trace:
        result.trace_id = new_public_id(RetrievalTrace.PUBLIC_ID_PREFIX)
        # Built with the write: turning every candidate into JSON need not delay the answer.
        writes.append(lambda: traces.write(build_trace(request, result, rows.by_pk, principal,
                                                       given.generations)))
    if request.count_use:
        writes.append(partial(usage.count_retrievals, [c.fragment.pk for c in result.fragments]))
    # The metrics too: ~0.2 ms of histogram updates the answer does not depend on.
    writes.append(partial(observe_retrieval, result.timings_ms, result.reranker,
                          len(result.fragments), result.degraded))
    for write in writes:
        if defer is not None:
            defer(write)
        else:
            write()


class _Clock:
    """Milliseconds per stage, in the order the stages ran (the trace's ``timings_ms``)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}

    def since_start(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 2)

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self.timings[stage] = round((time.perf_counter() - started) * 1000, 2)
