"""Django's Redis cache with one connection pool per process, not one per request.

Django keeps its cache objects in an ``asgiref.local.Local`` that is not thread-critical, i.e.
per context, and under ASGI every request runs in a fresh context: each request got a new
``RedisCache``, hence a new connection pool, hence a new TCP connection (plus redis-py's
``CLIENT SETINFO`` hand-shake, which reads the package metadata from disk) for the throttle, the
query-vector cache and the use counters. Profiled under ``manage.py loadtest``, that was ~10 %
of a web process's time. Here every cache object with the same servers and options shares one
client, whose redis-py pool is thread-safe and re-created after a fork.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_clients: dict[tuple[Any, ...], RedisCacheClient] = {}
_lock = threading.Lock()


class SharedPoolRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> RedisCacheClient:
        key = (tuple(self._servers), repr(sorted(self._options.items())))
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = self._class(self._servers, **self._options)
            return client
