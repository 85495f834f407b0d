"""One Redis connection pool per process (``contexts.kernel.cache_backend``), on the session's real
Redis.

Under ASGI every request runs in a fresh context, and Django keeps its cache objects per
context: with Django's own backend each request opened a new pool and a new TCP connection for
the throttle, the query-vector cache and the use counters. A request is simulated here exactly
so: its cache calls run in a new, empty ``contextvars.Context``.
"""

from __future__ import annotations

import contextvars
import threading

import pytest
from django.core.cache import cache

from contexts.kernel.availability import cache_redis

pytestmark = pytest.mark.django_db

REQUESTS = 30


def _connections_received() -> int:
    return int(cache_redis().info("stats")["total_connections_received"])


def _one_request(n: int) -> None:
    cache.set(f"pool-test-{n}", n, 30)  # Django's cache API (the login throttle's)
    assert cache.get(f"pool-test-{n}") == n
    cache_redis().incr("pool-test-counter")  # the client the throttle and counters use


def test_requests_in_fresh_contexts_share_the_process_pool(services) -> None:
    contextvars.Context().run(_one_request, -1)  # the pool's first connection
    before = _connections_received()
    for n in range(REQUESTS):
        contextvars.Context().run(_one_request, n)
    opened = _connections_received() - before - 1  # the count's own ``INFO`` call
    assert opened <= 1, f"{opened} new Redis connections for {REQUESTS} requests"


def test_one_redis_client_serves_every_request_and_thread(services) -> None:
    # Django's client builds a new redis.Redis (and its table of response callbacks) for every
    # command; this one keeps one per connection pool.
    clients: list[object] = []
    threads = [threading.Thread(target=lambda: contextvars.Context().run(
        lambda: clients.append(cache_redis()))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    clients.append(contextvars.Context().run(cache_redis))
    assert len(clients) == 5 and all(client is clients[0] for client in clients)
    assert clients[0].ping()
