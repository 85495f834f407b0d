"""Which active fragments of an organization share a lineage — the only pairs the staleness
scan compares for contradictions (:mod:`.detector` says why).

Read from the database in a few set-based queries: source pointers (same document and heading
path, or same document and symbol), supersession (``superseded_by`` and ``supersedes`` links)
and citation links. Pairs are keyed ``(smaller pk, larger pk)``; when two fragments are related
several ways, the closest relation wins (same section, then definition, supersession, link).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from itertools import combinations

from contexts.governance.detector import (
    LINK,
    SAME_DEFINITION,
    SAME_SECTION,
    SUPERSESSION,
    Relation,
)
from contexts.models import Fragment, Link, SourcePointer
from contexts.models.fragments import LinkKind

_RANK = {SAME_SECTION: 0, SAME_DEFINITION: 1, SUPERSESSION: 2, LINK: 3}
# A heading that a long document repeats in many places would pair everything under it;
# groups this large are not one section's chunks (an index, a generated table) and are skipped.
MAX_GROUP = 40


def _keep(found: dict[tuple[int, int], Relation], a: int, b: int, relation: Relation) -> None:
    if a == b:
        return
    key = (min(a, b), max(a, b))
    current = found.get(key)
    if current is None or _RANK[relation.lineage] < _RANK[current.lineage]:
        found[key] = relation


def lineage_pairs(org_id: int, fragment_ids: Collection[int]
                  ) -> dict[tuple[int, int], Relation]:
    """{(a, b): relation} for every pair of the given (active) fragments sharing a lineage."""
    wanted = set(fragment_ids)
    found: dict[tuple[int, int], Relation] = {}
    sections: dict[tuple[int, tuple[str, ...]], set[int]] = defaultdict(set)
    definitions: dict[tuple[int, str], set[int]] = defaultdict(set)
    paths: dict[int, str] = {}
    for fragment_id, document_id, path, heading_path, symbol in (
            SourcePointer.objects.filter(org_id=org_id, fragment_id__in=wanted)
            .values_list("fragment_id", "document_id", "document__path",
                         "fragment__heading_path", "fragment__symbol")):
        paths[document_id] = path
        if heading_path:
            sections[(document_id, tuple(heading_path))].add(fragment_id)
        if symbol:
            definitions[(document_id, symbol)].add(fragment_id)
    for (document_id, heading_path), members in sections.items():
        if len(members) <= MAX_GROUP:
            where = " › ".join([paths[document_id], *heading_path])
            for a, b in combinations(sorted(members), 2):
                _keep(found, a, b, Relation(SAME_SECTION, where))
    for (document_id, symbol), members in definitions.items():
        if len(members) <= MAX_GROUP:
            for a, b in combinations(sorted(members), 2):
                _keep(found, a, b, Relation(SAME_DEFINITION, f"{paths[document_id]} ({symbol})"))
    for older, newer in (Fragment.objects.filter(org_id=org_id, pk__in=wanted,
                                                 superseded_by_id__in=wanted)
                         .values_list("pk", "superseded_by_id")):
        _keep(found, older, newer, Relation(SUPERSESSION))
    for source, target, kind in (Link.objects.filter(org_id=org_id, source_id__in=wanted,
                                                     target_id__in=wanted)
                                 .values_list("source_id", "target_id", "kind")):
        if kind == LinkKind.SUPERSEDES:
            _keep(found, source, target, Relation(SUPERSESSION, "a supersedes link"))
        else:
            _keep(found, source, target, Relation(LINK, f"a {LinkKind(kind).label}"))
    return found
