"""Driving the retrieval endpoint over real HTTP: a gunicorn to serve it, one retrieve call (REST's
``POST /api/contexts/retrieve`` or MCP's ``tools/call`` of ``retrieve``), and a closed-loop load
generator with its report.

Shared by ``manage.py bench_retrieve`` (latency of one client against the sum of the raw parts)
and ``manage.py loadtest`` (many concurrent clients for a fixed time). Standard library only on
the client side: ``http.client`` keeps one persistent connection per client, like an agent.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings

from devtools.cpu_use import Meter, per_request_line

RETRIEVE_PATH = "/api/contexts/retrieve"
MCP_PATH = "/mcp"
STARTUP_TIMEOUT = 120.0
REQUEST_TIMEOUT = 30.0
# The parts a request's CPU is reported by, in this order (devtools.cpu_use).
CPU_PARTS = ("web", "encoders", "this process", "postgres", "redis")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# --- the server ----------------------------------------------------------------------------------
@contextmanager
def gunicorn(workers: int, *, asgi: bool = False, threads: int = 1,
             env: dict[str, str] | None = None, keepalive: int = 2,
             extra_args: Sequence[str] = ()) -> Iterator[str]:
    """Serve the project with gunicorn on a free local port; yields its base URL.

    ``asgi`` uses uvicorn workers on ``contexts.asgi`` as ``make run`` does; otherwise the WSGI
    app, with ``threads`` requests in flight per worker. gunicorn inherits an already bound
    socket (``fd://``), so no other process can take the port between choosing and binding it.
    The whole process group is stopped afterwards. ``keepalive``: seconds an idle keep-alive
    connection stays open (gunicorn's default, 2; sync workers close every connection anyway).
    ``extra_args``: more gunicorn options (``--access-logfile``, ...).
    """
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    from contexts.web.serving import ASGI_WORKER_CLASS

    app = (["contexts.asgi:application", "--worker-class", ASGI_WORKER_CLASS]
           if asgi else ["contexts.wsgi:application"])
    with listener:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", *app, "--bind", f"fd://{listener.fileno()}",
             "--workers", str(workers), "--threads", str(threads), "--log-level", "warning",
             "--keep-alive", str(keepalive),
             "--graceful-timeout", "5", *extra_args],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "contexts.settings", **(env or {})},
            cwd=settings.BASE_DIR, pass_fds=[listener.fileno()], start_new_session=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(server, port)
        yield base_url
    finally:
        _stop(server)


def _wait_until_serving(server: subprocess.Popen, port: int) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"gunicorn did not answer within {STARTUP_TIMEOUT:.0f} s")


def _stop(server: subprocess.Popen) -> None:
    # The group: gunicorn's workers and their query-encoder children go too.
    for signum, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(server.pid, signum)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


# --- one call ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ask:
    """One retrieval as an agent would send it."""

    query: str
    scope: dict[str, str]
    budget_tokens: int = 3200

    def arguments(self) -> dict:
        return {"query": self.query, "scope": self.scope, "budget_tokens": self.budget_tokens}

    def body(self) -> str:
        return json.dumps(self.arguments())


def retrieve(conn: http.client.HTTPConnection, token: str, ask: Ask) -> tuple[int, bytes, float]:
    """POST one retrieval on ``conn``; (status, body, milliseconds)."""
    started = time.perf_counter()
    conn.request("POST", RETRIEVE_PATH, body=ask.body(), headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    payload = response.read()
    return response.status, payload, (time.perf_counter() - started) * 1000


def mcp_retrieve(conn: http.client.HTTPConnection, token: str, ask: Ask
                 ) -> tuple[str, bytes, float]:
    """One MCP ``tools/call`` of ``retrieve`` on ``conn`` (the server is stateless: no session
    to open); (outcome, body, milliseconds). The outcome is ``"200"`` for a result, the HTTP
    status when the request was refused, ``mcp:<code>`` for a tool error (its REST error code)
    and ``jsonrpc:<code>`` for a JSON-RPC error."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "retrieve", "arguments": ask.arguments()}})
    started = time.perf_counter()
    conn.request("POST", MCP_PATH, body=body, headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}"})
    response = conn.getresponse()
    payload = response.read()
    ms = (time.perf_counter() - started) * 1000
    return _mcp_outcome(response.status, payload), payload, ms


def _mcp_outcome(status: int, payload: bytes) -> str:
    if status != 200:
        return str(status)
    try:
        answer = json.loads(payload)
    except ValueError:
        return "mcp:not_json"
    if "error" in answer:
        return f"jsonrpc:{answer['error'].get('code')}"
    result = answer.get("result") or {}
    if result.get("isError"):
        error = (result.get("structuredContent") or {}).get("error") or {}
        return f"mcp:{error.get('code', 'error')}"
    return "200"


def rest_call(conn: http.client.HTTPConnection, token: str, ask: Ask
              ) -> tuple[str, bytes, float]:
    status, payload, ms = retrieve(conn, token, ask)
    return str(status), payload, ms


# How a client sends one ask: (outcome, body, milliseconds); outcome "200" is an answer.
Call = Callable[[http.client.HTTPConnection, str, Ask], tuple[str, bytes, float]]
SURFACES: dict[str, Call] = {"rest": rest_call, "mcp": mcp_retrieve}


def connect(base_url: str, timeout: float = REQUEST_TIMEOUT) -> http.client.HTTPConnection:
    parts = urlsplit(base_url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return kind(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)


# --- many clients --------------------------------------------------------------------------------
@dataclass
class LoadResult:
    """What the measured phase saw; warm-up requests count only towards ``warmup_errors``."""

    seconds: float
    latencies_ms: list[float] = field(default_factory=list)  # every measured answer, any status
    statuses: Counter = field(default_factory=Counter)       # "200", "429", "ConnectionError"…
    completed_at: list[float] = field(default_factory=list)  # seconds since the phase began
    warmup_errors: Counter = field(default_factory=Counter)
    first_error: str = ""
    began_at: float = 0.0    # wall clock (time.time()) of the measured phase, for the traces
    ended_at: float = 0.0
    cache_hits: int = 0      # query-vector cache hits / lookups in the measured phase, when
    cache_lookups: int = 0   # counted (the endpoint's from its traces, raw capacity's itself)
    # CPU seconds of the measured phase by part of the system (devtools.cpu_use); empty when
    # not measured.
    cpu_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def cache_hit_share(self) -> float:
        return self.cache_hits / self.cache_lookups if self.cache_lookups else 0.0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def errors(self) -> int:
        return self.requests - self.statuses.get("200", 0)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def slowest_window_rate(self, window: float = 5.0) -> float:
        """Requests per second in the emptiest full window: what was *sustained*."""
        windows = int(self.seconds // window)
        if windows < 1:
            return self.rate
        counts = Counter(int(t // window) for t in self.completed_at if t < windows * window)
        return min(counts.get(i, 0) for i in range(windows)) / window


def run_load(base_url: str, tokens: Sequence[str], next_ask: Callable[[], Ask], *,
             duration: float, warmup: float = 5.0, prime: int = 2,
             call: Call = rest_call, meter: Meter | None = None) -> LoadResult:
    """``len(tokens)`` closed-loop clients (one thread, connection and token each) send the asks
    ``next_ask`` gives (a :class:`devtools.questions.QuestionStream`, shared) through ``call``:
    first ``prime`` requests each (a web process takes connections once its query encoder
    answers, seconds after it starts), then — every client connected again, so that the
    connections spread over every worker that is up — ``prime`` more, then ``warmup`` seconds of
    load, then ``duration`` measured seconds. ``meter``: reads the measured seconds' CPU use."""
    lock = threading.Lock()
    clock: dict[str, float] = {}
    result = LoadResult(seconds=duration)

    def start_clock() -> None:
        clock["begin"] = time.monotonic() + warmup
        clock["end"] = clock["begin"] + duration
        result.began_at = time.time() + warmup
        result.ended_at = result.began_at + duration
        if meter is not None:
            meter.window(clock["begin"], clock["end"])

    connected = threading.Barrier(len(tokens))
    primed = threading.Barrier(len(tokens), action=start_clock)

    def client(n: int) -> None:
        # A cold web process serves only once its encoder has started: priming waits as long
        # as startup may take, the measured requests 30 s at most.
        conn = connect(base_url, timeout=STARTUP_TIMEOUT)

        def send() -> tuple[str, bytes, float]:
            nonlocal conn
            try:
                return call(conn, tokens[n], next_ask())
            except (OSError, http.client.HTTPException) as exc:
                conn.close()  # reconnect on the next request
                conn = connect(base_url, timeout=conn.timeout)
                return type(exc).__name__, str(exc).encode(), 0.0

        def warm(requests: int) -> None:
            for _ in range(requests):
                outcome, _payload, _ms = send()
                if outcome != "200":
                    with lock:
                        result.warmup_errors[outcome] += 1

        warm(prime)
        # Connected again once primed: a worker still starting up when the clients first
        # connected got none of the connections, and a keep-alive connection stays with its
        # worker for the whole run.
        connected.wait(timeout=STARTUP_TIMEOUT * prime)
        conn.close()
        conn = connect(base_url, timeout=STARTUP_TIMEOUT)
        warm(prime)
        primed.wait(timeout=STARTUP_TIMEOUT * prime)
        conn.timeout = REQUEST_TIMEOUT
        if conn.sock is not None:
            conn.sock.settimeout(REQUEST_TIMEOUT)
        while (now := time.monotonic()) < clock["end"]:
            outcome, payload, ms = send()
            with lock:
                if now < clock["begin"]:
                    if outcome != "200":
                        result.warmup_errors[outcome] += 1
                    continue
                result.statuses[outcome] += 1
                result.completed_at.append(time.monotonic() - clock["begin"])
                if ms:
                    result.latencies_ms.append(ms)
                if outcome != "200" and not result.first_error:
                    result.first_error = f"{outcome}: {payload[:300]!r}"
        conn.close()

    threads = [threading.Thread(target=client, args=(n,), daemon=True)
               for n in range(len(tokens))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if meter is not None:
        result.cpu_seconds = meter.seconds()
    return result


def report_lines(result: LoadResult) -> list[str]:
    lines: list[str] = [f"requests        {result.requests} in {result.seconds:.0f} s: "
             f"{result.rate:.1f} req/s (slowest 5 s window {result.slowest_window_rate():.1f})"]
    if result.latencies_ms:
        values = result.latencies_ms
        lines.append(f"retrieve        p50 {percentile(values, 0.5):7.1f} ms   "
                     f"p95 {percentile(values, 0.95):7.1f} ms   "
                     f"p99 {percentile(values, 0.99):7.1f} ms   max {max(values):7.1f} ms")
    share = 100 * result.errors / result.requests if result.requests else 0.0
    lines.append(f"errors          {result.errors} ({share:.2f} %)")
    throttled = result.statuses.get("429", 0)
    if throttled:
        lines.append(f"  throttled     {throttled} (429: a token's rate was exceeded)")
    lines.append("status codes    " + ", ".join(
        f"{code}: {count}" for code, count in sorted(result.statuses.items())))
    if result.warmup_errors:
        lines.append("warm-up errors  " + ", ".join(
            f"{code}: {count}" for code, count in sorted(result.warmup_errors.items())))
    if result.first_error:
        lines.append(f"first error     {result.first_error}")
    if result.cache_lookups:
        lines.append(f"cache hits      {result.cache_hits} of {result.cache_lookups} "
                     f"query-vector lookups ({100 * result.cache_hit_share:.1f} %)")
    cpu = per_request_line("cpu a request   ", result.cpu_seconds, result.requests, CPU_PARTS)
    if cpu:
        lines.append(cpu)
    return lines


def capacity_line(result: LoadResult, raw: LoadResult) -> str:
    """``manage.py loadtest``'s last line: the endpoint's throughput next to the raw capacity
    for the same questions (``devtools.raw_capacity``), and the endpoint's latency, errors
    (warm-up errors included) and query-vector cache hits."""
    ratio = result.rate / raw.rate if raw.rate else 0.0
    latencies = result.latencies_ms or [0.0]
    errors = result.errors + sum(result.warmup_errors.values())
    return (f"throughput {result.rate:.1f} req/s, raw capacity {raw.rate:.1f} req/s, "
            f"ratio {ratio:.2f}; p50 {percentile(latencies, 0.5):.1f} ms, "
            f"p99 {percentile(latencies, 0.99):.1f} ms; errors {errors}; "
            f"cache hits {100 * result.cache_hit_share:.1f} %")
