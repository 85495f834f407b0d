"""Fault tests: servers are really stopped, indexes really deleted, processes really killed."""

import http.client
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from django.conf import settings

from devtools.loadtest import gunicorn
from tests.api.conftest import api, world  # noqa: F401 - re-exported fixtures
from tests.conftest import Services
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture


@dataclass
class WebServer:
    port: int

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
    """gunicorn (4 threads, so several requests are in flight at once) on the test database,
    reading the lexical index the test wrote. Tests using it need committed data."""
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR),
           "CONTEXTS_THROTTLE_AGENT": "1000000/min", "CONTEXTS_QUERY_ENCODER": "thread"}
    with gunicorn(1, threads=4, env=env) as base_url:
        yield WebServer(urlsplit(base_url).port)
