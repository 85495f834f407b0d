"""Fixtures of the scope-leakage suite: warm embedding vectors and a run-wide case counter."""

from __future__ import annotations

from collections import Counter

import pytest

# How many generated cases each kind of check ran, reported at the end of the run so the
# closing note can say how much was generated (``N leak cases generated``).
LEAK_STATS: Counter[str] = Counter()


@pytest.fixture(scope="session")
def leak_stats() -> Counter[str]:
    return LEAK_STATS


def pytest_terminal_summary(terminalreporter) -> None:  # pragma: no cover - reporting only
    if not LEAK_STATS:
        return
    total = sum(v for k, v in LEAK_STATS.items() if k != "worlds")
    terminalreporter.section("scope leakage suite")
    terminalreporter.write_line(
        f"{LEAK_STATS['worlds']} generated worlds, {total} leak cases generated: "
        + ", ".join(f"{k}={v}" for k, v in sorted(LEAK_STATS.items()) if k != "worlds"))
