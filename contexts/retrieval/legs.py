"""What every retrieval leg is: started early, collected late (in the manner of Haystack 2.x
components, with the run split in two so that the legs overlap).

``start`` sets the leg's slow part going and returns: the dense leg hands the query to the
encoder process at once; the lexical leg, started after it, searches tantivy right away in
the request's thread (~3 ms, while that pass takes ~10). ``collect`` runs in the
request's thread, inside the row-level-security transaction: it waits for that part, runs the
leg's statement, adds the rows of its hits to the request's :class:`CandidateRows` and returns
the ranked hits. Each leg's SQL lives beside it (``dense.py``, ``lexical.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from contexts.models import EmbeddingGeneration
from contexts.retrieval.rows import CandidateRows
from contexts.retrieval.types import RetrievalRequest

# (fragment pk, the leg's own score), best first.
Ranked = list[tuple[int, float]]


@dataclass
class Collected:
    ranked: Ranked
    timings: dict[str, float] = field(default_factory=dict)  # stage → milliseconds
    # A leg that answered from a source it knows to be behind says so with a code
    # (``contexts.retrieval.degraded``), and what the source was (the lexical index's mark).
    degraded: str | None = None
    source: dict | None = None
    # Hits this request may not return (superseded or retired, still in the index): dropped
    # before fusion, counted for the trace.
    not_retrievable: int = 0


class LegUnavailable(Exception):
    """A leg could not answer; the request is served by the others and says so with
    ``code`` (``contexts.retrieval.degraded``)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Pending(Protocol):
    def collect(self, rows: CandidateRows,
                generations: dict[str, EmbeddingGeneration]) -> Collected:
        """Wait for the leg, read its hits' rows into ``rows``; raise :class:`LegUnavailable`
        when the leg's source failed. ``generations``: namespace → active generation."""
        ...


class Leg(Protocol):
    name: str

    def start(self, request: RetrievalRequest) -> Pending:
        """Set the leg's slow part going and return without waiting for another process (a
        part short enough to run meanwhile, tantivy's search, runs here)."""
        ...
