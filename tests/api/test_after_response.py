"""A retrieval's trace row, use counters and metrics are written in its response's ``close()``
(contexts/api/after_response.py) — the one mode, which the whole suite runs: bounded, in order,
failures logged and never raised. Real PostgreSQL, real Redis."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.core.signals import request_finished
from django.db import close_old_connections, connection
from django.http import HttpResponse
from rest_framework.test import APIRequestFactory

from contexts.api import after_response
from contexts.api.after_response import run_after_response
from contexts.api.retrieve import retrieve_view
from contexts.models import RetrievalTrace
from tests.api.conftest import as_token
from tests.api.test_retrieve import URL

BODY = {"query": "why does the rate limiter drop requests?",
        "scope": {"org_id": "acme", "repo_id": "web"}}
LOGGER = "contexts.api.after_response"


def stored(trace_id: str) -> bool:
    return RetrievalTrace.objects.filter(public_id=trace_id).exists()


def timeouts() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout'), "
                       "current_setting('lock_timeout')")
        return cursor.fetchone()


def test_the_trace_is_written_once_the_response_closes_not_before(cast, world):
    request = APIRequestFactory().post(URL, BODY, format="json",
                                       HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    response = retrieve_view(request)
    assert response.status_code == 200
    trace_id = response.data["trace_id"]
    assert not stored(trace_id)  # the answer is built; its trace waits for the server
    closed(response)
    assert stored(trace_id)


def closed(response: HttpResponse) -> None:
    """What a server does once the last byte is out: ``close()``. Its request_finished would
    close the test's connection (and transaction): the test client leaves that out too."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def test_a_retrieval_through_the_client_is_traced_by_the_time_it_returns(api, cast, world):
    # The suite's requests run the production path: a test reads the writes right after.
    answer = as_token(api, cast.raw_token).post(URL, BODY, format="json")
    assert answer.status_code == 200
    assert stored(answer.json()["trace_id"])


def closing_tasks(ran: list[str]) -> HttpResponse:
    """A response carrying three tasks, the middle one failing."""
    def boom() -> None:
        raise RuntimeError("database went away")

    response = HttpResponse("answer")
    run_after_response(response, [lambda: ran.append("trace"), boom,
                                  lambda: ran.append("counters")])
    return response


def test_tasks_run_on_close_in_order_and_a_failure_is_logged_not_raised(caplog, db) -> None:
    # ``db``: closing a response sends request_finished, whose handler closes old database
    # connections — refused without the fixture once an earlier test has opened one.
    ran: list[str] = []
    response = closing_tasks(ran)
    assert ran == []  # nothing before the server is done with the response
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        response.close()
    assert ran == ["trace", "counters"]
    assert "database went away" in caplog.text


def test_a_failing_task_statement_leaves_the_connection_usable(caplog, db) -> None:
    def fails() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")

    ran: list[str] = []
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        after_response.run_tasks([fails, lambda: ran.append("next")])
    assert "division by zero" in caplog.text
    assert ran == ["next"]  # the failure did not stop the tasks after it
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_at_most_max_tasks_run(caplog, db) -> None:
    ran: list[int] = []
    response = HttpResponse("answer")
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        run_after_response(response, [lambda n=n: ran.append(n)
                                      for n in range(after_response.MAX_TASKS + 2)])
        response.close()
    assert ran == list(range(after_response.MAX_TASKS))
    assert "2 dropped" in caplog.text


def test_tasks_not_started_within_the_bound_are_skipped(caplog, db, settings) -> None:
    settings.AFTER_RESPONSE_TIMEOUT_MS = 50
    ran: list[str] = []

    def slow() -> None:
        time.sleep(0.06)  # longer than the whole bound
        ran.append("slow")

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        after_response.run_tasks([slow, lambda: ran.append("late")])
    assert ran == ["slow"]
    assert "1 task(s) skipped" in caplog.text


@pytest.fixture
def trace_table_locked(services) -> Iterator[Callable[[], None]]:
    """Another session holds the trace table (as a migration rewriting it would); released
    after at most 60 s, so a broken bound fails the test below instead of hanging the suite.
    Yields the release, for a test that has seen what it wanted and must read the table."""
    owner = psycopg.connect(services.test_database_owner_url)
    owner.execute("SET lock_timeout = '10s'")  # never wait on the test's own transaction
    owner.execute("LOCK TABLE contexts_retrievaltrace IN ACCESS EXCLUSIVE MODE")
    lock = threading.Lock()  # the timer and the test may both release

    def release() -> None:
        with lock:
            owner.rollback()

    timer = threading.Timer(60, release)
    timer.start()
    try:
        yield release
    finally:
        timer.cancel()
        release()
        owner.close()


# ``transactional_db``: the production path. Outside a caller's transaction the trace is its
# own transaction, and the bound is set in it; inside one (the rest of the suite) the caller's
# settings apply.
def test_a_write_blocked_on_a_lock_gives_up_within_the_bound_and_frees_the_worker(
        transactional_db, api, cast, world, settings, caplog, trace_table_locked) -> None:
    settings.AFTER_RESPONSE_TIMEOUT_MS = 200
    before = timeouts()
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        # The test client closes the response before it returns, like a server's worker.
        answer = as_token(api, cast.raw_token).post(URL, BODY, format="json")
    took = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["fragments"]
    # Without the bound the close would wait for the lock (up to 60 s, the fixture's release);
    # 10 s leaves a slow, shared machine all the room it needs over the 0.2 s bound.
    assert took < 10, took
    assert "canceling statement due to" in caplog.text  # lock timeout or statement timeout
    assert "skipped" in caplog.text  # the bound was spent: the rest did not start
    trace_table_locked()  # reading the table would wait for the lock's 60 s release
    assert not stored(answer.json()["trace_id"])
    # The worker's connection is usable, outside any transaction, with its own timeouts.
    assert not connection.in_atomic_block
    assert timeouts() == before


def test_a_trace_written_in_its_own_transaction_leaves_the_connection_as_it_was(
        transactional_db, api, cast, world, settings) -> None:
    settings.AFTER_RESPONSE_TIMEOUT_MS = 300
    before = timeouts()
    answer = as_token(api, cast.raw_token).post(URL, BODY, format="json")
    assert answer.status_code == 200
    assert stored(answer.json()["trace_id"])  # committed: visible to this new transaction
    assert before != ("300ms", "300ms")
    assert timeouts() == before
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        assert cursor.fetchone() == ("on",)
