"""Stage 6b — the swappable reranker: ``none`` (the offline default) or a cross-encoder.

No package ships reranker weights, so ``none`` is the honest default; a cross-encoder is
loaded with sentence-transformers from a configured local path (or a model id in the local
Hugging Face cache — the hub is offline) and scores the top ``rerank_top`` candidates.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from functools import cache
from typing import Protocol

from django.conf import settings

from contexts.embedding.embedder import offline
from contexts.retrieval.rows import CandidateRows, bodies
from contexts.retrieval.types import Candidate, RetrievalRequest


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class NoReranker:
    name = "none"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        raise NotImplementedError("the 'none' reranker does not score")


class CrossEncoderReranker:
    def __init__(self, model: str, max_length: int = 512) -> None:
        offline()
        from sentence_transformers import CrossEncoder

        self.name = f"cross-encoder:{model}"
        self.model = CrossEncoder(model, device="cpu", max_length=max_length)
        self._lock = threading.Lock()

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        with self._lock:
            raw = self.model.predict([(query, text) for text in texts], show_progress_bar=False,
                                     activation_fn=None)
        # Logits → 0–1 so relevance stays on the compose stage's scale.
        return [1.0 / (1.0 + math.exp(-float(x))) for x in raw]


@cache
def _cross_encoder(model: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(model)


def get_reranker(name: str | None = None) -> Reranker:
    """``none`` or ``cross-encoder`` (model from ``settings.RETRIEVAL['cross_encoder']``)."""
    choice = (name or settings.RETRIEVAL["reranker"]).strip().lower()
    if choice == "none":
        return NoReranker()
    if choice == "cross-encoder":
        model = settings.RETRIEVAL["cross_encoder"]
        if not model:
            raise ValueError("reranker 'cross-encoder' needs CONTEXTS_CROSS_ENCODER (a path)")
        return _cross_encoder(model)
    raise ValueError(f"unknown reranker {choice!r} (none, cross-encoder)")


def rerank(reranker: Reranker, request: RetrievalRequest, candidates: dict[int, Candidate],
           rows: CandidateRows) -> None:
    """Rescore the top ``rerank_top`` candidates in place (their bodies in one statement)."""
    if isinstance(reranker, NoReranker):
        return
    top = sorted((c for c in candidates.values() if c.fragment_id in rows),
                 key=lambda c: -c.relevance)[:request.rerank_top]
    if not top:
        return
    texts = bodies([c.fragment_id for c in top])
    scores = reranker.score(request.query, [texts[c.fragment_id][0] for c in top])
    for candidate, value in zip(top, scores, strict=True):
        candidate.rerank = round(value, 6)
        candidate.relevance = value
    floor = min(scores)
    reranked = {c.fragment_id for c in top}
    # Fragments beyond rerank_top keep their order but stay below every reranked one.
    for candidate in candidates.values():
        if candidate.fragment_id not in reranked:
            candidate.relevance *= floor
