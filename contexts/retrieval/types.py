"""Plain data passed between the retrieval stages."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from django.conf import settings

LegWeights = tuple[tuple[str, float], ...]
# Which parts of a file gain the file evidence (FusionConfig.file_evidence_parts).
FILE_EVIDENCE_PARTS = ("every", "best")


def _freeze(weights: dict[str, float]) -> LegWeights:
    return tuple(sorted((leg, float(w)) for leg, w in weights.items()))


@dataclass(frozen=True)
class FusionConfig:
    """Reciprocal Rank Fusion: ``score = Σ_leg weight_leg(namespace) / (k + rank_leg)``.

    Leg weights may differ per namespace: for code, natural-language queries share few words
    with the text, so the lexical leg deserves less trust than for prose.

    Every field left out comes from ``settings.RETRIEVAL``, the one place the defaults live
    (``FusionConfig()`` is the configured fusion).
    """

    k: float = field(default_factory=lambda: float(settings.RETRIEVAL["rrf_k"]))
    weights: LegWeights = field(
        default_factory=lambda: _freeze(settings.RETRIEVAL["leg_weights"]))
    namespace_weights: tuple[tuple[str, LegWeights], ...] = field(
        default_factory=lambda: tuple(sorted(
            (ns, _freeze(w)) for ns, w in settings.RETRIEVAL["namespace_leg_weights"].items())))
    # rrf | convex (weighted min-max normalised scores) | adaptive (convex, with the legs'
    # weights chosen per query by contexts.retrieval.adaptive)
    method: str = field(default_factory=lambda: settings.RETRIEVAL["fusion"])
    # Convex fusion only, chosen per query by contexts.retrieval.adaptive (0 elsewhere): the
    # share of its score a prose fragment loses, and the share a test fragment loses.
    prose_discount: float = 0.0
    test_discount: float = 0.0
    # ... and the share of the best score among the other candidates of its file that a piece
    # of code gains, "every" part of a file or only its "best" (fuse.convex).
    file_evidence: float = 0.0
    file_evidence_parts: str = "every"

    @classmethod
    def from_settings(cls) -> FusionConfig:
        return cls()

    @classmethod
    def convex_share(cls, lexical_share: float, prose_discount: float = 0.0,
                     test_discount: float = 0.0, file_evidence: float = 0.0,
                     file_evidence_parts: str = "every") -> FusionConfig:
        """Convex fusion with the lexical leg weighted ``lexical_share`` and the dense leg the
        rest, in every namespace, prose and test fragments losing those shares of their
        scores, code gaining ``file_evidence`` of its file's (what adaptive fusion chose for
        one query)."""
        if file_evidence_parts not in FILE_EVIDENCE_PARTS:
            raise ValueError(f"file_evidence_parts must be one of {FILE_EVIDENCE_PARTS}")
        share, prose, tests, files = (
            min(1.0, max(0.0, float(value)))
            for value in (lexical_share, prose_discount, test_discount, file_evidence))
        return cls(method="convex", weights=_freeze({"lexical": share, "dense": 1.0 - share}),
                   namespace_weights=(), prose_discount=prose, test_discount=tests,
                   file_evidence=files, file_evidence_parts=file_evidence_parts)

    @cached_property
    def _weight_table(self) -> dict[str | None, dict[str, float]]:
        # weight() runs for every candidate × leg; build the lookups once per config.
        table: dict[str | None, dict[str, float]] = {None: dict(self.weights)}
        table.update((namespace, dict(weights)) for namespace, weights in self.namespace_weights)
        return table

    def weight(self, leg: str, namespace: str | None = None) -> float:
        table = self._weight_table
        return table.get(namespace, table[None]).get(leg, 0.0)

    def as_dict(self) -> dict:
        return {"fusion": self.method, "rrf_k": self.k, "leg_weights": dict(self.weights),
                "namespace_leg_weights": {ns: dict(w) for ns, w in self.namespace_weights},
                "prose_discount": self.prose_discount, "test_discount": self.test_discount,
                "file_evidence": self.file_evidence,
                "file_evidence_parts": self.file_evidence_parts}


def _default_weight(name: str):
    return field(default_factory=lambda: float(settings.DEFAULT_WEIGHTS[name]))


@dataclass(frozen=True)
class Weights:
    """Compose blend: ``w_r·relevance + w_f·freshness + w_c·authority + w_p·pinned``; a weight
    left out is ``settings.DEFAULT_WEIGHTS``'s."""

    w_r: float = _default_weight("w_r")
    w_f: float = _default_weight("w_f")
    w_c: float = _default_weight("w_c")
    w_p: float = _default_weight("w_p")

    @property
    def total(self) -> float:
        return (self.w_r + self.w_f + self.w_c + self.w_p) or 1.0


@dataclass(frozen=True)
class RetrievalRequest:
    query: str
    org_id: int
    scope_ids: frozenset[int]            # the effective, already authorized scope set
    chain: tuple[int, ...] = ()          # requested scopes, most specific first (for pins)
    budget_tokens: int = 3200
    k_lexical: int = 100
    k_dense: int = 100
    rerank_top: int = 50
    freshness_halflife_days: float | None = None
    min_score: float = 0.0
    include_superseded: bool = False
    as_of: dt.datetime | None = None
    legs: tuple[str, ...] = ("lexical", "dense")
    fusion: FusionConfig | None = None
    reranker: str | None = None          # None: the configured default
    weights: Weights | None = None       # None: the persona's, else the defaults
    # Weights typed by a curator (console), by name, over the others (read with the persona's
    # inside the row-level-security block).
    weight_overrides: tuple[tuple[str, float], ...] = ()
    persona_id: int | None = None
    max_fragments: int | None = None
    include_pins: bool = True
    count_use: bool = True               # evaluation runs do not touch the use counters
    # How current an answer must be (issue 38; docs/api.md): a fragment last edited or
    # verified more than this many days ago is left out; only verified fragments; none whose
    # source_state or evidence_state is one of these. Applied with the scope rule
    # (rows.retrievable), before any scoring.
    max_age_days: float | None = None
    verified_only: bool = False
    exclude_states: tuple[str, ...] = ()

    def currency_filters(self) -> dict:
        """The filters as the trace records them (empty when none is asked for)."""
        asked = {"max_age_days": self.max_age_days, "verified_only": self.verified_only,
                 "exclude_states": list(self.exclude_states)}
        return {key: value for key, value in asked.items() if value}


class CandidateRow(NamedTuple):
    """What scoring and packing need of a candidate (one row per candidate, ~200 a request);
    the rest of a fragment — body, title, times — is read only for the few returned."""

    pk: int
    public_id: str
    kind: str
    namespace: str
    packed_tokens: int | None
    touched_at: float      # epoch seconds of the last edit or verification, for freshness
    authority: float


@dataclass(slots=True)  # ~200 a request: slots make each cheaper to build and to read
class Candidate:
    """One fragment's journey through the stages (what the trace stores)."""

    fragment_id: int
    ranks: dict[str, int] = field(default_factory=dict)     # leg → 1-based rank
    scores: dict[str, float] = field(default_factory=dict)  # leg → raw score
    rrf: float = 0.0
    rerank: float | None = None
    relevance: float = 0.0
    freshness: float = 0.0
    authority: float = 0.0
    pinned: bool = False
    pin_order: int | None = None
    final: float = 0.0
    returned: bool = False
    dropped: str = ""  # why it was not returned (below min_score, over budget, …)

    def trace_row(self, public_id: str) -> list:
        """This candidate's values in :data:`TRACE_COLUMNS` order: the trace stores its
        candidates as one table (~200 rows a request), built without a dict per row."""
        ranks, scores = self.ranks, self.scores
        return [public_id, ranks.get("lexical"), scores.get("lexical"), ranks.get("dense"),
                scores.get("dense"), round(self.rrf, 6), self.rerank, round(self.relevance, 4),
                round(self.freshness, 4), round(self.authority, 4), self.pinned, self.pin_order,
                round(self.final, 4), self.returned, self.dropped]

    def as_trace(self, public_id: str) -> dict:
        return dict(zip(TRACE_COLUMNS, self.trace_row(public_id), strict=True))


# What a trace records of every candidate, in the order of Candidate.trace_row.
TRACE_COLUMNS = ("id", "bm25_rank", "bm25", "dense_rank", "dense", "rrf", "rerank", "relevance",
                 "freshness", "authority", "pinned", "pin_order", "final", "returned",
                 "dropped")


class Citation(NamedTuple):
    """Where a returned fragment comes from: a source document and the anchor in it."""

    path: str
    repository: str | None   # the repository's slug; None for organization-wide documents
    anchor: str
    start_line: int | None
    end_line: int | None
    commit: str | None = None  # a git source's document: the commit it was read at
    url: str | None = None     # its permalink, when the source has a template
    kind: str = "file"         # contexts.models.FragmentOrigin: file, git or archive


class Written(NamedTuple):
    """Where a returned fragment no file brought was written: ``kind`` console, session or
    proposal (``contexts.models.FragmentOrigin``), who wrote its first version and when."""

    kind: str
    written_by: str | None     # the username; None for an agent's token or the system
    written_at: object         # datetime of the first version
    session_id: str | None = None   # kind session: the session's public id
    proposal_id: str | None = None  # kind proposal: the approved proposal's public id


@dataclass
class ComposedFragment:
    fragment: object          # contexts.models.Fragment
    candidate: Candidate
    text: str
    tokens: int
    sources: list[Citation] = field(default_factory=list)  # by path, then first line
    # What it cites beside its sources: (references, how many changed or missing), read in
    # the statement that reads the fragment (contexts.retrieval.returned).
    cited: tuple[int, int] = (0, 0)
    # Where it was written when no file brought it (read in the same statement); None otherwise.
    written: Written | None = None


@dataclass
class RetrievalResult:
    fragments: list[ComposedFragment]
    candidates: dict[int, Candidate]
    reranker: str
    timings_ms: dict[str, float]
    fusion: FusionConfig
    weights: Weights
    trace_id: str | None = None
    # leg → reason, for a requested leg that could not run (the answer came from the others).
    degraded: dict[str, str] = field(default_factory=dict)
    # With adaptive fusion: the model's version, its features and the lexical share it chose.
    adaptive: dict | None = None
    # leg → what it read: the lexical index's mark, the feed's head and the lag (ADR 0015).
    sources: dict[str, dict] = field(default_factory=dict)
    # leg → hits left out before fusion because this request may not return them (superseded
    # or retired fragments the lexical index still holds).
    not_retrievable: dict[str, int] = field(default_factory=dict)
    # Set by the API for an empty answer: where the caller's readable fragments are instead
    # (contexts.usecases.org_scope).
    hint: str | None = None
