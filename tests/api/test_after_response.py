"""A retrieval's deferred writes (contexts/api/after_response.py). In the default mode,
``next-request``, they are queued once the answer is out and run by the next retrieval while it
waits for its query vector, by the flusher when none comes, or by a trace read that misses;
in ``after-response`` (the suite's mode), when the response closes — real PostgreSQL, real
Redis."""

from __future__ import annotations

import logging
import time

import pytest
from django.http import HttpResponse
from rest_framework.test import APIClient

from contexts.api import after_response
from contexts.api.after_response import run_after_response
from contexts.models import RetrievalTrace
from tests.api.conftest import as_token
from tests.api.test_retrieve import URL

BODY = {"query": "why does the rate limiter drop requests?",
        "scope": {"org_id": "acme", "repo_id": "web"}}


@pytest.fixture
def next_request(settings, monkeypatch):
    settings.DEFERRED_WRITES = "next-request"
    # The flusher's thread has its own connection, outside the test's transaction: it must
    # leave these tests' writes to their requests (the flusher's own test sets it back).
    monkeypatch.setattr(after_response, "IDLE_SECONDS", 60.0)
    after_response.drain()
    yield
    after_response.drain()


def stored(trace_id: str) -> bool:
    return RetrievalTrace.objects.filter(public_id=trace_id).exists()


def test_the_next_retrieval_writes_the_previous_ones_trace(api, cast, world, next_request):
    client = as_token(api, cast.raw_token)
    first = client.post(URL, BODY, format="json")
    assert first.status_code == 200
    assert not stored(first.json()["trace_id"])  # answered; its row is queued
    assert after_response.pending() == 1

    second = client.post(URL, BODY, format="json")
    assert second.status_code == 200
    assert stored(first.json()["trace_id"])      # written while the second waited
    assert not stored(second.json()["trace_id"])
    assert after_response.pending() == 1


def test_a_trace_read_finds_a_trace_whose_row_is_still_queued(api, cast, world, next_request):
    client = as_token(api, cast.raw_token)
    trace_id = client.post(URL, BODY, format="json").json()["trace_id"]
    assert not stored(trace_id)
    answer = client.get(f"/api/traces/{trace_id}")
    assert answer.status_code == 200
    assert answer.json()["id"] == trace_id
    missing = client.get("/api/traces/tr_aaaaaaaaaaaaaa")
    assert missing.status_code == 404


def test_missing_and_unreadable_traces_wait_alike(api, cast, world, next_request):
    """A miss waits for another process's write; a trace of scopes the caller may not read
    waits as long, so the answer's timing does not tell whether it exists."""
    from accounts.tokens import create_token

    trace_id = as_token(api, cast.raw_token).post(URL, BODY, format="json").json()["trace_id"]
    after_response.drain()
    assert stored(trace_id)
    _, foreign = create_token(cast.other_org, "foreign", [cast.other_org.scope])
    outsider = as_token(APIClient(), foreign)
    for target in (trace_id, "tr_aaaaaaaaaaaaaa"):
        started = time.monotonic()
        assert outsider.get(f"/api/traces/{target}").status_code == 404
        assert time.monotonic() - started >= after_response.READ_WAIT_SECONDS, target


def test_a_retrieval_runs_at_most_its_share_of_the_queue(next_request):
    ran: list[int] = []
    for n in range(after_response.PER_REQUEST + 1):
        after_response._queue().add([lambda n=n: ran.append(n)])
    after_response.drain_for_request()
    assert ran == list(range(after_response.PER_REQUEST))  # oldest first
    assert after_response.pending() == 1
    assert after_response.drain() == 1
    assert ran == list(range(after_response.PER_REQUEST + 1))


def test_a_failing_write_leaves_the_running_request_whole(api, cast, world, next_request):
    from django.db import connection

    def fails() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    after_response._queue().add([fails])
    client = as_token(api, cast.raw_token)
    answer = client.post(URL, BODY, format="json")  # runs `fails` while it waits
    assert answer.status_code == 200 and answer.json()["fragments"]
    assert after_response.pending() == 1  # only its own batch is left


def test_the_flusher_runs_what_no_retrieval_took(next_request, monkeypatch):
    monkeypatch.setattr(after_response, "IDLE_SECONDS", 0.05)
    ran: list[float] = []
    queued = time.monotonic()
    after_response._queue().add([lambda: ran.append(time.monotonic())])
    deadline = queued + 5
    while not ran and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran, "the flusher did not run the queued work"
    assert ran[0] - queued >= after_response.IDLE_SECONDS  # it first left it to a request
    assert after_response.pending() == 0


def closing_tasks(ran: list[str]) -> HttpResponse:
    """A response carrying three tasks, the middle one failing."""
    def boom() -> None:
        raise RuntimeError("database went away")

    response = HttpResponse("answer")
    run_after_response(response, [lambda: ran.append("trace"), boom,
                                  lambda: ran.append("counters")])
    return response


def test_after_response_mode_runs_on_close_in_order_and_logs_a_failure(caplog, db) -> None:
    # The suite's mode (tests/conftest.py). ``db``: closing a response sends request_finished,
    # whose handler closes old database connections — refused without the fixture once an
    # earlier test has opened one.
    ran: list[str] = []
    response = closing_tasks(ran)
    assert ran == []  # nothing before the server is done with the response
    with caplog.at_level(logging.ERROR, logger="contexts.api.after_response"):
        response.close()
    assert ran == ["trace", "counters"]
    assert "database went away" in caplog.text
    assert after_response.pending() == 0


def test_next_request_mode_queues_on_close_and_logs_a_failure(caplog, db, next_request):
    ran: list[str] = []
    closing_tasks(ran).close()
    assert ran == [] and after_response.pending() == 1  # the worker is free at once
    with caplog.at_level(logging.ERROR, logger="contexts.api.after_response"):
        assert after_response.drain() == 1
    assert ran == ["trace", "counters"]
    assert "database went away" in caplog.text
