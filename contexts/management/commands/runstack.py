"""``manage.py runstack`` (what ``make run`` calls): everything in the foreground.

Starts the embedded services (unless external URLs are set), migrates, creates the demo
organization and admin on first start, then runs gunicorn, two Celery workers — one per lane,
bulk and interactive (``contexts/ingestion/lanes.py``): "Sync now" and uploads never wait
behind the demo's ingest — and Celery beat as children. It prints the address only once
``/readyz`` answers 200 (the web processes load the query encoder first, which takes from
seconds to a minute), saying meanwhile what it waits for. SIGINT or SIGTERM stops every child
(each in its own process group, so grandchildren such as gunicorn workers go too) and then the
embedded services: no orphans.

A worker or beat that dies is started again after a back-off (1 s, 2 s, 4 s … 30 s; back to 1 s
once it stayed up a minute), with a line saying so; web and the services stay up meanwhile. The
dead worker's job is picked up again through its lease (``contexts/services/job_leases.py``).
Only web dying (gunicorn already restarts its own workers) stops the stack.
"""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from contexts.ingestion import lanes
from contexts.stack import runsettings
from contexts.stack.servers import EmbeddedServiceError, EmbeddedStack
from contexts.web.serving import ASGI_WORKER_CLASS

STOP_TIMEOUT = 15.0
RESTARTABLE = ("worker", "worker-interactive", "beat")
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
STABLE_AFTER = 60.0  # seconds up after which a child's next death starts the back-off afresh
READY_PATH = "/readyz"
READY_TIMEOUT = 600.0  # seconds: past this the address is printed anyway, with a warning


class Command(BaseCommand):
    help = "Run web server, Celery worker and beat (and the embedded services) in the foreground."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--no-demo", action="store_true", help="skip the demo content")

    def handle(self, *args, port: int, host: str, no_demo: bool, **options) -> None:
        self._stopping = False
        self.children: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}
        self.supervision: dict[str, _Supervision] = {}
        stack = EmbeddedStack.from_settings()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            try:
                for status in stack.start():
                    self.stdout.write(status.line())
            except EmbeddedServiceError as exc:
                raise CommandError(str(exc)) from exc
            base_url = self._record_settings(host, port)
            call_command("migrate", interactive=False, verbosity=0)
            call_command("collectstatic", interactive=False, verbosity=0)
            # A lexical index built by an earlier version's schema is rebuilt from PostgreSQL
            # before the workers write to it (docs/operations.md, "Upgrading").
            call_command("rebuild_index", outdated=True)
            call_command("bootstrap", demo=not no_demo)
            self._spawn_children(host, port)
            self._announce_when_ready(host, port, base_url)
            self._watch()
        except _Stop:
            pass
        finally:
            self._stop_children()
            stack.stop_started()
            self.stdout.write("stopped.")

    def _record_settings(self, host: str, port: int) -> str:
        """Settle the base URL of e-mail links, hand it to the children, and record this
        stack's settings in var/run-settings.json for the `manage.py` commands run from this
        checkout in other shells (contexts/stack/runsettings.py); returns the base URL."""
        base_url = (os.environ.get("CONTEXTS_BASE_URL")
                    or runsettings.served_url(host, port)).rstrip("/")
        # The settings were read before --host/--port were known: this process (bootstrap)
        # and its children agree with what is served.
        os.environ["CONTEXTS_BASE_URL"] = settings.BASE_URL = base_url
        recorded = {"CONTEXTS_VAR_DIR": str(settings.VAR_DIR),
                    "CONTEXTS_PG_PORT": str(settings.EMBEDDED_PG_PORT),
                    "CONTEXTS_REDIS_PORT": str(settings.EMBEDDED_REDIS_PORT),
                    "CONTEXTS_BASE_URL": base_url}
        # Only when set: by default the index lives in the var dir, wherever that is.
        if os.environ.get("CONTEXTS_INDEX_DIR"):
            recorded["CONTEXTS_INDEX_DIR"] = str(settings.LEXICAL_INDEX_DIR)
        written = runsettings.record(recorded, address=runsettings.served_url(host, port))
        if written is not None:
            self.stdout.write(f"settings recorded in {written} (manage.py commands from this "
                              "checkout use them unless their environment says otherwise)")
        return base_url

    def _announce_when_ready(self, host: str, port: int, base_url: str) -> None:
        """Print the address once the web server answers ``/readyz``; until then, what it
        waits for (a line when that changes, and every ``say_every`` seconds)."""
        address = runsettings.served_url(host, port)
        started = time.monotonic()

        def web_alive() -> bool:
            return self.children["web"].poll() is None

        def waiting(reason: str) -> None:
            self.stdout.write(f"waiting for the web server ({time.monotonic() - started:.0f} s):"
                              f" {reason}")

        ready = wait_until_serving(f"http://{_local(host)}:{port}{READY_PATH}",
                                   alive=web_alive, on_wait=waiting, timeout=READY_TIMEOUT)
        if not web_alive():
            raise CommandError(f"web exited with {self.children['web'].returncode} before "
                               "it answered")
        if not ready:
            self.stderr.write(f"{READY_PATH} did not answer 200 within {READY_TIMEOUT:.0f} s;"
                              " see /healthz and the lines above.")
        self.stdout.write(self.style.SUCCESS(
            f"\nContexts is up at {address}/  (answered after "
            f"{time.monotonic() - started:.1f} s; health: {READY_PATH}, API docs: /api/docs/)."
            f" Links in e-mails start with {base_url} (CONTEXTS_BASE_URL). The demo's ingest "
            "shows its progress on the organization's overview. Press Ctrl-C to stop.\n"
        ))

    def _on_signal(self, signum: int, frame) -> None:
        if not self._stopping:
            self._stopping = True
            raise _Stop()

    def _spawn_children(self, host: str, port: int) -> None:
        python = sys.executable
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "contexts.settings"}
        commands = {
            # ASGI (uvicorn workers): /mcp is the MCP SDK's Streamable HTTP app, next to Django.
            "web": [python, "-m", "gunicorn", "contexts.asgi:application",
                    "--worker-class", ASGI_WORKER_CLASS, "--bind",
                    f"{host}:{port}", "--workers", os.environ.get("WEB_CONCURRENCY", "2"),
                    "--access-logfile", "-", "--graceful-timeout", "5"],
            # One worker per lane (contexts/ingestion/lanes.py), one process each: the bulk
            # one encodes with every core (torch), so a second bulk process would only halve
            # each one's speed; the interactive one sleeps until a person asks for something.
            # It also drains "celery", the queue of messages sent before the lanes existed.
            "worker": _worker(python, lanes.BULK),
            "worker-interactive": _worker(python, lanes.INTERACTIVE),
            # Beat at WARNING: at INFO it logs every due task, dozens a minute, which buried the
            # worker's own lines in `make run`'s output.
            "beat": [python, "-m", "celery", "-A", "contexts", "beat", "--loglevel", "WARNING",
                     "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        self.env = env
        self.commands = commands
        for name in commands:
            self._start(name)

    def _start(self, name: str) -> None:
        # Own process group: a terminal's Ctrl-C reaches us once, and we stop the children
        # in order instead of racing their own signal handling.
        child = subprocess.Popen(self.commands[name], env=self.env, start_new_session=True)
        self.children[name] = child
        state = self.supervision.setdefault(name, _Supervision())
        state.started_at, state.restart_at = time.monotonic(), None
        self.stdout.write(f"started {name} (pid {child.pid})")

    def _watch(self) -> None:
        while True:
            now = time.monotonic()
            for name, child in list(self.children.items()):
                state = self.supervision[name]
                if state.restart_at is not None:
                    if now >= state.restart_at:
                        self._start(name)
                elif child.poll() is not None:
                    if name not in RESTARTABLE:
                        raise CommandError(f"{name} exited with {child.returncode}")
                    self._schedule_restart(name, child, now)
            time.sleep(0.2)

    def _schedule_restart(self, name: str, child: subprocess.Popen, now: float) -> None:
        # Its pool children die with it (Celery sets PDEATHSIG); the group kill makes sure, so
        # no orphan keeps a job's database lock while the new worker starts.
        _signal_group(child, signal.SIGKILL)
        state = self.supervision[name]
        if now - state.started_at >= STABLE_AFTER:
            state.failures = 0
        delay = min(BACKOFF_FIRST * 2 ** state.failures, BACKOFF_MAX)
        state.failures += 1
        state.restart_at = now + delay
        self.stderr.write(
            f"{name} (pid {child.pid}) {_exit_reason(child.returncode)}; restarting it in "
            f"{delay:g} s (restart {state.failures} in a row). Web and the services stay up.")

    def _stop_children(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in self.children.values():
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in self.children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
            # Workers forked by gunicorn/celery may outlive their parent for a moment.
            _signal_group(child, signal.SIGKILL)


class _Stop(Exception):
    pass


def _worker(python: str, lane: str) -> list[str]:
    queues = ",".join(lanes.WORKER_QUEUES[lane])
    return [python, "-m", "celery", "-A", "contexts", "worker", "--loglevel", "INFO",
            "--concurrency", os.environ.get("CELERY_CONCURRENCY", "1"), "--queues", queues,
            "--hostname", f"{lane}-{os.getpid()}@%h"]


def _local(host: str) -> str:
    """Where this machine reaches a server bound to ``host`` (all interfaces: loopback)."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def wait_until_serving(url: str, *, alive: Callable[[], bool], on_wait: Callable[[str], None],
                       timeout: float, poll: float = 0.5, say_every: float = 10.0,
                       request_timeout: float = 2.0,
                       sleep: Callable[[float], None] = time.sleep) -> bool:
    """GET ``url`` until it answers 200 (True), ``alive()`` turns false or ``timeout`` seconds
    pass (False). ``on_wait(reason)`` hears why it is not ready yet — on the first miss, when
    the reason changes, and every ``say_every`` seconds — so the person at the terminal sees
    what the start-up waits for instead of an address that does not answer."""
    deadline = time.monotonic() + timeout
    said, said_at = "", 0.0
    while alive():
        reason = _not_ready(url, request_timeout)
        if reason is None:
            return True
        now = time.monotonic()
        if reason != said or now - said_at >= say_every:
            on_wait(reason)
            said, said_at = reason, now
        if now >= deadline:
            return False
        sleep(poll)
    return False


def _not_ready(url: str, request_timeout: float) -> str | None:
    """None when ``url`` answers 200; otherwise what is in the way, in a person's words."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                      timeout=request_timeout)
    try:
        conn.request("GET", parts.path or "/")
        status = conn.getresponse().status
    except ConnectionRefusedError:
        return "the web server is starting (nothing listens yet)"
    except TimeoutError:
        # gunicorn listens at once, but its workers accept only once their query encoder
        # answers (contexts/web/worker.py).
        return "the web processes are loading the query encoder"
    except (OSError, http.client.HTTPException) as exc:
        return f"no answer yet ({type(exc).__name__})"
    finally:
        conn.close()
    if status == 200:
        return None
    return (f"{parts.path} answers {status} (the database or this node's search index is not "
            "ready yet)")


@dataclass
class _Supervision:
    """Restart bookkeeping for one child."""

    started_at: float = 0.0
    failures: int = 0  # deaths in a row, each less than STABLE_AFTER after its start
    restart_at: float | None = None  # when a dead child is due to start again


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
