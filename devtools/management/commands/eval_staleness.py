"""``manage.py eval_staleness [--pairs JSONL] [--errors] [--json]``: precision and recall of
the contradiction detector on the labelled fragment pairs (``tests/governance/
staleness_pairs.jsonl``). The detector is evaluated directly on each pair — it is a pure
function of two fragments and their lineage (``contexts.governance.detector``) — so no
organization is created and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from devtools.staleness_eval import DEFAULT_PAIRS, EvalReport, evaluate, load_pairs


def _line(name: str, report: EvalReport) -> str:
    return (f"{name:<10} {len(report.outcomes):>4} pairs  tp {report.tp:>3}  fp {report.fp:>3}  "
            f"fn {report.fn:>3}  tn {report.tn:>3}  precision {report.precision:.3f}  "
            f"recall {report.recall:.3f}")


class Command(BaseCommand):
    help = "Score the staleness contradiction detector on the labelled fragment pairs."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--pairs", default=str(DEFAULT_PAIRS), help="labelled pairs (JSONL)")
        parser.add_argument("--errors", action="store_true",
                            help="list every pair the detector gets wrong")
        parser.add_argument("--json", action="store_true",
                            help="end with one JSON line of the totals")

    def handle(self, *args, pairs: str, errors: bool, json: bool, **options) -> None:
        path = Path(pairs)
        if not path.is_file():
            raise CommandError(f"no labelled pairs at {path}")
        data = load_pairs(path)
        report = evaluate(data)
        self.stdout.write(_line("all", report))
        for split in sorted({p.get("split", "") for p in data} - {""}):
            self.stdout.write(_line(split, evaluate([p for p in data
                                                     if p.get("split") == split])))
        for relation, cells in sorted(report.by_relation().items()):
            self.stdout.write(f"  {relation:<16} " + "  ".join(
                f"{cell} {cells[cell]}" for cell in ("tp", "fp", "fn", "tn")))
        if errors:
            for outcome in report.errors:
                self.stdout.write(f"  {outcome.pair_id}: labelled {outcome.label}, predicted "
                                  f"{outcome.predicted} ({outcome.edit}) {outcome.why}")
        if json:
            self.stdout.write(_dumps({
                "pairs": len(report.outcomes), "tp": report.tp, "fp": report.fp,
                "fn": report.fn, "tn": report.tn, "precision": round(report.precision, 4),
                "recall": round(report.recall, 4)}))


def _dumps(value: dict) -> str:
    # The option is called --json, which shadows the module inside handle().
    return json.dumps(value, sort_keys=True)
