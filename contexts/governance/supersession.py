"""Supersession chains: which fragment replaced which, oldest first.

Superseded fragments already leave retrieval (unless ``include_superseded`` or ``as_of``); this
module only answers "what came before and after this one" for the console and the governance
chain page.
"""

from __future__ import annotations

from contexts.models import Fragment


def supersession_chain(fragment: Fragment) -> list[Fragment]:
    """Every fragment connected to ``fragment`` by supersession, ordered older → newer.

    Usually a line (v1 → v2 → v3). When several fragments were superseded by the same one
    (a merge of knowledge), all predecessors are included, ordered by their distance from the
    newest fragment and then by when they became valid. Cycles (which the service refuses, but
    old data might hold) are cut.
    """
    # Forward to the newest, from the stored row (the caller's instance may predate a
    # supersession).
    tip, seen = Fragment.objects.get(pk=fragment.pk), {fragment.pk}
    while tip.superseded_by_id and tip.superseded_by_id not in seen:
        tip = Fragment.objects.get(pk=tip.superseded_by_id)
        seen.add(tip.pk)
    # Backward from the newest, breadth first: depth = supersessions between it and the tip.
    depth = {tip.pk: 0}
    nodes = {tip.pk: tip}
    frontier = [tip.pk]
    while frontier:
        older = list(Fragment.objects.filter(superseded_by_id__in=frontier)
                     .exclude(pk__in=list(depth)))
        frontier = []
        for node in older:
            depth[node.pk] = depth[node.superseded_by_id] + 1
            nodes[node.pk] = node
            frontier.append(node.pk)
    return sorted(nodes.values(), key=lambda f: (-depth[f.pk], f.valid_from, f.pk))
