"""Retrieval lane: lexical ∥ dense → fuse → rerank → compose. Use :func:`retrieve`."""

from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.types import FusionConfig, RetrievalRequest, RetrievalResult, Weights

__all__ = ["FusionConfig", "RetrievalRequest", "RetrievalResult", "Weights", "retrieve"]
