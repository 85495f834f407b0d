"""Authority: PageRank over the citation graph, stored in ``Fragment.authority`` (0–1).

Edges are :class:`~contexts.models.Link` rows — front-matter links, Markdown links, references
and supersessions — pointing from the citing fragment (``source``) to the cited one
(``target``). Nodes are the organization's active and superseded fragments: a retired fragment
no longer vouches for anything and is not ranked (its authority is left as it was, unused,
since retrieval never returns it). Superseded fragments stay in so that a "supersedes" edge
keeps its meaning and as-of retrieval still sees sensible values.

Power iteration with damping 0.85; the rank of dangling nodes (no outgoing links) is spread
uniformly, as if they linked everywhere, so rank is conserved. Scores are normalised so the
highest is 1.0 — compose blends ``w_c·authority`` with other 0–1 signals. A graph without edges
gives every node the same rank, i.e. 1.0: authority then does not change any ordering.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np
from django.conf import settings

from accounts.models import Organization
from contexts.models import Fragment, FragmentStatus, Link
from contexts.services import fragments as fragment_service

logger = logging.getLogger(__name__)
N = TypeVar("N", bound=Hashable)


def pagerank(nodes: Sequence[N], edges: Iterable[tuple[N, N]], *, damping: float = 0.85,
             tolerance: float = 1e-10, max_iterations: int = 200) -> dict[N, float]:
    """PageRank of ``nodes`` (sum 1 before normalisation), normalised so the max is 1.0.

    Edges to or from unknown nodes and self-loops are ignored; parallel edges (e.g. a link
    that is both a reference and a Markdown link) count once.
    """
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    n = len(nodes)
    pairs = {(index[s], index[t]) for s, t in edges if s in index and t in index and s != t}
    sources = np.fromiter((s for s, _ in pairs), dtype=np.int64, count=len(pairs))
    targets = np.fromiter((t for _, t in pairs), dtype=np.int64, count=len(pairs))
    out_degree = np.bincount(sources, minlength=n).astype(np.float64)
    dangling = out_degree == 0
    weights = np.divide(1.0, out_degree, out=np.zeros(n), where=~dangling)[sources]
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iterations):
        flow = np.bincount(targets, weights=rank[sources] * weights, minlength=n)
        new = (1.0 - damping) / n + damping * (flow + rank[dangling].sum() / n)
        delta = np.abs(new - rank).sum()
        rank = new
        if delta < tolerance:
            break
    top = rank.max()
    return {node: float(rank[i] / top) for node, i in index.items()}


def compute_authority(org: Organization) -> dict[int, float]:
    """Recompute and store the authority of every ranked fragment of ``org``."""
    nodes = list(Fragment.objects.filter(
        org=org, status__in=[FragmentStatus.ACTIVE, FragmentStatus.SUPERSEDED],
    ).order_by("pk").values_list("pk", flat=True))
    edges = Link.objects.filter(source__org=org, target__org=org).values_list("source_id",
                                                                             "target_id")
    scores = pagerank(nodes, edges, damping=settings.GOVERNANCE_PAGERANK_DAMPING)
    changed = fragment_service.store_authority(scores)
    logger.info("authority of %s: %d fragments ranked, %d changed", org.slug, len(scores),
                changed)
    return scores
