"""``manage.py loadtest`` keeps working: a short run against its own gunicorn, and a failing
target makes it exit non-zero. The real run (60 s, 16 clients) is in docs/performance.md."""

from __future__ import annotations

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
    # One token per client, minted for the run and revoked after it.
    tokens = ApiToken.objects.filter(name__startswith="loadtest-")
    assert tokens.count() == 2 and all(t.revoked_at is not None for t in tokens)


def test_requests_that_fail_make_it_exit_non_zero(services, settings, world):  # noqa: F811
    # Nothing listens on port 9: every request is a connection error.
    result = loadtest(services, settings, "--url", "http://127.0.0.1:9")
    assert result.returncode != 0
    assert "ConnectionRefusedError" in result.stdout
    assert "request(s) failed" in result.stderr
