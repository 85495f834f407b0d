"""Writes handed to ``run_after_response`` run when the server closes the response."""

from __future__ import annotations

import logging

from django.http import HttpResponse

from contexts.api.after_response import run_after_response


def test_tasks_run_on_close_in_order_and_a_failure_is_logged_not_raised(caplog, db) -> None:
    # ``db``: closing a response sends request_finished, whose handler closes old database
    # connections — refused without the fixture once an earlier test has opened one.
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("database went away")

    response = HttpResponse("answer")
    run_after_response(response, [lambda: ran.append("trace"), boom,
                                  lambda: ran.append("counters")])
    assert ran == []  # nothing before the server is done with the response
    with caplog.at_level(logging.ERROR, logger="contexts.api.after_response"):
        response.close()
    assert ran == ["trace", "counters"]
    assert "database went away" in caplog.text
