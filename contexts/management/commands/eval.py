"""``manage.py eval DATASET_DIR [--split test] [--pipelines bm25,dense,hybrid,hybrid+rerank]
[--ignore-identical-ids] [--json OUT] [--limit N] [--chunk] [--compare-to RUN_ID]
[--fail-below [PIPELINE.][TYPE.]METRIC=VALUE ...]``.

Scores retrieval on a BEIR-layout dataset through the real ingestion and retrieval code (see
``docs/evaluation.md``). Exit status 1 when a ``--fail-below`` gate fails — a CI quality gate.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from contexts.evaluation.dataset import DatasetError, load
from contexts.evaluation.harness import PIPELINES, EvalOptions, EvalReport, Harness
from contexts.evaluation.report import Gate, save_run, table
from contexts.models import EvalRun


class Command(BaseCommand):
    help = "Evaluate retrieval quality on a BEIR-layout dataset (through the real pipeline)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="directory with corpus.jsonl (or source.txt), "
                                            "queries.jsonl and qrels/<split>.tsv")
        parser.add_argument("--split", default="test")
        parser.add_argument("--pipelines", default=",".join(PIPELINES),
                            help=f"comma-separated subset of {', '.join(PIPELINES)}")
        parser.add_argument("--ignore-identical-ids", action="store_true",
                            help="drop a retrieved document whose id equals the query id")
        parser.add_argument("--json", dest="json_out", help="write the metrics to this file")
        parser.add_argument("--limit", type=int, help="only the first N queries of the split")
        parser.add_argument("--source", help="ingest this source.txt instead of the dataset's "
                                             "own (e.g. tests/golden/source-with-tests.txt)")
        parser.add_argument("--chunk", action="store_true",
                            help="chunk documents normally instead of one fragment each")
        parser.add_argument("--compare-to", help="public id of an earlier run (eval_…): show "
                                                 "the change of every metric")
        parser.add_argument("--fail-below", action="append", default=[],
                            metavar="[PIPELINE.][TYPE.]METRIC=VALUE",
                            help="exit 1 when the metric (over the queries of metadata.type "
                                 "TYPE, when given) is below VALUE (repeatable)")

    def handle(self, *args, dataset: str, split: str, pipelines: str,
               ignore_identical_ids: bool, json_out: str | None, limit: int | None,
               chunk: bool, compare_to: str | None, fail_below: list[str],
               source: str | None = None, **options) -> None:
        names = tuple(dict.fromkeys(p.strip() for p in pipelines.split(",") if p.strip()))
        unknown = [n for n in names if n not in PIPELINES]
        if unknown or not names:
            raise CommandError(f"unknown pipeline(s) {', '.join(unknown) or '(none)'}; "
                               f"choose from {', '.join(PIPELINES)}")
        try:
            gates = [Gate.parse(text) for text in fail_below]
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        baseline = None
        if compare_to:  # checked before the (long) run, not after it
            baseline = EvalRun.objects.filter(public_id=compare_to).first()
            if baseline is None:
                raise CommandError(f"no evaluation run {compare_to!r}")
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        try:
            data = load(dataset, split, source)
            run_options = EvalOptions(split=split, pipelines=names,
                                      ignore_identical_ids=ignore_identical_ids, limit=limit,
                                      chunk=chunk)
            report = Harness(data, run_options, log=self._log).run()
        except (DatasetError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

        run = save_run(report, {"ignore_identical_ids": ignore_identical_ids, "limit": limit,
                                "chunk": chunk, "path": str(Path(dataset).resolve()),
                                "source": str(Path(source).resolve()) if source else None})
        self._print(report, run, baseline)
        if json_out:
            payload = {**report.as_json(), "run_id": run.public_id}
            Path(json_out).write_text(json.dumps(payload, indent=2) + "\n")
            self.stdout.write(f"wrote {json_out}")
        if report.cleanup_error:
            raise CommandError(report.cleanup_error)
        failures = [failure for gate in gates for failure in gate.failures(report)]
        if failures:
            for failure in failures:
                self.stderr.write(f"FAIL {failure}")
            raise CommandError(f"{len(failures)} quality gate(s) failed", returncode=1)
        if gates:
            self.stdout.write(f"all {len(gates)} quality gate(s) passed")

    def _log(self, message: str) -> None:
        self.stdout.write(message)
        self.stdout.flush()

    def _print(self, report: EvalReport, run: EvalRun, baseline: EvalRun | None) -> None:
        out = self.stdout
        out.write("")
        out.write(f"{report.dataset} / {report.split}: {report.queries} queries, "
                  f"{report.documents} documents ({report.corpus_kind}) → {report.fragments} "
                  f"fragments, ingested in {report.ingest_seconds:.1f} s")
        rows = {name: result.metrics for name, result in report.pipelines.items()}
        if baseline is not None:
            same = "same" if baseline.config_hash == report.config_hash else "different"
            out.write(f"compared to {baseline.public_id} ({baseline.dataset}/{baseline.split}, "
                      f"{baseline.created_at:%Y-%m-%d %H:%M}, {same} configuration)")
            if (baseline.dataset, baseline.split) != (report.dataset, report.split):
                out.write("warning: the baseline is a different dataset or split")
        if rows:
            out.write(table(rows, baseline=baseline.metrics if baseline else None))
        for name, reason in report.skipped.items():
            out.write(f"{name}: skipped — {reason}")
        for name, result in report.pipelines.items():
            if result.by_type:
                out.write(f"\n{name} by query type")
                baseline_types = ((baseline.metrics or {}).get(name, {}).get("by_type")
                                  if baseline else None)
                out.write(table(result.by_type, first="type", baseline=baseline_types,
                                extra=("queries",)))
        for name, result in report.pipelines.items():
            if result.per_scope:
                out.write(f"\n{name} by scope")
                baseline_scopes = (baseline.per_scope or {}).get(name) if baseline else None
                out.write(table(result.per_scope, first="scope", baseline=baseline_scopes,
                                extra=("queries",)))
        out.write(f"\nstored as {run.public_id} (configuration {report.config_hash[:12]})")
