"""Fault tests: servers are really stopped, indexes really deleted, processes really killed."""

import http.client
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.conf import settings

from contexts.embedded import free_port
from tests.api.conftest import api, world  # noqa: F401 - re-exported fixtures
from tests.conftest import ROOT, Services
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture


@dataclass
class WebServer:
    port: int
    process: subprocess.Popen

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 30
                ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


@pytest.fixture
def web_server(services: Services, transactional_db) -> Iterator[WebServer]:
    """gunicorn (threads, so several requests are in flight at once) on the test database,
    reading the lexical index the test wrote. Tests using it need committed data."""
    port = free_port()
    log = open(services.root / f"gunicorn-{port}.log", "ab")  # noqa: SIM115 - closed below
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR),
           "CONTEXTS_THROTTLE_AGENT": "1000000/min", "CONTEXTS_QUERY_ENCODER": "thread"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "contexts.wsgi:application", "--bind",
         f"127.0.0.1:{port}", "--workers", "1", "--worker-class", "gthread", "--threads", "4",
         "--log-level", "warning"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = WebServer(port, process)
    deadline = time.monotonic() + 120
    try:
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start: "
                                   + (services.root / f"gunicorn-{port}.log").read_text()[-2000:])
            try:
                if server.request("GET", "/api/", timeout=2)[0] < 500:
                    break
            except OSError:
                time.sleep(0.3)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
