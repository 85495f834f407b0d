"""``manage.py eval`` end to end on a tiny BEIR dataset: the real ingestion lane, the real
``retrieve()``, the real PostgreSQL, pgvector and tantivy — and nothing left behind."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import Organization, Repository
from contexts.models import EvalRun, Fragment

# Committed data, as in a real run: the organization's embedding partition cannot be dropped
# inside the transaction that filled it (deferred constraint triggers are still pending).
pytestmark = pytest.mark.django_db(transaction=True)

METRICS = {"ndcg@10", "recall@10", "recall@100", "mrr@10", "p50_ms", "p95_ms"}


def run_eval(dataset, *args: str, capsys=None) -> str:
    call_command("eval", str(dataset), *args)
    return capsys.readouterr().out if capsys else ""


def test_a_tiny_dataset_is_scored_end_to_end_and_the_throwaway_org_is_gone(
        tiny, index_dir, tmp_path, capsys):
    before = set(Organization.objects.values_list("pk", flat=True))
    out_file = tmp_path / "out.json"
    out = run_eval(tiny, "--pipelines", "bm25,dense,hybrid,hybrid+rerank", "--json",
                   str(out_file), capsys=capsys)

    report = json.loads(out_file.read_text())
    assert report["dataset"] == "tiny" and report["split"] == "test"
    assert set(report["pipelines"]) == {"bm25", "dense", "hybrid"}
    for values in report["pipelines"].values():
        assert set(values) == METRICS
        assert all(isinstance(v, float) for v in values.values())
        assert 0.0 <= values["ndcg@10"] <= 1.0 and values["recall@100"] == 1.0
    assert report["queries"] == 5 and report["documents"] == 10
    # The exact-keyword query: BM25 puts the one document with the made-up word first.
    assert report["per_query"]["bm25"]["q1"]["top"][0] == "d3"
    assert report["per_query"]["bm25"]["q1"]["mrr@10"] == 1.0
    # No cross-encoder in tests: the rerank pipeline is skipped with a reason, not faked.
    assert "cross-encoder" in report["skipped"]["hybrid+rerank"]
    assert "hybrid+rerank: skipped" in out
    assert re.search(r"^bm25\s+\d\.\d{4}", out, re.MULTILINE), out  # the table
    assert "by query type" not in out  # an untyped set reports as before

    run = EvalRun.objects.get(public_id=report["run_id"])
    assert re.fullmatch(r"[0-9a-f]{64}", run.config_hash)
    assert run.metrics == report["pipelines"] and run.queries == 5
    assert set(run.config["pipeline"]["pipelines"]) == {"bm25", "dense", "hybrid",
                                                        "hybrid+rerank"}

    # Deleted afterwards: the organization, everything ingested into it, its lexical index.
    assert set(Organization.objects.values_list("pk", flat=True)) == before
    assert not Organization.objects.filter(slug__startswith="eval-").exists()
    assert not Fragment.objects.exists()
    assert not any(index_dir.glob("org-*"))


def test_the_same_configuration_hashes_alike_and_compare_to_shows_deltas(
        tiny, index_dir, tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    run_eval(tiny, "--pipelines", "bm25", "--json", str(first))
    base = json.loads(first.read_text())["run_id"]
    out = run_eval(tiny, "--pipelines", "bm25", "--json", str(second), "--compare-to", base,
                   capsys=capsys)
    assert f"compared to {base}" in out and "same configuration" in out
    assert "(+0.0000)" in out  # same content, same configuration: no quality change
    runs = EvalRun.objects.filter(public_id__in=[base, json.loads(second.read_text())["run_id"]])
    assert len({r.config_hash for r in runs}) == 1

    # A different pipeline set is a different configuration.
    run_eval(tiny, "--pipelines", "dense", "--json", str(second))
    assert EvalRun.objects.get(
        public_id=json.loads(second.read_text())["run_id"]).config_hash != runs[0].config_hash


def test_fail_below_is_a_quality_gate(tiny, index_dir):
    # Per pipeline or for every pipeline run; passing gates exit 0.
    call_command("eval", str(tiny), "--pipelines", "bm25,hybrid",
                 "--fail-below", "bm25.mrr@10=0.2", "--fail-below", "recall@100=0.9")
    with pytest.raises(CommandError) as failed:
        call_command("eval", str(tiny), "--pipelines", "bm25", "--limit", "2",
                     "--fail-below", "bm25.ndcg@10=1.01")
    assert failed.value.returncode == 1 and "1 quality gate(s) failed" in str(failed.value)
    # A gate on a pipeline that did not run fails rather than passing silently.
    with pytest.raises(CommandError):
        call_command("eval", str(tiny), "--pipelines", "bm25", "--limit", "1",
                     "--fail-below", "hybrid+rerank.ndcg@10=0.1")
    assert not Organization.objects.filter(slug__startswith="eval-").exists()


@pytest.mark.parametrize("args, message", [
    (["--fail-below", "ndcg@11=0.5"], "metric must be one of"),
    (["--fail-below", "p95_ms=100"], "metric must be one of"),
    (["--fail-below", "ndcg@10"], "expected [PIPELINE.][TYPE.]METRIC=VALUE"),
    (["--fail-below", "hybrid..mrr@10=0.5"], "empty query type"),
    (["--pipelines", "bm25,colbert"], "unknown pipeline"),
    (["--compare-to", "eval_nosuchrun"], "no evaluation run"),
    (["--split", "dev"], "no qrels/dev.tsv"),
    (["--source", "no/such/source.txt"], "no such source manifest"),
])
def test_bad_arguments_fail_before_anything_is_ingested(tiny, index_dir, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("eval", str(tiny), *args)
    assert not Organization.objects.filter(slug__startswith="eval-").exists()


def test_ignore_identical_ids_drops_the_query_document_itself(make_dataset, index_dir, tmp_path):
    # ArguAna-style: the query is itself a corpus document and must not count as a hit.
    docs = {"q1": ("Counter", "quokkaflux retries should be capped at three"),
            "d1": ("Argument", "quokkaflux retries should never be capped"),
            "d2": ("Other", "deploy on weekdays only")}
    dataset = make_dataset("args", docs=docs, queries={"q1": "quokkaflux retries capped"},
                           qrels={"q1": {"d1": 1}})
    out_file = tmp_path / "o.json"
    call_command("eval", str(dataset), "--pipelines", "bm25", "--ignore-identical-ids",
                 "--json", str(out_file))
    top = json.loads(out_file.read_text())["per_query"]["bm25"]["q1"]["top"]
    assert "q1" not in top and top[0] == "d1"


def test_scopes_tsv_isolates_scopes_and_breaks_metrics_down(make_dataset, index_dir, tmp_path,
                                                             capsys):
    alpha = [f"d{i}" for i in range(1, 6)]
    scopes = ([("doc", d, "alpha") for d in alpha]
              + [("doc", f"d{i}", "beta team") for i in range(6, 11)]
              + [("query", "q1", "alpha"), ("query", "q4", "alpha"),
                 ("query", "q2", "beta team"), ("query", "q5", "beta team")])
    dataset = make_dataset("scoped", scopes=scopes)
    out_file = tmp_path / "s.json"
    out = run_eval(dataset, "--pipelines", "bm25,hybrid", "--json", str(out_file),
                   capsys=capsys)
    report = json.loads(out_file.read_text())

    per_scope = report["per_scope"]["hybrid"]
    assert {k: v["queries"] for k, v in per_scope.items()} == {
        "(organization)": 1, "alpha": 2, "beta team": 2}
    assert per_scope["alpha"]["recall@10"] == 1.0
    # q2's answer (d2) lives in alpha; from beta it must be invisible.
    assert report["per_query"]["hybrid"]["q2"]["recall@100"] == 0.0
    for pipeline in ("bm25", "hybrid"):
        assert not set(report["per_query"][pipeline]["q2"]["top"]) & set(alpha)
        assert not set(report["per_query"][pipeline]["q1"]["top"]) - set(alpha)
    # The unscoped query (q3, answer d9 in beta) sees the whole organization.
    assert report["per_query"]["hybrid"]["q3"]["recall@10"] == 1.0
    assert "hybrid by scope" in out and "beta team" in out
    assert EvalRun.objects.get(public_id=report["run_id"]).per_scope["hybrid"]["alpha"]
    assert not Repository.objects.filter(org__slug__startswith="eval-").exists()


def test_a_python_corpus_lands_in_the_code_namespace(make_dataset, index_dir, tmp_path):
    docs = {f"c{i}": ("", f"def helper_{i}(values):\n    return sorted(values)[{i}]\n")
            for i in range(4)}
    docs["c9"] = ("", "def parse_quokkaflux(text):\n    return int(text.strip())\n")
    dataset = make_dataset("code", docs=docs, queries={"q": "parse quokkaflux from text"},
                           qrels={"q": {"c9": 1}})
    out_file = tmp_path / "c.json"
    call_command("eval", str(dataset), "--pipelines", "bm25", "--json", str(out_file))
    report = json.loads(out_file.read_text())
    assert report["per_query"]["bm25"]["q"]["top"][0] == "c9"
    assert EvalRun.objects.get(public_id=report["run_id"]).config["pipeline"]["chunker"] \
        .endswith("+whole-document")


def test_chunk_mode_ranks_a_document_at_its_best_chunk(tiny, index_dir, tmp_path):
    out_file = tmp_path / "k.json"
    call_command("eval", str(tiny), "--pipelines", "bm25", "--chunk", "--json", str(out_file))
    report = json.loads(out_file.read_text())
    assert report["per_query"]["bm25"]["q1"]["top"][0] == "d3"
    assert all(len(set(q["top"])) == len(q["top"]) for q in report["per_query"]["bm25"].values())
    run = EvalRun.objects.get(public_id=report["run_id"])
    assert "whole-document" not in run.config["pipeline"]["chunker"]


def test_cleanup_runs_when_the_run_is_interrupted(tiny, index_dir, monkeypatch):
    from contexts.evaluation import harness

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(harness, "retrieve", interrupted)  # Ctrl-C during the first query
    with pytest.raises(KeyboardInterrupt):
        call_command("eval", str(tiny), "--pipelines", "bm25")
    assert not Organization.objects.filter(slug__startswith="eval-").exists()
    assert not Fragment.objects.exists()
    assert not any(index_dir.glob("org-*"))


def test_typed_queries_break_every_metric_down_by_type(make_dataset, index_dir, tmp_path,
                                                       capsys):
    # q1 names a made-up identifier; q4 is left untyped on purpose.
    dataset = make_dataset("typed", types={"q1": "id", "q2": "nl", "q3": "nl", "q5": "nl"})
    out_file = tmp_path / "t.json"
    out = run_eval(dataset, "--pipelines", "bm25,hybrid", "--json", str(out_file),
                   capsys=capsys)
    report = json.loads(out_file.read_text())

    for pipeline in ("bm25", "hybrid"):
        values = report["pipelines"][pipeline]
        by_type = values["by_type"]
        assert set(values) == METRICS | {"by_type"}
        assert {k: v["queries"] for k, v in by_type.items()} == {"id": 1, "nl": 3,
                                                                 "(untyped)": 1}
        per_query = report["per_query"][pipeline]
        assert per_query["q2"]["type"] == "nl" and per_query["q4"]["type"] == "(untyped)"
        for kind, members in {"id": ["q1"], "nl": ["q2", "q3", "q5"],
                              "(untyped)": ["q4"]}.items():
            assert set(by_type[kind]) == METRICS | {"queries"}
            for metric in ("ndcg@10", "recall@10", "recall@100", "mrr@10"):
                mean = sum(per_query[q][metric] for q in members) / len(members)
                assert by_type[kind][metric] == pytest.approx(mean, abs=1e-4), (kind, metric)
    assert report["pipelines"]["bm25"]["by_type"]["id"]["mrr@10"] == 1.0
    assert re.search(r"^hybrid by query type\ntype\s", out, re.MULTILINE), out
    assert re.search(r"^nl\s+\d\.\d{4}.*\s3$", out, re.MULTILINE), out
    # The stored run keeps the breakdown (for --compare-to).
    run = EvalRun.objects.get(public_id=report["run_id"])
    assert run.metrics["hybrid"]["by_type"]["nl"]["queries"] == 3

    # A gate can name a type; a type the set lacks fails rather than passing silently.
    call_command("eval", str(dataset), "--pipelines", "bm25", "--fail-below",
                 "bm25.id.mrr@10=1.0")
    with pytest.raises(CommandError) as failed:
        call_command("eval", str(dataset), "--pipelines", "bm25", "--fail-below",
                     "bm25.error.mrr@10=0.1")
    assert failed.value.returncode == 1
    assert "bm25.error.mrr@10: no query of type 'error'" in capsys.readouterr().err
    assert not Organization.objects.filter(slug__startswith="eval-").exists()
