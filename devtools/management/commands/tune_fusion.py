"""``manage.py tune_fusion DATASET --split train``: choose RRF ``k``, leg weights and lexical
field boosts on a train/dev split (never test) — the evidence behind the defaults in
``docs/retrieval-quality.md``.

Each query runs once per leg through the real retrieval function; the grid is then fused
offline with the same ``fuse.rrf`` the pipeline uses, so the search is cheap and exact.
"""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from contexts.evaluation import dataset as datasets
from contexts.evaluation import metrics
from contexts.evaluation.harness import DEPTH, EvalOptions, Harness, create_org, drop_org
from contexts.indexes.indexing import lexical_index
from contexts.models import Fragment, SourcePointer
from contexts.retrieval import RetrievalRequest, adaptive, retrieve
from contexts.retrieval.fuse import convex, rrf
from contexts.retrieval.types import FusionConfig
from devtools import fusion_fit

K_GRID = (10, 20, 40, 60, 100)
# A --fit spec ending in this drops each query's own document from its rankings (a set whose
# queries are documents of its corpus: `tune_fusion --fit PARAGRAPHS:dev:ignore-identical-ids`).
IGNORE_IDENTICAL = ":ignore-identical-ids"
LEXICAL_WEIGHTS = (0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.25)
CONVEX_WEIGHTS = (0.1, 0.2, 0.3, 0.5, 0.7, 0.85, 1.0, 1.2, 1.5)
# The lexical leg is one BM25 field over title+body (no per-corpus field boosts, issue 19); the
# grid keeps only the identifier clauses' weight, which plain-word queries never reach.
BOOSTS = ({"text": 1.0, "identifiers": 2.0, "symbols": 2.0, "paths": 2.0, "phrases": 1.0},
          {"text": 1.0, "identifiers": 1.0, "symbols": 1.0, "paths": 1.0, "phrases": 1.0})


class Command(BaseCommand):
    help = "Grid-search fusion parameters on a train/dev split and print the best settings."

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", nargs="?")
        parser.add_argument("--split", default="train")
        parser.add_argument("--limit", type=int)
        parser.add_argument("--json", dest="json_out")
        parser.add_argument(
            "--fit", nargs="+", metavar="DATASET:SPLIT",
            help="fit the adaptive-fusion model on these train/dev splits and write it to "
                 "contexts/retrieval/fusion_model.json (e.g. ../shared/datasets/scifact:train; "
                 "append :ignore-identical-ids for a set whose queries are its documents)")
        parser.add_argument("--cache", default=str(settings.VAR_DIR / "tune"),
                            help="where --fit keeps each split's per-query results")
        parser.add_argument("--refresh", action="store_true",
                            help="with --fit: run the queries again instead of the cache")
        parser.add_argument("--model-version", default=None,
                            help="with --fit: the version recorded in every trace")

    def handle(self, *args, dataset: str | None, split: str, limit: int | None,
               json_out: str | None, fit: list[str] | None = None, **options) -> None:
        if fit:
            self._fit(fit, Path(options["cache"]), options["refresh"],
                      options["model_version"], json_out)
            return
        if dataset is None:
            raise CommandError("name a DATASET, or give --fit DATASET:SPLIT …")
        if split == "test":
            self.stderr.write("refusing to tune on a test split")
            return
        data = datasets.load(dataset, split)
        harness = Harness(data, EvalOptions(pipelines=("bm25", "dense"), split=split,
                                            limit=limit), log=self.stdout.write)
        queries = harness._queries()
        org = create_org(data.name)
        try:
            harness._ingest(org)
            ids = dict(Fragment.objects.filter(org=org).values_list("public_id", "pk"))
            self.doc_of = {
                pk: harness.path_to_doc[path] for pk, path in
                SourcePointer.objects.filter(fragment__org=org).values_list(
                    "fragment_id", "document__path") if path in harness.path_to_doc}
            namespaces = dict(Fragment.objects.filter(org=org).values_list("pk", "namespace"))
            scope_ids = harness.scope_ids[next(iter(harness.scope_ids))]
            dense_runs, lexical_runs = {}, {b: {} for b in range(len(BOOSTS))}
            for qid, text in queries:
                request = RetrievalRequest(query=text, org_id=org.pk, scope_ids=scope_ids,
                                           budget_tokens=10**7, k_dense=DEPTH, k_lexical=DEPTH,
                                           legs=("dense",), max_fragments=DEPTH,
                                           include_pins=False, count_use=False)
                result = retrieve(request, record_trace=False)
                dense_runs[qid] = [(c.fragment.pk, c.candidate.scores.get("dense", 0.0))
                                   for c in result.fragments]
                for b, boosts in enumerate(BOOSTS):
                    hits = lexical_index(org.pk).search(text, allowed_scope_ids=scope_ids,
                                                        limit=DEPTH, field_boosts=boosts)
                    lexical_runs[b][qid] = [(ids[f], s) for f, s in hits if f in ids]
            rows = self._grid(harness, queries, dense_runs, lexical_runs, namespaces)
        finally:
            drop_org(org.pk)
        rows.sort(key=lambda row: -row["ndcg@10"])
        for row in rows[:12]:
            self.stdout.write(json.dumps(row))
        if json_out:
            with open(json_out, "w") as out:
                json.dump(rows, out, indent=1)

    def _fit(self, specs: list[str], cache: Path, refresh: bool, version: str | None,
             json_out: str | None) -> None:
        sets = []
        for spec in specs:
            ignore_identical_ids = spec.endswith(IGNORE_IDENTICAL)
            spec = spec.removesuffix(IGNORE_IDENTICAL)
            path, _, split = spec.rpartition(":")
            if not path or not split:
                raise CommandError(f"{spec!r}: give DATASET:SPLIT, e.g. scifact:train")
            if split == "test":
                raise CommandError(f"{spec!r}: the fusion model is never fitted on a test split")
            sets.append(fusion_fit.collect_cached(path, split, cache, self.stdout.write,
                                                  refresh=refresh,
                                                  ignore_identical_ids=ignore_identical_ids))
        version = version or f"fusion-{timezone.now():%Y%m%d}"
        model = fusion_fit.fit(sets, version=version)
        summary = fusion_fit.report(sets, model, self.stdout.write)
        adaptive.MODEL_PATH.write_text(json.dumps(model.as_json(report=summary), indent=1) + "\n")
        self.stdout.write(f"wrote {adaptive.MODEL_PATH} ({version})")
        if json_out:
            Path(json_out).write_text(json.dumps(summary, indent=1))

    def _score(self, harness, queries, ranking_of) -> float:
        values = []
        for qid, _text in queries:
            ranked, seen = [], set()
            for pk in ranking_of(qid):
                doc = self.doc_of.get(pk)
                if doc is not None and doc not in seen:
                    seen.add(doc)
                    ranked.append(doc)
            values.append(metrics.ndcg_at_k(ranked, harness.dataset.qrels[qid], 10))
        return statistics.fmean(values)

    def _grid(self, harness, queries, dense_runs, lexical_runs, namespaces) -> list[dict]:
        rows = [{"legs": "dense", "ndcg@10": round(self._score(
            harness, queries, lambda q: [pk for pk, _ in dense_runs[q]]), 4)}]
        for b, runs in lexical_runs.items():
            rows.append({"legs": "bm25", "boosts": BOOSTS[b], "ndcg@10": round(self._score(
                harness, queries, lambda q, runs=runs: [pk for pk, _ in runs[q]]), 4)})
        for b, k, w in itertools.product(lexical_runs, K_GRID, LEXICAL_WEIGHTS):
            config = FusionConfig(k=k, weights=(("dense", 1.0), ("lexical", w)),
                                  namespace_weights=(), method="rrf")

            def fused(qid, b=b, config=config):
                candidates = rrf({"lexical": lexical_runs[b][qid], "dense": dense_runs[qid]},
                                 config, namespaces)
                return [c.fragment_id for c in
                        sorted(candidates.values(), key=lambda c: (-c.rrf, c.fragment_id))]

            rows.append({"legs": "hybrid", "boosts": BOOSTS[b], "rrf_k": k,
                         "lexical_weight": w,
                         "ndcg@10": round(self._score(harness, queries, fused), 4)})
        for b, w in itertools.product(lexical_runs, CONVEX_WEIGHTS):
            config = FusionConfig(weights=(("dense", 1.0), ("lexical", w)),
                                  namespace_weights=(), method="convex")

            def combined(qid, b=b, config=config):
                candidates = convex({"lexical": lexical_runs[b][qid],
                                     "dense": dense_runs[qid]}, config, namespaces)
                return [c.fragment_id for c in sorted(
                    candidates.values(), key=lambda c: (-c.relevance, c.fragment_id))]

            rows.append({"legs": "hybrid", "method": "convex", "boosts": BOOSTS[b],
                         "lexical_weight": w,
                         "ndcg@10": round(self._score(harness, queries, combined), 4)})
        return rows
