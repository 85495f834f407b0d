"""Scoring the contradiction detector on labelled fragment pairs (``manage.py eval_staleness``).

The detector (:func:`contexts.governance.detector.detect`) is evaluated directly on each pair —
no organization, no database — because it is a pure function of the two fragments and their
lineage, and the scan calls the same function. A pair is predicted ``contradicted`` when the
detector returns a finding for (``a`` older, ``b`` newer, relation).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from contexts.governance.detector import Passage, Relation, detect

CONTRADICTED = "contradicted"
DEFAULT_PAIRS = Path(settings.BASE_DIR) / "tests" / "governance" / "staleness_pairs.jsonl"


@dataclass
class Outcome:
    pair_id: str
    label: str
    predicted: str
    edit: str
    relation: str
    why: str = ""


@dataclass
class EvalReport:
    outcomes: list[Outcome] = field(default_factory=list)

    def _count(self, label: str, predicted: str) -> int:
        return sum(o.label == label and o.predicted == predicted for o in self.outcomes)

    @property
    def tp(self) -> int:
        return self._count(CONTRADICTED, CONTRADICTED)

    @property
    def fp(self) -> int:
        return sum(o.label != CONTRADICTED and o.predicted == CONTRADICTED
                   for o in self.outcomes)

    @property
    def fn(self) -> int:
        return sum(o.label == CONTRADICTED and o.predicted != CONTRADICTED
                   for o in self.outcomes)

    @property
    def tn(self) -> int:
        return len(self.outcomes) - self.tp - self.fp - self.fn

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    def by_relation(self) -> dict[str, Counter]:
        table: dict[str, Counter] = {}
        for o in self.outcomes:
            cell = ("tp" if o.predicted == o.label == CONTRADICTED else
                    "fp" if o.predicted == CONTRADICTED else
                    "fn" if o.label == CONTRADICTED else "tn")
            table.setdefault(o.relation, Counter())[cell] += 1
        return table

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.label != o.predicted]


def passage(data: dict) -> Passage:
    return Passage(title=data.get("title", ""), body=data["body"],
                   kind=data.get("kind", "prose"), path=data.get("path", ""),
                   heading_path=tuple(data.get("heading") or ()),
                   symbol=data.get("symbol", ""), language=data.get("language", ""))


def load_pairs(path: Path = DEFAULT_PAIRS) -> list[dict]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def evaluate(pairs: list[dict], min_overlap: float | None = None) -> EvalReport:
    overlap = (settings.GOVERNANCE_CONTRADICTION_MIN_OVERLAP if min_overlap is None
               else min_overlap)
    report = EvalReport()
    for pair in pairs:
        lineage = pair["relation"]["type"]
        relation = Relation(None if lineage == "none" else lineage, pair["a"].get("path", ""))
        finding = detect(passage(pair["a"]), passage(pair["b"]), relation, overlap)
        report.outcomes.append(Outcome(
            pair["id"], pair["label"], CONTRADICTED if finding else "not", pair.get("edit", ""),
            lineage, "; ".join(d.describe() for d in finding.differences) if finding else ""))
    return report
