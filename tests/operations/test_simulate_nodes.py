"""``manage.py simulate_nodes`` (issue 21): two web nodes and a worker node as separate process
groups against the test database and Redis, one web node killed with SIGKILL and restarted, the
other's index deleted once. A short run here; the 60-second run is in docs/scale-out.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.models import Organization

ROOT = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(r"^lag p50 (\d+) ms, p99 (\d+) ms; converged (yes|no); lost (\d+); "
                       r"leaks (\d+)$")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_web_nodes_and_a_worker_node_converge(services, transactional_db):
    before = set(Organization.objects.values_list("slug", flat=True))
    run = subprocess.run(
        [sys.executable, "manage.py", "simulate_nodes", "--web", "2", "--seconds", "15"],
        env=services.env(), cwd=ROOT, capture_output=True, text=True, timeout=540)
    lines = run.stdout.strip().splitlines()
    assert lines, run.stderr[-3000:]
    match = LAST_LINE.match(lines[-1])
    assert match, run.stdout[-3000:] + run.stderr[-3000:]
    _, p99, converged, lost, leaks = match.groups()
    assert (converged, lost, leaks) == ("yes", "0", "0"), run.stdout[-3000:]
    assert run.returncode == 0
    assert int(p99) <= 2000
    assert "killing web-b with SIGKILL" in run.stdout and "web-b restarted" in run.stdout
    assert "deleting web-a's index" in run.stdout
    # It cleans up after itself: its organization is gone.
    assert set(Organization.objects.values_list("slug", flat=True)) == before


def test_a_run_below_two_web_nodes_is_refused(services):
    run = subprocess.run(
        [sys.executable, "manage.py", "simulate_nodes", "--web", "1", "--seconds", "1"],
        env=services.env(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "--web must be at least 2" in run.stderr
