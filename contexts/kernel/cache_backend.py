"""Django's Redis cache with one connection pool per process, not one per request.

Django keeps its cache objects in an ``asgiref.local.Local`` that is not thread-critical, i.e.
per context, and under ASGI every request runs in a fresh context: each request got a new
``RedisCache``, hence a new connection pool, hence a new TCP connection (plus redis-py's
``CLIENT SETINFO`` hand-shake, which reads the package metadata from disk) for the throttle, the
query-vector cache and the use counters. Profiled under ``manage.py loadtest``, that was ~10 %
of a web process's time. Here every cache object with the same servers and options shares one
client, whose redis-py pool is thread-safe and re-created after a fork.

Django's client also builds a new ``redis.Redis`` around the pool for every command, and each
one fills a table of ~170 response callbacks: ~0.15 ms, twice per retrieval (the throttle and
the query-vector cache; measured with cProfile over 400 retrievals). A ``redis.Redis`` holds no
connection of its own (each command borrows one from the pool), so one per pool serves every
thread.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_clients: dict[tuple[Any, ...], RedisCacheClient] = {}
_lock = threading.Lock()


class _ReusingClient(RedisCacheClient):
    """One ``redis.Redis`` per connection pool instead of one per command."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._redis_by_pool: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        client = self._redis_by_pool.get(index)
        if client is None:
            # Two threads may both build one here; either is as good as the other.
            client = self._redis_by_pool[index] = super().get_client(key, write=write)
        return client


class SharedPoolRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = _ReusingClient(self._servers, **self._options)
            return client
