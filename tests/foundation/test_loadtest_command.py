"""``manage.py loadtest`` keeps working: a short run against its own gunicorn, then the raw
capacity for the same questions, and a failing target makes it exit non-zero. The real run
(60 s, 16 clients) is in docs/performance.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.models import ApiToken
from tests.api.conftest import cast, world  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def loadtest(services, settings, *args: str) -> subprocess.CompletedProcess:
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR)}
    return subprocess.run(
        [sys.executable, "manage.py", "loadtest", "--org", "acme", "--warmup", "0",
         "--duration", "3", "--clients", "2", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)


def test_a_short_load_reports_throughput_latency_and_no_errors(services, settings, world):  # noqa: F811
    result = loadtest(services, settings, "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "2 clients, acme:" in out and "gunicorn with 1 workers (ASGI)" in out
    assert " req/s " in out and "p50" in out and "p95" in out and "p99" in out
    assert "errors          0 (0.00 %)" in out
    assert "status codes    200: " in out
    # The last line: the endpoint next to the machine's raw capacity, measured in the same run.
    last = out.strip().splitlines()[-1]
    match = re.fullmatch(r"throughput ([\d.]+) req/s, raw capacity ([\d.]+) req/s, "
                         r"ratio ([\d.]+); p50 ([\d.]+) ms, p99 ([\d.]+) ms; errors (\d+)", last)
    assert match, last
    throughput, raw, ratio, p50, p99, errors = map(float, match.groups())
    assert throughput > 0 and raw > 0 and errors == 0 and p50 <= p99
    assert ratio == pytest.approx(throughput / raw, abs=0.006)
    # One token per client, minted for the run and revoked after it.
    tokens = ApiToken.objects.filter(name__startswith="loadtest-")
    assert tokens.count() == 2 and all(t.revoked_at is not None for t in tokens)


def test_requests_that_fail_make_it_exit_non_zero(services, settings, world):  # noqa: F811
    # Nothing listens on port 9: every request is a connection error.
    result = loadtest(services, settings, "--url", "http://127.0.0.1:9")
    assert result.returncode != 0
    assert "ConnectionRefusedError" in result.stdout
    assert "request(s) failed" in result.stderr
