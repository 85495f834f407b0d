"""Fitting the adaptive-fusion model (``contexts.retrieval.adaptive``) on train/dev splits.

Collection: each dataset is ingested into a throwaway organization through the real lane, and
every query runs once through the real ``retrieve()`` with both legs and every candidate
composed. From that one run the fusion can be redone offline at any lexical share α: for each
query we keep its features and the nDCG@10 of the convex fusion at every α of the grid.

Fitting: a softmax policy over the grid, ``p(α | x) = softmax(W x + b)``, maximising the
expected nDCG@10 with an L2 penalty; every dataset weighs the same whatever its size, so a
big training split cannot make the model its own, and a dataset served worse than by its best
fixed share weighs more (:data:`FLOOR`). Inference takes the expected α.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from contexts.evaluation import dataset as datasets
from contexts.evaluation import metrics
from contexts.evaluation.harness import (
    DEPTH,
    PIPELINES,
    EvalOptions,
    Harness,
    create_org,
    drop_org,
)
from contexts.models import FragmentKind
from contexts.retrieval import adaptive, fuse
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.rows import candidate_files
from contexts.retrieval.types import FusionConfig
from contexts.services.rls import retrieval_scope

GRID = tuple(round(a / 10, 1) for a in range(11))  # lexical share 0.0 … 1.0
L2 = 0.001  # chosen by leave-one-dataset-out on the fit sets (docs/retrieval-quality.md)
# The objective's floor: every fit dataset should be served at least as well as by the best
# fixed share on it (a hinge on each dataset's expected nDCG, weighed this much). Without it
# the fit trades a corpus type away for a larger gain elsewhere — on CoSQA, questions over
# code, the hybrid fell below the dense leg alone that one share (α = 0) gives.
FLOOR = 1.0


@dataclass
class Collected:
    """One dataset's queries: features (N × F) and nDCG@10 / MRR@10 at every α (N × K), and
    whether each is asked in words (``adaptive.in_words``: it bounds the share)."""

    name: str
    qids: list[str]
    features: np.ndarray
    ndcg: np.ndarray
    mrr: np.ndarray
    types: list[str]
    asked: list[bool] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"name": self.name, "qids": self.qids, "features": self.features.tolist(),
                "ndcg": self.ndcg.tolist(), "mrr": self.mrr.tolist(), "types": self.types,
                "asked": self.asked}

    @classmethod
    def from_json(cls, data: dict) -> Collected:
        return cls(data["name"], data["qids"], np.array(data["features"]),
                   np.array(data["ndcg"]), np.array(data["mrr"]), data["types"],
                   data.get("asked", []))


def _fused_order(legs: dict, share: float, namespaces: dict, tests: set[int],
                 places: tuple[dict[int, int], dict[int, str]],
                 discounts: tuple[float, float, float, str]) -> list[int]:
    """The candidates' pks in fused order (``places``: pk → file, pk → anchor)."""
    config = FusionConfig.convex_share(share, *discounts)
    candidates = fuse.convex(legs, config, namespaces, tests, *places)
    return [c.fragment_id for c in
            sorted(candidates.values(), key=lambda c: (-c.relevance, c.fragment_id))]


def collect(path: str, split: str, log: Callable[[str], None] = print, *,
            ignore_identical_ids: bool = False) -> Collected:
    """Run ``path``'s ``split`` once through the real pipeline and score every α offline.
    ``ignore_identical_ids``: a set whose queries are documents of its corpus (a paragraph
    that asks for the paragraphs answering it, ArguAna-style) drops the query's own document
    from every ranking, as ``manage.py eval --ignore-identical-ids`` does."""
    if split == "test":
        raise ValueError("the fusion model is never fitted on a test split")
    data = datasets.load(path, split)
    harness = Harness(data, EvalOptions(pipelines=("hybrid",), split=split,
                                        ignore_identical_ids=ignore_identical_ids), log=log)
    queries = harness._queries()
    org = create_org(data.name)
    rows_f, rows_n, rows_m, qids, types, asked = [], [], [], [], [], []
    try:
        harness._ingest(org)
        spec = PIPELINES["hybrid"]
        for n, (qid, text) in enumerate(queries, start=1):
            # Every candidate composed, so any re-fusion can be mapped back to documents; the
            # fusion used here does not matter (it is redone below at every α).
            request = replace(harness._request(org, spec, qid, text), max_fragments=2 * DEPTH,
                              fusion=FusionConfig(method="convex"))
            result = retrieve(request, record_trace=False)
            by_pk = {item.fragment.pk: item for item in result.fragments}
            legs = {leg: sorted(((c.fragment_id, c.scores[leg])
                                 for c in result.candidates.values() if leg in c.ranks),
                                key=lambda hit: -hit[1])
                    for leg in ("lexical", "dense")}
            namespaces = {pk: item.fragment.namespace for pk, item in by_pk.items()}
            judged = data.qrels[qid]
            ndcg, mrr = [], []
            values = adaptive.features(text, legs, namespaces)
            tests = {pk for pk, item in by_pk.items() if item.fragment.kind == FragmentKind.TEST}
            with retrieval_scope(request.scope_ids):  # the files as retrieval reads them
                places = candidate_files(result.candidates)
            # Not fitted here: each α is scored with the discounts and the file evidence the
            # query gets.
            discounts = (adaptive.prose_discount(text, values), adaptive.discount_for_tests(text),
                         *adaptive.file_evidence(text, values))
            for share in GRID:
                order = [by_pk[pk] for pk in
                         _fused_order(legs, share, namespaces, tests, places, discounts)
                         if pk in by_pk][:DEPTH]
                ranked = harness._ranked_ids(qid, order)
                if ignore_identical_ids:
                    ranked = [doc for doc in ranked if doc != qid]
                ndcg.append(metrics.ndcg_at_k(ranked, judged, 10))
                mrr.append(metrics.mrr_at_k(ranked, judged, 10))
            rows_f.append([values[name] for name in adaptive.FEATURES])
            rows_n.append(ndcg)
            rows_m.append(mrr)
            asked.append(adaptive.in_words(text, values))
            qids.append(qid)
            types.append(data.query_types.get(qid, "") if data.query_types else "")
            if n % 100 == 0:
                log(f"  {data.name}: {n}/{len(queries)} queries")
    finally:
        drop_org(org.pk)
    return Collected(f"{data.name}:{split}", qids, np.array(rows_f), np.array(rows_n),
                     np.array(rows_m), types, asked)


def collect_cached(path: str, split: str, cache: Path,
                   log: Callable[[str], None] = print, refresh: bool = False, *,
                   ignore_identical_ids: bool = False) -> Collected:
    """:func:`collect`, kept as JSON in ``cache`` so that a re-fit does not re-run queries."""
    cache.mkdir(parents=True, exist_ok=True)
    suffix = "-ignore-identical-ids" if ignore_identical_ids else ""
    file = cache / f"{Path(path).resolve().name}-{split}{suffix}.json"
    if file.exists() and not refresh:
        log(f"{file}: cached queries (--refresh runs them again)")
        return _with_text_features(Collected.from_json(json.loads(file.read_text())),
                                   datasets.load(path, split).queries)
    found = collect(path, split, log, ignore_identical_ids=ignore_identical_ids)
    file.write_text(json.dumps(found.as_json()))
    return found


def _with_text_features(found: Collected, texts: dict[str, str]) -> Collected:
    """The cache with its query-text features computed again: they depend on the text alone,
    so a change to :func:`adaptive.text_features` (or a new one) needs no re-run of the queries.
    The features of the legs' lists are the cache's last columns."""
    lists = len(adaptive.FEATURES) - len(adaptive.TEXT_FEATURES)
    text = np.array([[adaptive.text_features(texts[qid])[name] for name in adaptive.TEXT_FEATURES]
                     for qid in found.qids]).reshape(len(found.qids), -1)
    found.features = np.hstack([text, found.features[:, found.features.shape[1] - lists:]])
    found.asked = [adaptive.in_words(texts[qid], dict(zip(adaptive.FEATURES, row, strict=True)))
                   for qid, row in zip(found.qids, found.features, strict=True)]
    return found


# -- fitting -----------------------------------------------------------------------------------
def _softmax(logits: np.ndarray) -> np.ndarray:
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def fit(sets: Sequence[Collected], *, version: str, l2: float = L2,
        steps: int = 3000, floor: float = FLOOR) -> adaptive.FusionModel:
    x = np.vstack([s.features for s in sets])
    gains = np.vstack([s.ndcg for s in sets])
    # Each dataset weighs the same in the objective, whatever its number of queries.
    base = np.concatenate([np.full(len(s.qids), 1.0 / (len(s.qids) * len(sets)))
                           for s in sets])
    # Which dataset each query belongs to, and the best fixed share's nDCG on each: a dataset
    # the policy serves worse than one fixed share would weighs `floor` more until it does not.
    member = np.concatenate([np.full(len(s.qids), i) for i, s in enumerate(sets)])
    best_fixed = np.array([s.ndcg.mean(axis=0).max() for s in sets])
    sizes = np.array([len(s.qids) for s in sets], dtype=float)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    k, f = gains.shape[1], z.shape[1]
    w, b = np.zeros((k, f)), np.zeros(k)
    moments = [np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)]
    rate, beta1, beta2 = 0.05, 0.9, 0.999
    for step in range(1, steps + 1):  # Adam, ascending the penalised expected gain
        p = _softmax(z @ w.T + b)
        expected = (p * gains).sum(axis=1, keepdims=True)
        per_set = np.bincount(member, weights=expected[:, 0], minlength=len(sets)) / sizes
        short = (per_set < best_fixed).astype(float)
        weight = base + floor * short[member] / sizes[member]
        d_logits = weight[:, None] * p * (gains - expected)
        grads = (d_logits.T @ z - l2 * w, d_logits.sum(axis=0))
        for i, (param, grad) in enumerate(zip((w, b), grads, strict=True)):
            m, v = moments[2 * i], moments[2 * i + 1]
            m[:] = beta1 * m + (1 - beta1) * grad
            v[:] = beta2 * v + (1 - beta2) * grad ** 2
            param += rate * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + 1e-8)
    return adaptive.FusionModel(version=version, grid=GRID, mean=mean, scale=scale, weights=w,
                                bias=b, trained_on=tuple(s.name for s in sets))


def _interpolated(row: np.ndarray, share: float) -> float:
    """nDCG at a share between grid points: the nearer grid point's (the ranking moves in
    steps, so this is what the fused ranking at ``share`` is closest to)."""
    return float(row[int(round(share * (len(GRID) - 1)))])


def score(model: adaptive.FusionModel, data: Collected, table: str = "ndcg") -> float:
    values = getattr(data, table)
    asked = data.asked or [False] * len(data.qids)
    shares = [adaptive.lexical_share(model, dict(zip(adaptive.FEATURES, row, strict=True)), words)
              for row, words in zip(data.features, asked, strict=True)]
    return statistics.fmean(_interpolated(r, a) for r, a in zip(values, shares, strict=True))


def report(sets: Sequence[Collected], model: adaptive.FusionModel,
           log: Callable[[str], None] = print) -> dict:
    """Fixed shares against the model, in-sample and leave-one-dataset-out."""
    out: dict = {}
    for data in sets:
        fixed = data.ndcg.mean(axis=0)
        others = [s for s in sets if s is not data]
        held_out = (score(fit(others, version="lodo"), data) if others else None)
        out[data.name] = {
            "queries": len(data.qids),
            "fixed": {str(a): round(float(v), 4) for a, v in zip(GRID, fixed, strict=True)},
            "oracle": round(float(data.ndcg.max(axis=1).mean()), 4),
            "adaptive": round(score(model, data), 4),
            "adaptive_mrr": round(score(model, data, "mrr"), 4),
            "adaptive_left_out": None if held_out is None else round(held_out, 4),
        }
        row = out[data.name]
        best = max(row["fixed"].items(), key=lambda item: item[1])
        log(f"{data.name}: {row['queries']} queries · best fixed α={best[0]} {best[1]:.4f} · "
            f"α=0.5 {row['fixed']['0.5']:.4f} · adaptive {row['adaptive']:.4f} "
            f"(left out of the fit: {row['adaptive_left_out']}) · oracle {row['oracle']:.4f}")
    return out
