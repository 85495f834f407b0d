"""/healthz talks to the real database, Redis and a real Celery worker.

It is the operator's (contexts/web/restricted.py): these tests ask from an allow-listed address;
tests/security/test_redteam_9_internals.py covers who is refused.
"""

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def operator(settings) -> None:
    settings.METRICS_ALLOW = ["127.0.0.1/32"]  # the test client's REMOTE_ADDR


def test_it_reports_everything_ok_with_a_worker(client, celery_worker):
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok"
    components = body["components"]
    assert components["database"]["status"] == "ok"
    assert components["database"]["version"].startswith("PostgreSQL 18")
    assert components["pgvector"] == {"status": "ok", "version": "0.8.6"}
    assert components["redis"]["status"] == "ok"
    assert components["worker"]["status"] == "ok"


def test_it_names_the_worker_when_none_answers(client, transactional_db):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["down"] == ["worker"]
    assert "no Celery worker" in body["components"]["worker"]["error"]


def test_a_task_round_trips_through_the_worker(celery_worker):
    from contexts.celery import ping

    assert ping.delay().get(timeout=30) == "pong"
