"""``devtools.cpu_use``: the load test's CPU by part — which processes count as which part, the
window read in a thread of its own, and the report line. The real attribution is in
docs/performance.md ("Where a request's CPU goes")."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from devtools.cpu_use import Meter, _Process, parts, per_request_line

ME = 100


def process(ppid: int, own: float, reaped: float = 0.0, command: str = "python") -> _Process:
    return _Process(ppid, own, reaped, command)


def test_each_process_counts_for_its_part():
    table = {
        ME: process(1, 3.0, reaped=50.0),  # what this process reaped is not its own time
        # the server this process started: master, two workers, each with an encoder child
        200: process(ME, 0.5, command="python -m gunicorn contexts.asgi:application"),
        201: process(200, 10.0, command="python -m gunicorn contexts.asgi:application"),
        202: process(200, 12.0, command="python -m gunicorn contexts.asgi:application"),
        211: process(201, 7.0, command="python -c from multiprocessing.spawn import …"),
        212: process(202, 8.0, reaped=1.0, command="python -c from multiprocessing.spawn …"),
        # an encoder child of this process itself (the raw capacity's)
        300: process(ME, 4.0, command="python -c from multiprocessing.spawn import …"),
        # PostgreSQL: the postmaster, what it reaped (backends that ended) and live backends
        400: process(1, 1.0, reaped=6.0, command="postgres -D var/pgdata"),
        401: process(400, 2.5, command="postgres: contexts_app contexts"),
        500: process(1, 0.75, command="redis-server 127.0.0.1:63799"),
        600: process(1, 99.0, command="some other job"),  # nobody's part
    }
    seconds = parts(table, ME, {"postgres": 400, "redis": 500, "elsewhere": None})
    assert seconds == {"web": 22.5, "encoders": 20.0, "postgres": 9.5, "redis": 0.75,
                       "this process": 3.0}
    # A server started as this process's child is counted once, as itself.
    table[500] = process(ME, 0.75, command="redis-server 127.0.0.1:63799")
    assert parts(table, ME, {"postgres": 400, "redis": 500}) == seconds


def test_the_window_is_the_difference_between_its_two_readings():
    # A child that burns CPU inside the window is counted as an encoder (a child of this
    # process that is not gunicorn).
    meter = Meter({})
    begin = time.monotonic() + 0.2
    meter.window(begin, begin + 1.5)
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\n"
                             "while time.time() < end: pass"])
    try:
        seconds = meter.seconds()
    finally:
        busy.kill()
        busy.wait()
    assert time.monotonic() >= begin + 1.5
    # Ticks of 10 ms. The child spins through the window, so it cannot have used more than the
    # window's 1.5 s (and the reads' lateness); on a busy machine it gets far less than that.
    assert 0.05 <= seconds["encoders"] <= 1.6, seconds
    assert seconds["web"] == 0.0 and "postgres" not in seconds


def test_a_window_never_opened_reports_nothing():
    assert Meter({}).seconds() == {}


def test_the_line_gives_milliseconds_a_request_in_order_with_the_total():
    seconds = {"web": 1.2, "encoders": 0.9, "this process": 0.0, "postgres": 0.6}
    line = per_request_line("cpu a request   ", seconds, 100, ("web", "encoders",
                                                                "this process", "postgres"))
    assert line == ("cpu a request   web 12.00 ms, encoders 9.00 ms, postgres 6.00 ms "
                    "(total 27.00 ms)")
    assert per_request_line("x", {}, 100, ("web",)) is None
    assert per_request_line("x", seconds, 0, ("web",)) is None


def test_this_process_is_read_from_proc():
    if not Meter.available():
        pytest.skip("reads /proc")
    from devtools.cpu_use import _table
    table = _table()
    assert os.getpid() in table and table[os.getpid()].own > 0
