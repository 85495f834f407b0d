"""Start the test OpenID provider from a test: ``running_provider`` and the ``oidc_provider``
fixture, and ``Provider``, the handle tests set clients, users and tampering through.

Import the fixture into a test module (``from tests.oidc_provider.fixture import
oidc_provider``): pytest loads conftest.py files only from test directories, and this package is
the provider, not a test directory of the project's.
"""

from __future__ import annotations

import html
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 60.0
REQUEST_TIMEOUT = 30.0


class ProviderError(RuntimeError):
    """The provider did not start, or its control API refused a request."""


class Provider:
    """A running provider: its URLs and its control API."""

    def __init__(self, base_url: str, control_secret: str, process: subprocess.Popen,
                 log_path: Path) -> None:
        self.base_url = base_url
        self.control_secret = control_secret
        self.process = process
        self.log_path = log_path

    @property
    def issuer(self) -> str:
        """Exactly the ``iss`` of its ID tokens and the discovery document's ``issuer``."""
        return f"{self.base_url}/o"

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def client(self, client_id: str, client_secret: str, redirect_uris: Iterable[str]) -> None:
        """Create or update a confidential authorization-code client (RS256, no consent)."""
        self._control("clients", {"client_id": client_id, "client_secret": client_secret,
                                  "redirect_uris": list(redirect_uris)})

    def user(self, username: str, password: str, email: str, email_verified: bool = True,
             name: str = "", groups: Iterable[str] = (), active: bool = True) -> str:
        """Create or update (by username) a user; returns the ``sub`` of their ID tokens."""
        answer = self._control("users", {
            "username": username, "password": password, "email": email,
            "email_verified": email_verified, "name": name, "groups": list(groups),
            "active": active})
        return answer["sub"]

    def tamper(self, mode: str) -> None:
        """Spoil the next ID tokens: "bad_signature", "wrong_audience", "expired"; "none"
        stops."""
        self._control("tamper", {"mode": mode})

    def log(self) -> str:
        """What the provider wrote to stdout and stderr (failed requests, tracebacks)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """Stop the provider's process group; waits for it."""
        for signum, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            if self.process.poll() is not None:
                return
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _control(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(f"{self.base_url}/control/{endpoint}", json=payload,
                                 headers={"X-Control-Secret": self.control_secret},
                                 timeout=REQUEST_TIMEOUT)
        if response.status_code != 200:
            raise ProviderError(
                f"control/{endpoint} answered {response.status_code}: {response.text}")
        return response.json()


def sign_in_at_provider(provider: Provider, authorization_url: str, username: str,
                        password: str, redirect_uris: str | tuple[str, ...]) -> str:
    """What a browser does at the provider: follow its redirects, signing in through its login
    form on the way; returns the URL (whole) it sends the browser back to, the first redirect
    to one of ``redirect_uris``."""
    session = requests.Session()
    response = session.get(authorization_url, allow_redirects=False, timeout=REQUEST_TIMEOUT)
    for _ in range(10):
        if response.status_code == 200 and 'name="password"' in response.text:
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
            assert token, response.text
            form = {"csrfmiddlewaretoken": token.group(1), "username": username,
                    "password": password}
            next_field = re.search(r'name="next" value="([^"]*)"', response.text)
            if next_field:
                form["next"] = html.unescape(next_field.group(1))
            # A browser's POST carries Origin, which Django's CSRF check compares with Host.
            response = session.post(response.url, data=form, allow_redirects=False,
                                    headers={"Origin": provider.base_url},
                                    timeout=REQUEST_TIMEOUT)
            continue
        assert response.status_code in (301, 302, 303), (response.status_code, response.text)
        target = urljoin(response.url, response.headers["Location"])
        if target.startswith(redirect_uris):
            return target
        response = session.get(target, allow_redirects=False, timeout=REQUEST_TIMEOUT)
    raise AssertionError("too many redirects")


@contextmanager
def running_provider(tmp_dir: Path, access_token_seconds: int = 300,
                     id_token_seconds: int = 300) -> Iterator[Provider]:
    """Run a provider (its database and log in ``tmp_dir``) for the duration of the block."""
    tmp_dir = Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    log_path = tmp_dir / "provider.log"
    control_secret = secrets.token_urlsafe(32)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
           "OIDC_PROVIDER_CONTROL_SECRET": control_secret, "PYTHONPATH": str(ROOT),
           "PYTHONUNBUFFERED": "1"}
    # A file rather than a pipe: nobody reads a pipe while the tests run, and a full one
    # would block the provider.
    with listener, open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.oidc_provider", "--fd", str(listener.fileno()),
             "--data-dir", str(tmp_dir / "data"),
             "--access-token-seconds", str(access_token_seconds),
             "--id-token-seconds", str(id_token_seconds)],
            cwd=ROOT, env=env, pass_fds=[listener.fileno()], stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    # From here only the child holds the socket: if it dies, connecting fails at once.
    provider = Provider(f"http://127.0.0.1:{port}", control_secret, process, log_path)
    try:
        _wait_until_serving(provider)
        yield provider
    finally:
        provider.stop()


def _wait_until_serving(provider: Provider) -> None:
    """Until discovery answers 200: connections made before the child accepts wait in the
    listen backlog, so each attempt may block for the whole start-up (bounded)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while (remaining := deadline - time.monotonic()) > 0:
        if provider.process.poll() is not None:
            raise ProviderError(f"the OpenID provider exited with {provider.process.returncode}:"
                                f"\n{provider.log()}")
        try:
            response = requests.get(provider.discovery_url, timeout=min(remaining, 10))
            if response.status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.05)
    provider.stop()
    raise ProviderError(f"the OpenID provider did not answer within {STARTUP_TIMEOUT:.0f} s:"
                        f"\n{provider.log()}")


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """One provider for the session (a few seconds to start). Tests share it: use distinct
    client ids and usernames, and set tamper back to "none" (``provider.tamper("none")``)."""
    with running_provider(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider
