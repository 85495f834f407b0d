"""``manage.py runstack`` (what ``make run`` calls): everything in the foreground.

Starts the embedded services (unless external URLs are set), migrates, creates the demo
organization and admin on first start, then runs gunicorn, a Celery worker and Celery beat as
children. SIGINT or SIGTERM stops every child (each in its own process group, so grandchildren
such as gunicorn workers go too) and then the embedded services: no orphans.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from contexts.embedded import EmbeddedServiceError, EmbeddedStack

STOP_TIMEOUT = 15.0


class Command(BaseCommand):
    help = "Run web server, Celery worker and beat (and the embedded services) in the foreground."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--no-demo", action="store_true", help="skip the demo content")

    def handle(self, *args, port: int, host: str, no_demo: bool, **options) -> None:
        self._stopping = False
        self.children: list[subprocess.Popen] = []
        stack = EmbeddedStack.from_settings()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        try:
            try:
                for status in stack.start():
                    self.stdout.write(status.line())
            except EmbeddedServiceError as exc:
                raise CommandError(str(exc)) from exc
            call_command("migrate", interactive=False, verbosity=0)
            call_command("collectstatic", interactive=False, verbosity=0)
            call_command("bootstrap", demo=not no_demo)
            self._spawn_children(host, port)
            self.stdout.write(self.style.SUCCESS(
                f"\nContexts is running at http://{host}:{port}/  (health: /healthz, "
                f"API docs: /api/docs/). Press Ctrl-C to stop.\n"
            ))
            self._watch()
        except _Stop:
            pass
        finally:
            self._stop_children()
            stack.stop_started()
            self.stdout.write("stopped.")

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
                    "--worker-class", "uvicorn.workers.UvicornWorker", "--bind",
                    f"{host}:{port}", "--workers", os.environ.get("WEB_CONCURRENCY", "2"),
                    "--access-logfile", "-", "--graceful-timeout", "5"],
            "worker": [python, "-m", "celery", "-A", "contexts", "worker", "--loglevel", "INFO",
                       "--concurrency", os.environ.get("CELERY_CONCURRENCY", "1"),
                       "--hostname", f"worker-{os.getpid()}@%h"],
            "beat": [python, "-m", "celery", "-A", "contexts", "beat", "--loglevel", "INFO",
                     "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        for name, command in commands.items():
            # Own process group: a terminal's Ctrl-C reaches us once, and we stop the children
            # in order instead of racing their own signal handling.
            self.children.append(subprocess.Popen(command, env=env, start_new_session=True))
            self.stdout.write(f"started {name} (pid {self.children[-1].pid})")

    def _watch(self) -> None:
        while True:
            for child in self.children:
                if child.poll() is not None:
                    raise CommandError(f"{child.args[2:4]} exited with {child.returncode}")
            time.sleep(0.5)

    def _stop_children(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for child in self.children:
            _signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
            # Workers forked by gunicorn/celery may outlive their parent for a moment.
            _signal_group(child, signal.SIGKILL)


class _Stop(Exception):
    pass


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
