"""Is an older fragment contradicted by a newer one of its lineage? A pure function of the two
fragments and how they are related — no database — so ``manage.py eval_staleness`` scores it
offline on the labelled pairs in ``tests/governance/staleness_pairs.jsonl`` and the scan
(:func:`contexts.governance.staleness.contradicted`) calls the very same function.

Contradictions are sought only within one **lineage**:

* ``same-section`` — both come from the same source document under the same heading path;
* ``same-definition`` — the same document and the same symbol;
* ``supersession`` — one supersedes the other (a chain, or a ``supersedes`` link);
* ``link`` — one cites the other (a Markdown or front-matter link, a reference).

Two fragments of different files that merely look alike (two migrations' ``max_length``, two
services' retry counts) are never compared: similar text is not the same subject.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contexts.governance import contradictions
from contexts.governance.text_rules import CONTRADICTION_CLASSES, text_class

SAME_SECTION, SAME_DEFINITION = "same-section", "same-definition"
SUPERSESSION, LINK = "supersession", "link"
LINEAGES = (SAME_SECTION, SAME_DEFINITION, SUPERSESSION, LINK)
# At most this many differences go into one reason: the first ones make the point.
MAX_DIFFERENCES = 3


@dataclass(frozen=True)
class Passage:
    """What the detector reads of a fragment."""

    title: str
    body: str
    kind: str = "prose"
    path: str = ""
    heading_path: tuple[str, ...] = ()
    symbol: str = ""
    language: str = ""

    @property
    def text_class(self) -> str:
        return text_class(self.kind, self.path, self.heading_path, self.body, self.language)


@dataclass(frozen=True)
class Relation:
    """How two fragments are related: a lineage (or ``None``) and where, in words."""

    lineage: str | None
    where: str = ""

    def describe(self) -> str:
        """Where the newer fragment is, relative to the older: "in the same section (…)"."""
        where = f" ({self.where})" if self.where else ""
        return {
            SAME_SECTION: f"in the same section{where}",
            SAME_DEFINITION: f"for the same definition{where}",
            SUPERSESSION: f"in its supersession chain{where}",
            LINK: f"linked with it{where}",
        }.get(self.lineage or "", "unrelated")


@dataclass(frozen=True)
class Finding:
    relation: Relation
    differences: list[contradictions.Difference] = field(default_factory=list)


def detect(older: Passage, newer: Passage, relation: Relation,
           min_overlap: float = 0.5) -> Finding | None:
    """A finding when ``newer`` states differently something ``older`` states, else None."""
    if relation.lineage not in LINEAGES:
        return None
    if older.text_class not in CONTRADICTION_CLASSES or \
            newer.text_class not in CONTRADICTION_CLASSES:
        return None
    found = contradictions.differences(older.body, newer.body, min_overlap)
    if not found:
        return None
    return Finding(relation, found[:MAX_DIFFERENCES])
