"""Regression replays: recorded retrievals re-run against a candidate configuration.

Each :class:`~contexts.models.RetrievalTrace` stores the query, the effective scope set and
every parameter of the request. A replay rebuilds that request (same scopes — no new
authorization decision), once as recorded and once with the candidate's overrides, calls the
real :func:`retrieve` for both without recording a trace, and compares the two top-3 lists.

Overlap is the Jaccard index of the *token sets* of the two top-3 lists (the lowercased word
tokens of the fragments' bodies), not of their ids: a top-3 that now returns a near-duplicate
or a re-chunked piece of the same text is not a real change, and a token overlap says so where
an id overlap would not. ``ids`` mode (Jaccard of the id sets) is available for strictness.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from contexts.models import Fragment, RetrievalTrace
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.types import FILE_EVIDENCE_PARTS, FusionConfig, RetrievalRequest, Weights

TOP = 3
WORD = re.compile(r"\w+")
# Request fields a candidate configuration may override, besides the fusion settings.
REQUEST_FIELDS = ("legs", "reranker", "k_lexical", "k_dense", "rerank_top", "budget_tokens",
                  "min_score", "freshness_halflife_days", "max_fragments")
FUSION_KEYS = ("fusion", "rrf_k", "leg_weights", "namespace_leg_weights")
FUSIONS = ("adaptive", "convex", "rrf")
ALLOWED_KEYS = frozenset({*REQUEST_FIELDS, *FUSION_KEYS, "weights"})


def parse_config(text: str | None) -> dict:
    """A JSON object given inline or as a file path; unknown keys are refused, since a typo
    would otherwise replay the recorded configuration and report "no change"."""
    if not text:
        return {}
    path = Path(text)
    raw = path.read_text() if not text.lstrip().startswith("{") and path.is_file() else text
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--pipeline: not JSON and not a readable file: {exc}") from exc
    if not isinstance(config, dict):
        raise ValueError("--pipeline: expected a JSON object")
    unknown = sorted(set(config) - ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"--pipeline: unknown key(s) {', '.join(unknown)}; allowed: "
                         f"{', '.join(sorted(ALLOWED_KEYS))}")
    if config.get("fusion") is not None and config["fusion"] not in FUSIONS:
        raise ValueError(f"--pipeline: fusion must be one of {', '.join(FUSIONS)}")
    legs = config.get("legs")
    if legs is not None and (not legs or not set(legs) <= {"lexical", "dense"}):
        raise ValueError("--pipeline: legs must be a non-empty subset of lexical, dense")
    return config


def _weights_tuple(weights: dict) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((leg, float(w)) for leg, w in weights.items()))


def _fusion(base: FusionConfig, values: dict) -> FusionConfig:
    """``base`` with the fusion keys present in ``values`` (trace parameters or overrides)."""
    fields = {f.name for f in dataclasses.fields(FusionConfig)}
    changes: dict = {}
    # A trace of adaptive fusion records the convex weights the model chose for that query:
    # replaying it re-applies those, and {"fusion": "adaptive"} asks the model anew.
    if values.get("fusion") is not None:
        changes["method"] = str(values["fusion"])
    if values.get("rrf_k") is not None:
        changes["k"] = float(values["rrf_k"])
    if values.get("leg_weights") is not None:
        changes["weights"] = _weights_tuple(values["leg_weights"])
    for key in ("prose_discount", "test_discount", "file_evidence"):
        if values.get(key) is not None:
            changes[key] = float(values[key])
    if values.get("file_evidence_parts") in FILE_EVIDENCE_PARTS:
        changes["file_evidence_parts"] = values["file_evidence_parts"]
    if values.get("namespace_leg_weights") is not None and "namespace_weights" in fields:
        changes["namespace_weights"] = tuple(sorted(
            (ns, _weights_tuple(w)) for ns, w in values["namespace_leg_weights"].items()))
    return dataclasses.replace(base, **changes)


def _reranker(recorded: str) -> str:
    return "cross-encoder" if recorded.startswith("cross-encoder") else "none"


def recorded_request(trace: RetrievalTrace) -> RetrievalRequest:
    """The request as it was made (the same scope set, parameters and persona)."""
    params = trace.parameters or {}
    requested = trace.requested_scope or {}
    weight_fields = {f.name for f in dataclasses.fields(Weights)}
    weights = params.get("weights")
    as_of = params.get("as_of")
    defaults = RetrievalRequest(query="", org_id=0, scope_ids=frozenset())
    return RetrievalRequest(
        query=trace.query, org_id=trace.org_id, scope_ids=frozenset(trace.scope_ids),
        chain=tuple(requested.get("chain") or ()),
        budget_tokens=params.get("budget_tokens", defaults.budget_tokens),
        k_lexical=params.get("k_lexical", defaults.k_lexical),
        k_dense=params.get("k_dense", defaults.k_dense),
        rerank_top=params.get("rerank_top", defaults.rerank_top),
        freshness_halflife_days=params.get("freshness_halflife_days"),
        min_score=params.get("min_score", defaults.min_score),
        include_superseded=params.get("include_superseded", False),
        as_of=dt.datetime.fromisoformat(as_of) if as_of else None,
        legs=tuple(params.get("legs") or defaults.legs),
        fusion=_fusion(FusionConfig.from_settings(), params),
        reranker=_reranker(trace.reranker or "none"),
        weights=Weights(**{k: v for k, v in weights.items() if k in weight_fields})
        if isinstance(weights, dict) else None,
        persona_id=requested.get("persona_id"),
        max_fragments=params.get("max_fragments"),
    )


def candidate_request(request: RetrievalRequest, overrides: dict) -> RetrievalRequest:
    changes = {key: overrides[key] for key in REQUEST_FIELDS if key in overrides}
    if "legs" in changes:
        changes["legs"] = tuple(changes["legs"])
    if "weights" in overrides:
        changes["weights"] = dataclasses.replace(request.weights or Weights(),
                                                 **overrides["weights"])
    if any(key in overrides for key in FUSION_KEYS):
        changes["fusion"] = _fusion(request.fusion or FusionConfig.from_settings(), overrides)
    return dataclasses.replace(request, **changes)


def top_ids(request: RetrievalRequest) -> list[str]:
    result = retrieve(request, record_trace=False)
    return [c.fragment.public_id for c in result.fragments[:TOP]]


def token_set(texts: Iterable[str]) -> set[str]:
    return {token for text in texts for token in WORD.findall(text.lower())}


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0  # nothing before, nothing now: unchanged
    return len(a & b) / len(a | b)


@dataclass
class Replayed:
    trace: RetrievalTrace
    before: list[str]
    after: list[str]
    overlap: float

    def changed(self, threshold: float) -> bool:
        return self.overlap < threshold


def overlap(before: list[str], after: list[str], mode: str) -> float:
    if mode == "ids":
        return jaccard(set(before), set(after))
    bodies = dict(Fragment.objects.filter(public_id__in={*before, *after})
                  .values_list("public_id", "body"))
    return jaccard(token_set(bodies.get(i, "") for i in before),
                   token_set(bodies.get(i, "") for i in after))


def replay(trace: RetrievalTrace, overrides: dict, *, baseline: str = "rerun",
           mode: str = "tokens") -> Replayed:
    """``baseline``: ``rerun`` re-runs the recorded configuration now (only the configuration
    differs between the two sides), ``recorded`` takes the top-3 the trace returned back then
    (content changes since then count as changes too)."""
    request = recorded_request(trace)
    if baseline == "recorded":
        before = [row["id"] for row in (trace.returned or [])[:TOP]]
    else:
        before = top_ids(request)
    after = top_ids(candidate_request(request, overrides))
    return Replayed(trace, before, after, round(overlap(before, after, mode), 4))
