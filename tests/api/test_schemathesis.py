"""Schemathesis against our own OpenAPI schema: no generated request ever gets a 500."""

import pytest
import schemathesis
from django.core import signals
from django.core.cache import cache
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from contexts.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
# Uploads write files and queue jobs; they are covered by their own tests.
schema = schema.exclude(path="/api/sources")

pytestmark = pytest.mark.slow


@pytest.fixture
def bearer(world, cast):
    # Called through the raw WSGI app (not Django's test client), so keep Django from
    # closing the test transaction's connection at the end of each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Bearer {cast.raw_token}"}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_no_generated_request_is_a_server_error(case, bearer):
    cache.clear()  # the throttle is not what this test is about
    response = case.call(headers=bearer)
    assert response.status_code < 500, (case.method, case.path, response.text[:300])
    if response.status_code >= 400 and case.path.startswith("/api/"):
        assert "error" in response.json()
