"""Health endpoints.

- ``GET /livez``: the process answers (no dependency is asked). Public.
- ``GET /readyz``: the database answers ``SELECT 1`` and this node's lexical index follower
  completed a pass and is within ``INDEX_MAX_LAG`` seconds of every organization's change feed
  (``contexts.indexes.follower.ready``). Redis or a worker being down does not make a node unready:
  it still serves retrievals and reads (writes answer 503 meanwhile, see
  ``contexts.kernel.availability``). Public, and says nothing but ready or not: load balancers,
  Compose and the Dockerfile's ``HEALTHCHECK`` use it.
- ``GET /healthz``: database (with pgvector), Redis and Celery, each checked for real, with
  versions, worker names and errors — for the operator only (``contexts.web.restricted``).
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from contexts.indexes import follower
from contexts.web.restricted import restricted

logger = logging.getLogger(__name__)

CELERY_PING_TIMEOUT = 2.0


def check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        )
        version, vector = cursor.fetchone()
    result = {"status": "ok", "version": version.split(",")[0]}
    pgvector = {"status": "ok", "version": vector} if vector else {
        "status": "down", "error": "the vector extension is not installed (run migrate)"}
    return {"database": result, "pgvector": pgvector}


def check_redis() -> dict:
    import redis

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=1,
                                  socket_connect_timeout=1)
    try:
        info = client.info("server")
    finally:
        client.close()
    return {"redis": {"status": "ok", "version": info.get("redis_version")}}


def check_worker() -> dict:
    from contexts.celery import app

    # limit=1: return as soon as one worker answers instead of waiting out the timeout.
    replies = app.control.ping(timeout=CELERY_PING_TIMEOUT, limit=1) or []
    if not replies:
        return {"worker": {"status": "down", "error": "no Celery worker answered a ping"}}
    return {"worker": {"status": "ok", "workers": sorted(name for r in replies for name in r)}}


CHECKS = {
    "database": check_database,
    "redis": check_redis,
    "worker": check_worker,
}


@never_cache
@require_GET
def livez(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        index_ready, reason = follower.ready()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready; /healthz says which
        # Terse on purpose: the reason (host, port, driver message) is for /healthz and logs.
        logger.warning("readyz: the database does not answer: %s: %s", type(exc).__name__, exc)
        return _unavailable()
    if not index_ready:
        logger.warning("readyz: the lexical index is not ready: %s", reason)
        return _unavailable()
    return JsonResponse({"status": "ready"})


def _unavailable() -> JsonResponse:
    response = JsonResponse({"status": "unavailable"}, status=503)
    response["Retry-After"] = "5"
    return response


@never_cache
@require_GET
@restricted
def healthz(request: HttpRequest) -> JsonResponse:
    started = time.monotonic()
    components: dict[str, dict] = {}
    for name, check in CHECKS.items():
        try:
            components.update(check())
        except Exception as exc:  # noqa: BLE001 - any failure means "down", named
            key = "pgvector" if name == "database" else name
            components[name] = {"status": "down", "error": f"{type(exc).__name__}: {exc}"}
            if name == "database":
                components[key] = {"status": "down", "error": "database unreachable"}
    down = sorted(name for name, comp in components.items() if comp["status"] != "ok")
    body = {
        "status": "ok" if not down else "down",
        "down": down,
        "components": components,
        "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
    }
    return JsonResponse(body, status=200 if not down else 503)
