"""Red-team finding 9: internals shown to low-privilege callers.

Agents got the index's absolute path and the organization's primary key in ``degraded``;
``/healthz`` showed versions and host names to anyone; ``/metrics`` was public. Now agents get
a stable code and the details go to the log; ``/metrics`` and ``/healthz`` are the operator's
(metrics token, allow-listed addresses, superusers); ``/livez`` and ``/readyz`` are public and
say nothing but yes or no, and ``/readyz`` follows the database and this node's index follower
(not Redis, not the worker).
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
from pathlib import Path

import pytest
from django.db import connections
from django.test import Client

from contexts.indexes.indexing import index_path
from contexts.models import RetrievalTrace
from tests.api.conftest import as_token, world  # noqa: F401 - re-exported fixture
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture
from tests.factories import UserFactory
from tests.faults.test_redis_down import own_redis  # noqa: F401 - re-exported fixture

ROOT = Path(__file__).resolve().parents[2]
QUERY = {"query": "RateLimiter.acquire ERR_RATE", "scope": {"org_id": "acme", "repo_id": "web"}}
METRICS_TOKEN = "metrics-" + "k" * 40
INTERNALS = ("PostgreSQL", "version", "redis", "worker", socket.gethostname())


@pytest.fixture
def api():
    from rest_framework.test import APIClient

    return APIClient()


# --- degraded: a code, not the exception ----------------------------------------------------------

def test_a_missing_index_is_reported_as_a_code_and_detailed_in_the_log(api, cast, world,
                                                                      caplog):
    as_token(api, cast.raw_token)
    path = index_path(cast.org)
    shutil.rmtree(path)  # a real missing index, as tests/faults/test_lexical_index_faults.py

    with caplog.at_level(logging.WARNING, logger="contexts.retrieval.lexical"):
        response = api.post("/api/contexts/retrieve", QUERY, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["degraded"] == {"lexical": "lexical_index_unavailable"}
    text = response.content.decode()
    assert str(path) not in text and "IndexUnavailable" not in text
    # The trace, stored and served, says the same; the operator's log has the details.
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert trace.degraded == {"lexical": "lexical_index_unavailable"}
    shown = api.get(f"/api/traces/{body['trace_id']}").json()
    assert shown["degraded"] == {"lexical": "lexical_index_unavailable"}
    assert any(str(path) in record.getMessage() for record in caplog.records)


def test_traces_stored_with_the_old_text_are_served_as_the_code(api, cast, world):
    as_token(api, cast.raw_token)
    body = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    old = f"IndexUnavailable: no lexical index at /srv/contexts/index/org-{cast.org.pk}"
    RetrievalTrace.objects.filter(public_id=body["trace_id"]).update(degraded={"lexical": old})
    shown = api.get(f"/api/traces/{body['trace_id']}")
    assert shown.json()["degraded"] == {"lexical": "lexical_index_unavailable"}
    assert "/srv/contexts" not in shown.content.decode()


# --- /healthz and /metrics: the operator's --------------------------------------------------------

def _refused(response) -> None:
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "permission_denied"
    text = response.content.decode()
    assert not [word for word in INTERNALS if word in text], text


def test_anonymous_and_unscoped_callers_are_refused(client: Client, cast, settings):
    settings.METRICS_TOKEN = METRICS_TOKEN
    agent = {"HTTP_AUTHORIZATION": f"Bearer {cast.raw_token}"}
    wrong = {"HTTP_AUTHORIZATION": f"Bearer {METRICS_TOKEN}x"}
    for path in ("/healthz", "/metrics"):
        _refused(client.get(path))
        _refused(client.get(path, **agent))  # an organization's agent token is no operator
        _refused(client.get(path, **wrong))
    client.force_login(cast.owner)  # an organization admin, not a superuser
    _refused(client.get("/healthz"))
    _refused(client.get("/metrics"))


def test_the_metrics_token_is_allowed(client: Client, settings, db):
    settings.METRICS_TOKEN = METRICS_TOKEN
    scrape = {"HTTP_AUTHORIZATION": f"Bearer {METRICS_TOKEN}"}
    metrics = client.get("/metrics", **scrape)
    assert metrics.status_code == 200
    assert "contexts_retrievals_total" in metrics.content.decode()
    health = client.get("/healthz", **scrape)
    # No worker runs here, so the detailed report is a 503 naming it: still the details.
    assert health.status_code in (200, 503)
    assert health.json()["components"]["database"]["version"].startswith("PostgreSQL")


def test_an_unset_metrics_token_matches_nothing(client: Client, settings, db):
    settings.METRICS_TOKEN = ""
    _refused(client.get("/metrics", HTTP_AUTHORIZATION="Bearer "))
    _refused(client.get("/metrics", HTTP_AUTHORIZATION="Bearer"))


def test_allow_listed_addresses_and_superusers_are_allowed(client: Client, settings, db):
    settings.METRICS_ALLOW = ["10.20.0.0/16"]
    assert client.get("/metrics", REMOTE_ADDR="10.20.3.4").status_code == 200
    _refused(client.get("/metrics", REMOTE_ADDR="10.21.3.4"))
    # The address is the one contexts.kernel.client_address decides: a forwarded header counts only
    # from a configured proxy.
    _refused(client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.20.3.4"))
    settings.TRUSTED_PROXIES = ["127.0.0.1/32"]
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1",
                      HTTP_X_FORWARDED_FOR="10.20.3.4").status_code == 200

    settings.METRICS_ALLOW = []
    client.force_login(UserFactory(username="root", is_superuser=True, is_staff=True))
    assert client.get("/metrics").status_code == 200
    assert client.get("/healthz").json()["components"]["redis"]["status"] == "ok"


# --- /livez and /readyz: public and terse ---------------------------------------------------------

def ready_node(node_follower) -> None:
    """This process's node with its index follower running and through a first pass."""
    node = node_follower()
    deadline = time.monotonic() + 20
    while not node.heartbeat and time.monotonic() < deadline:
        time.sleep(0.05)
    assert node.heartbeat


def test_livez_and_readyz_are_public_and_terse(client: Client, db, node_follower):
    ready_node(node_follower)
    live = client.get("/livez")
    assert live.status_code == 200 and live.json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    assert "no-cache" in ready["Cache-Control"]


def test_readyz_stays_ready_while_redis_is_down(client: Client, db, own_redis,  # noqa: F811
                                                node_follower):
    ready_node(node_follower)
    own_redis.stop()
    assert client.get("/readyz").json() == {"status": "ready"}
    assert client.get("/livez").status_code == 200


@pytest.mark.slow
def test_readyz_is_unavailable_while_postgresql_is_down(client: Client, services,
                                                        transactional_db, node_follower):
    ready_node(node_follower)
    assert client.get("/readyz").status_code == 200
    services.postgres.stop()
    try:
        down = client.get("/readyz")
        live = client.get("/livez")
    finally:
        services.postgres.start()
        connections.close_all()  # this process's connections died with the server
    assert down.status_code == 503 and down.json() == {"status": "unavailable"}
    assert down["Retry-After"] == "5"
    assert live.status_code == 200  # the process itself still answers
    assert client.get("/readyz").status_code == 200


def test_compose_and_the_image_check_readyz():
    compose = (ROOT / "docker/compose.yaml").read_text()
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    assert "http://127.0.0.1:8000/readyz" in compose and "8000/healthz" not in compose
    assert "HEALTHCHECK" in dockerfile and "http://127.0.0.1:8000/readyz" in dockerfile
