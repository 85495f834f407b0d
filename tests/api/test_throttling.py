"""The per-principal throttle counts every request exactly once, even concurrently (real Redis)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from django.core.cache import cache

from contexts.kernel import availability
from contexts.protocol.throttling import AgentRateThrottle

pytestmark = pytest.mark.django_db


# Mid-window: a window is one minute, and attempts straddling a minute's end would count in two
# windows (up to twice the rate, by design) — a fixed clock keeps the tests off that edge.
NOW = 1_800_000_030.0


class TwentyPerMinute(AgentRateThrottle):
    THROTTLE_RATES = {"agent": "20/min"}

    def timer(self) -> float:
        return NOW


@pytest.fixture(autouse=True)
def _redis_counts() -> None:
    """Redis is reachable: forget a verdict "down" another test left (the throttle lets
    everything through for 2 s after one, contexts.kernel.availability)."""
    availability._cache.forget()


def principal_request(pk: int) -> SimpleNamespace:
    return SimpleNamespace(user=SimpleNamespace(pk=pk), META={"REMOTE_ADDR": "127.0.0.1"})


def test_concurrent_requests_are_each_counted_once() -> None:
    cache.clear()
    request = principal_request(41)

    def attempt(_: int) -> bool:
        return TwentyPerMinute().allow_request(request, None)

    with ThreadPoolExecutor(max_workers=8) as pool:
        allowed = list(pool.map(attempt, range(40)))
    # A read-modify-write history would let more than 20 through under contention.
    assert allowed.count(True) == 20


def test_buckets_are_per_principal_and_say_when_to_retry() -> None:
    cache.clear()
    throttle = TwentyPerMinute()
    assert all(throttle.allow_request(principal_request(1), None) for _ in range(20))
    assert not throttle.allow_request(principal_request(1), None)
    assert 0 < throttle.wait() <= 60
    assert TwentyPerMinute().allow_request(principal_request(2), None)
