"""The served application (``contexts.asgi:application``: Django and ``/mcp``) under uvicorn in a
child process, and raw JSON-RPC calls to its MCP endpoint — raw, so that a test sees the HTTP
status and headers an outage produces, which the SDK's client turns into exceptions."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tests.api.test_mcp import _wait_until_serving
from tests.conftest import ROOT, stop_worker


@dataclass
class Served:
    base_url: str
    log_path: Path

    def mcp(self, raw_token: str | None, method: str, params: dict[str, Any] | None = None
            ) -> httpx2.Response:
        """One JSON-RPC request to ``/mcp`` (the server is stateless: no session to open)."""
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if raw_token is not None:
            headers["Authorization"] = f"Bearer {raw_token}"
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        return httpx2.post(f"{self.base_url}/mcp", content=json.dumps(body), headers=headers,
                           timeout=60)

    def call_tool(self, raw_token: str, name: str, arguments: dict[str, Any]
                  ) -> httpx2.Response:
        return self.mcp(raw_token, "tools/call", {"name": name, "arguments": arguments})

    def rest(self, method: str, path: str, raw_token: str | None = None,
             body: dict[str, Any] | None = None) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {raw_token}"} if raw_token else {}
        return httpx2.request(method, f"{self.base_url}{path}", json=body, headers=headers,
                              timeout=60)


def tool_error(response: httpx2.Response) -> dict[str, Any]:
    """The REST-shaped error body a tool answered with (``isError``), checked to be the same as
    text and as structured content."""
    assert response.status_code == 200, (response.status_code, response.text[:500])
    result = response.json()["result"]
    assert result["isError"] is True, result
    body = json.loads(result["content"][0]["text"])
    assert result["structuredContent"] == body
    return body


@contextmanager
def serve(env: dict[str, str], root: Path) -> Iterator[Served]:
    # uvicorn inherits a socket already bound here (--fd): no window in which another process
    # could take a port picked beforehand.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    log_path = root / "uvicorn.log"
    with listener, open(log_path, "ab") as log:
        web = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "contexts.asgi:application",
             "--fd", str(listener.fileno()), "--lifespan", "on", "--no-access-log"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            pass_fds=[listener.fileno()],
        )
    try:
        served = Served(f"http://127.0.0.1:{port}", log_path)
        _wait_until_serving(web, served.base_url, served.log_path)
        yield served
    finally:
        stop_worker(web)  # SIGTERM to its process group, SIGKILL after 20 s

