"""Redis down: retrieval keeps serving; every write answers 503 with Retry-After and writes
nothing.

The test runs its own Redis server, points the cache (throttle) and the broker check at it,
and really stops it; the session's Redis is left alone for the other tests.
"""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from rest_framework.test import APIClient

from contexts.kernel import availability
from contexts.models import (
    AuditEvent,
    Fragment,
    FragmentVersion,
    IngestionJob,
    RetrievalTrace,
)
from contexts.stack.servers import EmbeddedRedis, free_port
from tests.api.conftest import as_token

RETRIEVE = "/api/contexts/retrieve"


@pytest.fixture
def own_redis(tmp_path, settings):
    server = EmbeddedRedis(tmp_path / "redis", free_port())
    server.start()
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": server.url}}
    settings.CELERY_BROKER_URL = server.url
    _forget_clients()
    yield server
    server.stop()
    _forget_clients()


def _forget_clients() -> None:
    """Drop clients and remembered states that point at the previous Redis."""
    if hasattr(caches._connections, "default"):
        del caches["default"]
    availability._broker_client = None
    availability._broker.forget()
    availability._cache.forget()


def _retrieve(api):
    return api.post(RETRIEVE, {"query": "rate limiter bucket", "scope": {
        "org_id": "acme", "repo_id": "web"}}, format="json")


def test_retrieval_serves_and_writes_are_refused_while_redis_is_down(api, cast, world,
                                                                     own_redis):
    as_token(api, cast.raw_token)
    up = _retrieve(api)
    assert up.status_code == 200 and up.json()["fragments"]

    own_redis.stop()
    _forget_clients()  # no remembered "up": the next call meets the stopped server

    # Retrieval does not depend on Redis: same answer, throttle lifted, trace written.
    for _ in range(3):
        down = _retrieve(api)
        assert down.status_code == 200, down.content
        assert [f["id"] for f in down.json()["fragments"]] == \
            [f["id"] for f in up.json()["fragments"]]
    assert RetrievalTrace.objects.filter(public_id=down.json()["trace_id"]).exists()

    stored = (Fragment.objects.count(), FragmentVersion.objects.count(),
              AuditEvent.objects.count(), IngestionJob.objects.count())
    fragments = stored[0]
    session_scope = {"org_id": "acme", "session_id": cast.session.external_id}
    writes = [
        api.post("/api/fragments", {"scope": session_scope, "body": "a finding"},
                 format="json"),
        api.post(f"/api/fragments/{world.repo_limiter.public_id}/feedback",
                 {"signal": "helped"}, format="json"),
    ]
    uploader = APIClient()
    uploader.force_authenticate(cast.owner)
    writes.append(uploader.post("/api/sources", {
        "org_id": "acme", "repo_id": "web",
        "files": [SimpleUploadedFile("notes.md", b"# Notes\n\nWritten while Redis is down.")]},
        format="multipart"))
    console = Client()
    console.force_login(cast.teammate)
    limiter = world.repo_limiter
    writes.append(console.post(f"/fragments/{limiter.public_id}/edit", {
        "title": limiter.title, "body": "rewritten while Redis is down",
        "based_on_version": limiter.version, "reason": "test"}))
    writes.append(console.post(f"/fragments/{limiter.public_id}/retire"))
    for response in writes:
        assert response.status_code == 503, (response.request["PATH_INFO"], response.content)
        assert response["Retry-After"] == str(availability.RETRY_AFTER_SECONDS)
    for response in writes[:3]:
        error = response.json()["error"]
        assert error["code"] == "queue_unavailable" and "nothing was written" in error["message"]
    assert "Nothing you submitted was saved" in writes[3].content.decode()
    # Nothing half-written.
    assert (Fragment.objects.count(), FragmentVersion.objects.count(),
            AuditEvent.objects.count(), IngestionJob.objects.count()) == stored
    limiter.refresh_from_db()
    assert limiter.status == "active" and limiter.body != "rewritten while Redis is down"

    # Back up: writes go through again (after the breaker's short hold).
    own_redis.start()
    _forget_clients()
    created = api.post("/api/fragments", {"scope": session_scope, "body": "a finding"},
                       format="json")
    assert created.status_code == 201, created.content
    assert Fragment.objects.count() == fragments + 1


def test_a_dead_redis_costs_one_connection_attempt_per_interval(api, cast, world, own_redis):
    """The breaker: while Redis is down, requests do not each wait on a connection."""
    own_redis.stop()
    _forget_clients()
    assert availability.broker_available() is False
    assert availability._broker.known() is False
    # While that verdict holds, no client is even consulted.
    availability._broker_client = None
    assert availability.broker_available() is False
    assert availability._broker_client is None
