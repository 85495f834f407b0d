"""Where a load test's CPU goes: the processor time of each part of the system over the measured
window, which ``manage.py loadtest`` divides by the requests answered in it.

Throughput alone cannot say why the endpoint serves fewer requests than the raw parts could:
on two cores the machine is saturated either way, and what differs is the CPU each request
costs, and where. So over the same measured seconds as the request count, this reads from
``/proc`` (Linux; elsewhere nothing is reported) the CPU time of:

- ``web``: the gunicorn processes this process started (master and workers), their own time;
- ``encoders``: the query-encoder children — of those workers, or of this process (the raw
  capacity's own);
- ``postgres`` and ``redis``: the embedded servers, given by pid — PostgreSQL with every
  backend, live or already exited (what the postmaster reaped);
- ``this process``: the load test itself — its client threads on the endpoint's side, its
  caller threads and tantivy on the raw capacity's.

The reading is clock ticks (10 ms) summed over a minute of thousands of requests, so a part's
milliseconds a request are exact to about 0.01 ms; what moves them between runs is the machine
(this VM's speed drifts by ~10 % within minutes, both sides with it). Compare parts within one
run, or across alternating runs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class _Process:
    ppid: int
    own: float     # seconds: user + system
    reaped: float  # seconds of children it has waited for
    command: str


def _table() -> dict[int, _Process]:
    """Every process now: pid → parent, own and reaped CPU seconds, command line."""
    table: dict[int, _Process] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:  # exited meanwhile
            continue
        # The command name in parentheses may hold spaces: the fields start after its ")".
        fields = stat.rsplit(")", 1)[1].split()
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        table[int(entry.name)] = _Process(int(fields[1]), (utime + stime) / TICK,
                                          (cutime + cstime) / TICK, command)
    return table


def _children(table: Mapping[int, _Process], pid: int) -> list[int]:
    return [child for child, process in table.items() if process.ppid == pid]


def _tree(table: Mapping[int, _Process], pid: int) -> float:
    """``pid`` and its live descendants, with what each has reaped."""
    process = table.get(pid)
    if process is None:
        return 0.0
    return process.own + process.reaped + sum(_tree(table, child)
                                              for child in _children(table, pid))


def parts(table: Mapping[int, _Process], me: int, servers: Mapping[str, int | None]
          ) -> dict[str, float]:
    """CPU seconds so far by part (see the module), ``servers``: name → pid (None: not ours)."""
    web = encoders = 0.0
    ours = set(servers.values())
    for child in _children(table, me):
        if child in ours:  # a server this process started without detaching: its own part
            continue
        if "gunicorn" in table[child].command:
            web += table[child].own
            for worker in _children(table, child):
                web += table[worker].own
                encoders += sum(_tree(table, pid) for pid in _children(table, worker))
        else:
            encoders += _tree(table, child)
    seconds = {"web": web, "encoders": encoders}
    seconds.update({name: _tree(table, pid) for name, pid in servers.items() if pid})
    seconds["this process"] = table[me].own if me in table else 0.0
    return seconds


class Meter:
    """Reads the parts at the start and the end of a measured window, in a thread of its own
    that sleeps until each instant (``time.monotonic()`` values), so no client waits for it."""

    def __init__(self, servers: Mapping[str, int | None]) -> None:
        self.servers = dict(servers)
        self._thread: threading.Thread | None = None
        self._seconds: dict[str, float] = {}

    @staticmethod
    def available() -> bool:
        return (PROC / str(os.getpid()) / "stat").exists()

    def window(self, begin: float, end: float) -> None:
        if not self.available():
            return

        def read_at(instant: float) -> dict[str, float]:
            time.sleep(max(0.0, instant - time.monotonic()))
            return parts(_table(), os.getpid(), self.servers)

        def run() -> None:
            first = read_at(begin)
            last = read_at(end)
            self._seconds = {name: last[name] - first.get(name, 0.0) for name in last
                             if name in first}

        self._thread = threading.Thread(target=run, name="cpu-meter", daemon=True)
        self._thread.start()

    def seconds(self) -> dict[str, float]:
        """The window's CPU seconds by part; empty when nothing was measured."""
        if self._thread is not None:
            self._thread.join()
        return dict(self._seconds)


def per_request_line(label: str, seconds: Mapping[str, float], requests: int,
                     order: Iterable[str]) -> str | None:
    """``label  web 12.3 ms, … (total 27.5 ms)``: milliseconds of CPU per request by part, the
    parts with any time, in ``order``; None when nothing was measured."""
    if not seconds or not requests:
        return None
    shown = [(name, 1000 * seconds[name] / requests) for name in order
             if seconds.get(name, 0.0) > 0]
    total = 1000 * sum(seconds.values()) / requests
    return (f"{label}" + ", ".join(f"{name} {ms:.2f} ms" for name, ms in shown)
            + f" (total {total:.2f} ms)")
