"""What keeps working when a dependency is down, and how callers are told.

- **Redis down.** Retrieval does not need Redis: the throttle lets requests through (see
  :func:`redis_call`) and the use counters are best effort. Writes do need it, because every
  write queues derived work (reindexing, ingestion, counters): they are refused with 503 and
  ``Retry-After`` *before* anything is written (:class:`AvailabilityMiddleware`,
  :func:`require_broker`), so a write never lands without its follow-up work.
- **PostgreSQL down or restarted.** The request that meets a dead connection fails with a 503
  (not a 500 and not a traceback); Django discards the broken connection at the end of the
  request and ``CONN_HEALTH_CHECKS`` replaces a stale one at the start of the next.

The rules live here, once, for the REST API, the console and the MCP server: :func:`outage`
says whether an exception means "a dependency is down" and what to answer, and
:func:`unavailable_body` / :data:`RETRY_AFTER_SECONDS` are that answer's body and retry hint
wherever it is sent (``contexts.protocol.errors``, :class:`AvailabilityMiddleware`,
``contexts.mcp.server``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from rest_framework import exceptions, status

from contexts.kernel.errors import error_body, is_api

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
# Errors that mean "the database could not be reached", not "the query was wrong".
DATABASE_DOWN = (OperationalError, InterfaceError)
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)

# Unsafe methods that only read: they stay open while the broker is down.
READ_ONLY_ROUTES = frozenset({"api:retrieve", "console:login", "console:logout"})

T = TypeVar("T")


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"
    default_detail = "a service this request needs is unavailable; retry later"

    def __init__(self, message: str, code: str = "unavailable") -> None:
        super().__init__(message, code)
        self.wait = RETRY_AFTER_SECONDS


BROKER_DOWN_MESSAGE = ("the task queue (Redis) is unavailable, so nothing was written; "
                       "retry later")
DATABASE_DOWN_MESSAGE = "the database is unavailable; retry later"


class _Verdict:
    """The last answer to "is it reachable?", trusted for a while: a dead Redis costs one
    connection attempt per interval instead of one per request, and a live broker one ping per
    interval instead of one per write."""

    def __init__(self, trust_up: float, trust_down: float) -> None:
        self.trust_up = trust_up
        self.trust_down = trust_down
        self._last = (True, 0.0)  # (reachable, trusted until); replaced whole, so no lock

    def known(self) -> bool | None:
        reachable, until = self._last
        return reachable if time.monotonic() < until else None

    def remember(self, reachable: bool) -> None:
        self._last = (reachable, time.monotonic()
                      + (self.trust_up if reachable else self.trust_down))

    def forget(self) -> None:
        self._last = (True, 0.0)


# The cache is only ever remembered as down: its own calls are the check while it is up.
_cache = _Verdict(trust_up=0.0, trust_down=2.0)
# A broker lost within trust_up fails the publish itself: the change is committed and the
# failure logged, and `rebuild_index` / `reembed` bring the derived data back in line.
_broker = _Verdict(trust_up=0.5, trust_down=1.0)
_broker_client: tuple[str, redis.Redis] | None = None


def cache_redis() -> redis.Redis:
    """The cache's own Redis client (its connection pool), for commands Django's cache API
    does not offer (pipelines, hashes). Calls on it go through :func:`redis_call`."""
    from django.core.cache import cache

    return cache._cache.get_client(write=True)


def redis_call(call: Callable[[], T], default: T, what: str) -> T:
    """``call()`` against the cache's Redis, or ``default`` while Redis is unreachable."""
    if _cache.known() is False:
        return default
    try:
        return call()
    except REDIS_DOWN as exc:
        _cache.remember(False)
        logger.warning("Redis unavailable (%s): %s; continuing without it", what, exc)
        return default


def _broker_redis() -> redis.Redis | None:
    global _broker_client
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None  # another broker: Celery's own publish errors are the check
    if _broker_client is None or _broker_client[0] != url:
        # Short timeouts: a blackholed Redis must not hold a web worker for long.
        _broker_client = (url, redis.Redis.from_url(url, socket_connect_timeout=0.5,
                                                    socket_timeout=0.5))
    return _broker_client[1]


def broker_available() -> bool:
    known = _broker.known()
    if known is not None:
        return known
    client = _broker_redis()
    if client is None:
        return True
    try:
        client.ping()
    except REDIS_DOWN as exc:
        _broker.remember(False)
        logger.warning("task queue unavailable: %s", exc)
        return False
    _broker.remember(True)
    return True


def require_broker() -> None:
    """Refuse a write up front when its follow-up work could not be queued."""
    if not broker_available():
        raise ServiceUnavailable(BROKER_DOWN_MESSAGE, "queue_unavailable")


def outage(exc: BaseException) -> ServiceUnavailable | None:
    """The 503 for an exception that means a dependency is down, else None: the database
    lost (logged here), or a write refused up front because the broker is down
    (:func:`require_broker`). A publish that fails *after* a commit is not mapped: the change
    is saved, so "nothing was written, retry" would be wrong (see ``_broker``)."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    if isinstance(exc, DATABASE_DOWN):
        # A lost connection (e.g. PostgreSQL restarting): retryable, not a 500. Django discards
        # the broken connection when the request ends.
        logger.warning("database unavailable: %s", exc)
        return ServiceUnavailable(DATABASE_DOWN_MESSAGE, "database_unavailable")
    return None


def unavailable_body(code: str, message: str) -> dict:
    """The API's error body for a 503, with the retry hint (also sent as ``Retry-After``)."""
    return error_body(code, message, retry_after=RETRY_AFTER_SECONDS)


def unavailable_response(request: HttpRequest, code: str, message: str) -> HttpResponse:
    """A 503 in the caller's language: JSON for the API, a page for the console."""
    if is_api(request):
        response: HttpResponse = JsonResponse(unavailable_body(code, message), status=503)
    else:
        response = HttpResponse(
            render_to_string("503.html", {"message": message}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class AvailabilityMiddleware:
    """Refuses writes while the broker is down; turns a lost database into a clean 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func, view_args, view_kwargs
                     ) -> HttpResponse | None:
        if request.method in ("GET", "HEAD", "OPTIONS", "TRACE"):
            return None
        match = request.resolver_match
        if match is not None and match.view_name in READ_ONLY_ROUTES:
            return None
        if not broker_available():
            return unavailable_response(request, "queue_unavailable", BROKER_DOWN_MESSAGE)
        return None

    def process_exception(self, request: HttpRequest, exception: Exception
                          ) -> HttpResponse | None:
        # Only a lost database here: the broker's refusals happen up front, in process_view.
        unavailable = outage(exception) if isinstance(exception, DATABASE_DOWN) else None
        if unavailable is None:
            return None
        return unavailable_response(request, str(unavailable.get_codes()),
                                    str(unavailable.detail))
