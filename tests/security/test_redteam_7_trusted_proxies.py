"""Red-team finding 7: the login throttle could be bypassed by rotating ``X-Forwarded-For``,
because the server trusted proxy headers from loopback (uvicorn's default).

Against a real server started as ``make run`` and the Docker image start it (gunicorn with the
project's uvicorn worker serving ``contexts.asgi``): without ``CONTEXTS_TRUSTED_PROXIES`` a
forwarded header changes nothing, so the throttle keys on the real peer; with the peer listed
as a proxy, the right-most address that is not a proxy is the client.
"""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from django.test import RequestFactory, override_settings

from contexts.kernel.client_address import client_address
from contexts.web.serving import ASGI_WORKER_CLASS
from devtools.loadtest import gunicorn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 3  # failed log-ins per (address, username) and window in these servers


class Server:
    def __init__(self, base_url: str) -> None:
        self.port = urlsplit(base_url).port

    def _request(self, method: str, path: str, body: str | None = None,
                 headers: dict[str, str] | None = None
                 ) -> tuple[int, http.client.HTTPMessage, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.headers, response.read().decode()
        finally:
            conn.close()

    def failed_login(self, username: str, forwarded_for: str | None = None) -> int:
        """One wrong password for ``username``: 200 (the form again) or 429 (locked out)."""
        status, headers, page = self._request("GET", "/login/")
        assert status == 200, page[:300]
        cookie = re.search(r"csrftoken=([^;]+)", " ".join(headers.get_all("Set-Cookie"))).group(1)
        form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        headers = {"Content-Type": "application/x-www-form-urlencoded",
                   "Cookie": f"csrftoken={cookie}"}
        if forwarded_for is not None:
            headers["X-Forwarded-For"] = forwarded_for
        body = urlencode({"username": username, "password": "not-the-password",
                          "csrfmiddlewaretoken": form_token})
        status, _, page = self._request("POST", "/login/", body, headers)
        assert status in (200, 429), page[:300]
        return status


def _serve(services, static_root: Path, **extra_env: str) -> Iterator[Server]:
    env = {**services.env(), "STATIC_ROOT": str(static_root),
           "CONTEXTS_LOGIN_FAILURE_LIMIT": str(LIMIT),
           "CONTEXTS_LOGIN_FAILURE_WINDOW_SECONDS": "3600",
           "CONTEXTS_QUERY_ENCODER": "thread", **extra_env}
    with gunicorn(1, asgi=True, env=env) as base_url:
        yield Server(base_url)


@pytest.fixture(scope="module")
def static_root(services, tmp_path_factory) -> Path:
    """The login page is rendered with the collected (manifest) statics, as runstack does."""
    root = tmp_path_factory.mktemp("static")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                   cwd=ROOT, env={**services.env(), "STATIC_ROOT": str(root)}, check=True,
                   timeout=300)
    return root


@pytest.fixture(scope="module")
def default_server(services, django_db_setup, static_root) -> Iterator[Server]:
    yield from _serve(services, static_root)


@pytest.fixture(scope="module")
def proxied_server(services, django_db_setup, static_root) -> Iterator[Server]:
    yield from _serve(services, static_root, CONTEXTS_TRUSTED_PROXIES="127.0.0.1")


def _fresh_user() -> str:
    return f"victim-{uuid.uuid4().hex[:10]}"  # its own throttle buckets, whatever ran before


# django_db: the session then creates the test database the servers read (nothing is written).
@pytest.mark.django_db
def test_rotating_x_forwarded_for_does_not_reset_the_login_throttle(default_server: Server):
    username = _fresh_user()
    for n in range(LIMIT):
        assert default_server.failed_login(username, f"203.0.113.{n + 1}") == 200
    # Every attempt counted against the real peer (127.0.0.1): a new forwarded address, a
    # forged chain, or no header at all are all locked out.
    assert default_server.failed_login(username, "203.0.113.99") == 429
    assert default_server.failed_login(username, "198.51.100.1, 127.0.0.1") == 429
    assert default_server.failed_login(username) == 429


@pytest.mark.django_db
def test_a_configured_proxy_is_trusted_for_its_forwarded_address(proxied_server: Server):
    username = _fresh_user()
    for _ in range(LIMIT):
        assert proxied_server.failed_login(username, "203.0.113.7") == 200
    assert proxied_server.failed_login(username, "203.0.113.7") == 429
    # Another client behind the same proxy has its own bucket ...
    assert proxied_server.failed_login(username, "203.0.113.8") == 200
    # ... and a client cannot escape its own by prepending addresses: the proxy appends the
    # real peer, and the right-most address that is not a proxy is the client.
    assert proxied_server.failed_login(username, "192.0.2.1, 203.0.113.7") == 429
    assert proxied_server.failed_login(username, "192.0.2.2, 203.0.113.7, 127.0.0.1") == 429


def test_make_run_and_the_docker_image_start_that_worker():
    """The servers above are started the way ``make run`` and the image start theirs."""
    runstack = (ROOT / "contexts/management/commands/runstack.py").read_text()
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    assert "ASGI_WORKER_CLASS" in runstack and "uvicorn.workers" not in runstack
    assert f'"{ASGI_WORKER_CLASS}"' in dockerfile and "uvicorn.workers" not in dockerfile


# --- the one place that decides the client address, in-process ----------------------------------

def _address(remote_addr: str, forwarded_for: str | None = None) -> str:
    extra = {"REMOTE_ADDR": remote_addr}
    if forwarded_for is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return client_address(RequestFactory().get("/", **extra))


def test_forwarded_headers_are_ignored_unless_the_peer_is_a_configured_proxy():
    with override_settings(TRUSTED_PROXIES=[]):
        assert _address("127.0.0.1", "203.0.113.5") == "127.0.0.1"
    with override_settings(TRUSTED_PROXIES=["10.0.0.0/8"]):
        assert _address("127.0.0.1", "203.0.113.5") == "127.0.0.1"
        assert _address("10.1.2.3", "203.0.113.5") == "203.0.113.5"
        # Right-most untrusted hop; proxies inside the range are skipped; ports are dropped.
        assert _address("10.1.2.3", "192.0.2.1, 203.0.113.5:4711, 10.9.9.9") == "203.0.113.5"
        assert _address("10.1.2.3", "[2001:db8::5]:443") == "2001:db8::5"
        # Every hop a proxy: the left-most one is the client.
        assert _address("10.1.2.3", "10.0.0.7, 10.0.0.8") == "10.0.0.7"
        # No header, or nothing usable in it: the peer itself.
        assert _address("10.1.2.3") == "10.1.2.3"
        assert _address("10.1.2.3", " , ") == "10.1.2.3"
        # A hop that is not an address ends the walk at the last proxy that vouched for it.
        assert _address("10.1.2.3", "203.0.113.5, not-an-ip") == "10.1.2.3"


def test_a_malformed_trusted_proxy_setting_stops_the_start():
    """A configuration error, which the start-up check refuses to start on
    (tests/foundation/test_configuration.py), never an entry dropped or matched as a literal."""
    from contexts import config

    env = config.environment({"CONTEXTS_TRUSTED_PROXIES": "10.0.0.0/8, ::1, 192.168.1.1"})
    assert env("CONTEXTS_TRUSTED_PROXIES") == ["10.0.0.0/8", "::1/128", "192.168.1.1/32"]
    assert env.errors == []
    env = config.environment({"CONTEXTS_TRUSTED_PROXIES": "10.0.0.0/8, proxy.internal"})
    assert env("CONTEXTS_TRUSTED_PROXIES") == []  # trusts nobody, and the start is refused
    assert env.errors == ["CONTEXTS_TRUSTED_PROXIES: 'proxy.internal' is not an IP address "
                          "or CIDR network"]
