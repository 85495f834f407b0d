"""PostgreSQL restarted under load: requests caught by it fail cleanly (503, JSON, Retry-After,
never a 500 or a dropped connection) and the next request succeeds."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connections

pytestmark = pytest.mark.slow

RETRIEVE = {"query": "rate limiter bucket burst", "scope": {"org_id": "acme", "repo_id": "web"}}


def test_a_restart_fails_in_flight_requests_cleanly_and_the_next_succeeds(
        services, web_server, cast, world):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {cast.raw_token}"}
    body = json.dumps(RETRIEVE).encode()

    def ask():
        return web_server.request("POST", "/api/contexts/retrieve", body, headers)

    assert ask()[0] == 200  # warm: the model is loaded, connections are open

    # (started, finished, status, headers, body) per request, on one clock.
    outcomes: list[tuple[float, float, int, dict[str, str], bytes]] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                status, response_headers, payload = ask()
                outcomes.append((started, time.monotonic(), status, response_headers, payload))
            except Exception as exc:  # noqa: BLE001 - a reset or a hang is what we look for
                failures.append(exc)

    clients = [threading.Thread(target=client) for _ in range(4)]
    for thread in clients:
        thread.start()
    try:
        time.sleep(1.0)
        stopping = time.monotonic()
        services.postgres.stop()  # fast shutdown: every open session is terminated
        time.sleep(1.0)
        services.postgres.start()
        restarted_at = len(outcomes)
        deadline = time.monotonic() + 15  # load continues until the service has recovered
        while time.monotonic() < deadline and 200 not in [o[2] for o in outcomes[restarted_at:]]:
            time.sleep(0.1)
    finally:
        stop.set()
        for thread in clients:
            thread.join(timeout=60)
        connections.close_all()  # this process's connections died with the server too

    statuses = [o[2] for o in outcomes]
    assert not failures, failures[:3]
    assert set(statuses) <= {200, 503}, statuses
    refused = [(h, b) for _, _, status, h, b in outcomes if status == 503]
    assert refused, "the restart never met a request"
    # Requests already being served when the shutdown began that then failed: the restart met
    # them mid-request. Reported, not asserted — whether one is in flight at that instant is
    # timing (it is in most runs); either way every failure above was a clean 503.
    caught = [o for o in outcomes if o[0] < stopping < o[1] and o[2] == 503]
    print(f"restart: {len(caught)} requests failed mid-request, {len(refused)} refused in all, "
          f"{statuses.count(200)} served")
    for response_headers, payload in refused:
        assert response_headers["Retry-After"] == "5"
        assert json.loads(payload)["error"]["code"] == "database_unavailable"
    # Served before the stop, and again under the same load once the server was back.
    assert statuses[0] == 200 and 200 in statuses[restarted_at:]

    # The very next request, on the connections the restart broke, succeeds.
    status, _, payload = ask()
    assert status == 200, payload[:300]
    assert json.loads(payload)["fragments"]
