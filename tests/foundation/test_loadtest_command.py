"""``manage.py loadtest`` keeps working: its question pool and stream (thousands of distinct
questions; none repeats unless a share is asked for), a short run against its own gunicorn over
REST and over MCP, then the raw capacity for the same stream, and a failing target makes it exit
non-zero. The real run (16 clients, 30–60 s) is in docs/performance.md."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.models import ApiToken
from devtools.questions import MIX, QuestionStream, build_pool
from tests.api.conftest import cast, world  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
SCOPES = [{"org_id": "demo"}, {"org_id": "demo", "repo_id": "contexts"}]
LAST_LINE = re.compile(r"throughput ([\d.]+) req/s, raw capacity ([\d.]+) req/s, ratio ([\d.]+); "
                       r"p50 ([\d.]+) ms, p99 ([\d.]+) ms; errors (\d+); cache hits ([\d.]+) %")
CPU = re.compile(r"^ *cpu a request +(.*) \(total [\d.]+ ms\)$", re.MULTILINE)
QUESTIONS = re.compile(r"questions +(\d+) questions asked, (\d+) distinct, (\d+) repeats")

command = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def no_datasets(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("no-datasets")


def test_the_pool_has_thousands_of_distinct_questions_of_every_kind(no_datasets):
    pool = build_pool(ROOT, no_datasets)  # from the checkout alone: the golden set, the corpus
    assert pool.size >= 5000
    questions = [q for kind in pool.kinds.values() for q in kind]
    assert len(set(questions)) == len(questions) == pool.size
    assert set(pool.kinds) == set(MIX) and all(len(pool.kinds[kind]) > 500 for kind in MIX)
    assert pool.sources["golden"] > 300 and "cosqa" not in pool.sources
    assert len(pool.missing) == 2 and "not found" in pool.summary()
    assert any(q.startswith('File "') and ", line " in q for q in pool.kinds["error"])


def test_the_shared_datasets_queries_join_the_pool(tmp_path, no_datasets):
    (tmp_path / "cosqa").mkdir()
    (tmp_path / "cosqa" / "queries.jsonl").write_text("".join(
        json.dumps({"_id": str(n), "text": f"python how to frobnicate {n} widgets"}) + "\n"
        for n in range(40)))
    pool = build_pool(ROOT, tmp_path)
    assert pool.sources["cosqa"] == 40 and pool.size == build_pool(ROOT, no_datasets).size + 40
    assert "python how to frobnicate 7 widgets" in pool.kinds["words"]


def test_no_question_repeats_at_share_zero(no_datasets):
    pool = build_pool(ROOT, no_datasets)
    stream = QuestionStream(pool, SCOPES)
    asked = [stream() for _ in range(5000)]
    assert len({ask.query for ask in asked}) == 5000
    assert stream.repeats == stream.exhausted == 0 and stream.distinct == 5000
    # Drawn in the mix's proportions, over the scopes and budgets.
    kind_of = {q: kind for kind, questions in pool.kinds.items() for q in questions}
    for kind, share in MIX.items():
        assert abs(sum(kind_of[ask.query] == kind for ask in asked) / 5000 - share) < 0.03
    assert len({tuple(ask.scope.items()) for ask in asked}) == 2
    assert len({ask.budget_tokens for ask in asked}) == 3


def test_a_repeat_share_repeats_earlier_asks_and_the_sequence_is_the_same_for_both_sides(
        no_datasets):
    pool = build_pool(ROOT, no_datasets)
    stream, again = (QuestionStream(pool, SCOPES, repeat_share=0.3) for _ in range(2))
    asked = [stream() for _ in range(4000)]
    assert asked == [again() for _ in range(4000)]  # the same seed: the same stream
    assert 0.27 < stream.repeats / 4000 < 0.33
    # A repeat is an earlier ask, scope and budget included.
    distinct = {(ask.query, tuple(ask.scope.items()), ask.budget_tokens) for ask in asked}
    assert len(distinct) == stream.distinct == 4000 - stream.repeats


def test_when_the_fresh_questions_run_out_the_stream_says_so(no_datasets):
    pool = build_pool(ROOT, no_datasets)
    tiny = type(pool)({kind: questions[:2] for kind, questions in pool.kinds.items()})
    stream = QuestionStream(tiny, SCOPES)
    [stream() for _ in range(20)]
    assert stream.distinct == 8 and stream.exhausted == 12
    assert "the pool ran out of fresh questions" in stream.summary()


def loadtest(services, settings, *args: str) -> subprocess.CompletedProcess:
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR)}
    return subprocess.run(
        [sys.executable, "manage.py", "loadtest", "--org", "acme", "--warmup", "0",
         "--duration", "3", "--clients", "2", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def last_line(out: str) -> tuple[float, ...]:
    """The last line: the endpoint next to the machine's raw capacity, measured in one run."""
    match = LAST_LINE.fullmatch(out.strip().splitlines()[-1])
    assert match, out.strip().splitlines()[-1]
    throughput, raw, ratio, p50, p99, errors, hits = map(float, match.groups())
    assert throughput > 0 and raw > 0 and errors == 0 and p50 <= p99
    # The ratio of the unrounded rates: within what rounding each to 0.1 allows.
    assert (throughput - 0.05) / (raw + 0.05) - 0.005 <= ratio \
        <= (throughput + 0.05) / max(0.01, raw - 0.05) + 0.005
    return throughput, raw, ratio, p50, p99, errors, hits


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_short_load_reports_throughput_latency_and_no_errors(services, settings, world):  # noqa: F811
    result = loadtest(services, settings, "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "question pool: " in out and "2 clients, acme:" in out
    assert "REST, gunicorn with 1 workers (ASGI)" in out
    assert " req/s " in out and "p50" in out and "p95" in out and "p99" in out
    assert "errors          0 (0.00 %)" in out
    assert "status codes    200: " in out
    # At share 0 no question is asked twice, on either side; nothing to find in the cache.
    sides = [tuple(map(int, m.groups())) for m in QUESTIONS.finditer(out)]
    assert len(sides) == 2 and all(asked == distinct > 0 and repeats == 0
                                   for asked, distinct, repeats in sides), sides
    assert last_line(out)[-1] == 0.0
    # Where each side's CPU went, a request: the web processes and their encoders on the
    # endpoint's side, the in-process parts and their encoders on the raw capacity's.
    endpoint, raw = CPU.findall(out)
    assert endpoint.startswith("web ") and "encoders " in endpoint, endpoint
    assert raw.startswith("encoders ") and "this process " in raw and "web" not in raw, raw
    # One token per client, minted for the run and revoked after it.
    tokens = ApiToken.objects.filter(name__startswith="loadtest-")
    assert tokens.count() == 2 and all(t.revoked_at is not None for t in tokens)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_same_stream_through_mcp_with_a_repeat_share_hits_the_cache_on_both_sides(
        services, settings, world):  # noqa: F811
    result = loadtest(services, settings, "--workers", "1", "--surface", "mcp",
                      "--repeat-share", "0.5")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "MCP, gunicorn with 1 workers (ASGI)" in out and "status codes    200: " in out
    sides = [tuple(map(int, m.groups())) for m in QUESTIONS.finditer(out)]
    assert len(sides) == 2 and all(repeats > 0 and distinct == asked - repeats
                                   for asked, distinct, repeats in sides), sides
    # Repeats are answered from the query-vector cache: by the endpoint (its traces say so) and
    # by the raw capacity, which uses the same cache.
    hits = [int(n) for n in re.findall(r"cache hits +(\d+) of \d+ query-vector lookups", out)]
    assert len(hits) == 2 and all(n > 0 for n in hits), out
    assert last_line(out)[-1] > 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_requests_that_fail_make_it_exit_non_zero(services, settings, world):  # noqa: F811
    # Nothing listens on port 9: every request is a connection error.
    result = loadtest(services, settings, "--url", "http://127.0.0.1:9")
    assert result.returncode != 0
    assert "ConnectionRefusedError" in result.stdout
    assert "request(s) failed" in result.stderr
