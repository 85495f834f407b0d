"""Retrieval signals as small bars: one scale per signal, so a reader compares candidates at a
glance (the number stays next to each bar)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    label: str
    text: str        # the value as shown (rank, score, yes/no, or "—")
    fraction: float  # 0–1, the bar's length

    @property
    def percent(self) -> int:
        return round(max(0.0, min(1.0, self.fraction)) * 100)


def _rank_bar(label: str, rank: int | None, worst: int) -> Bar:
    if rank is None:
        return Bar(label, "—", 0.0)
    return Bar(label, f"#{rank}", (worst - rank + 1) / worst if worst else 0.0)


def _score_bar(label: str, value: float | None, low: float = 0.0, high: float = 1.0) -> Bar:
    if value is None:
        return Bar(label, "—", 0.0)
    span = high - low
    return Bar(label, f"{value:.3f}", (value - low) / span if span > 0 else 1.0)


def with_bars(candidates: Iterable[dict]) -> list[dict]:
    """Trace-shaped candidates (``Candidate.as_trace``) → the same dicts plus ``bars``.

    Ranks scale from the worst rank seen in that leg; RRF and rerank from the highest (and, for
    rerank scores that can be negative logits, the lowest) among these candidates; freshness,
    authority and final are already 0–1.
    """
    rows = list(candidates)
    worst_bm25 = max((c.get("bm25_rank") or 0 for c in rows), default=0)
    worst_dense = max((c.get("dense_rank") or 0 for c in rows), default=0)
    best_rrf = max((c.get("rrf") or 0.0 for c in rows), default=0.0)
    reranks = [c["rerank"] for c in rows if c.get("rerank") is not None]
    low, high = (min(reranks), max(reranks)) if reranks else (0.0, 1.0)
    out = []
    for c in rows:
        bars = [
            _rank_bar("BM25 rank", c.get("bm25_rank"), worst_bm25),
            _rank_bar("Dense rank", c.get("dense_rank"), worst_dense),
            _score_bar("RRF", c.get("rrf"), 0.0, best_rrf or 1.0),
            _score_bar("Rerank", c.get("rerank"), min(low, 0.0), high if high > 0 else 1.0),
            _score_bar("Freshness", c.get("freshness")),
            _score_bar("Authority", c.get("authority")),
            Bar("Pinned", "yes" if c.get("pinned") else "no", 1.0 if c.get("pinned") else 0.0),
            _score_bar("Final", c.get("final")),
        ]
        out.append({**c, "bars": bars})
    return out
