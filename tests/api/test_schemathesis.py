"""Schemathesis against our own OpenAPI schema, every operation (uploads included): no generated
request gets a 500, and every answer — success or error — conforms to the documented status
codes, content type and response schema."""

import pytest
import schemathesis
from django.core import signals
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import close_old_connections
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from contexts.wsgi import application
from tests.api.conftest import as_token

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

pytestmark = pytest.mark.slow

# What a generated request is checked for. Not `positive_data_acceptance`: schema-valid data is
# legitimately refused (a generated org_id names no organization → 403).
CHECKS = [schemathesis.checks.not_a_server_error, status_code_conformance,
          content_type_conformance, response_schema_conformance]

# Every operation of the schema must be exercised; the test below fails if one is added that
# this list does not know about (so it cannot be skipped silently).
OPERATIONS = {
    "GET /api/", "GET /api/whoami", "POST /api/contexts/retrieve", "POST /api/fragments",
    "POST /api/fragments/{fragment_id}/feedback", "GET /api/traces/{trace_id}",
    "GET /api/fragments/{fragment_id}", "PATCH /api/fragments/{fragment_id}",
    "POST /api/sources", "GET /api/jobs/{job_id}",
    "POST /api/fragments/{fragment_id}/propose", "POST /api/proposals", "GET /api/proposals",
    "GET /api/proposals/{proposal_id}",
    "GET /api/orgs/{org}/export",
}


@pytest.fixture
def bearer(world, cast, settings, tmp_path):
    # Generated uploads are stored (the job is queued on commit, and the test's transaction
    # never commits: no Celery task is sent); keep the files in the test's directory.
    settings.MEDIA_ROOT = tmp_path / "media"
    # Called through the raw WSGI app (not Django's test client), so keep Django from
    # closing the test transaction's connection at the end of each request.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield {"Authorization": f"Bearer {cast.raw_token}"}
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_every_operation_is_exercised():
    listed = {f"{op.method.upper()} {op.path}"
              for op in (result.ok() for result in schema.get_all_operations())}
    assert listed == OPERATIONS


@schema.parametrize()
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_generated_requests_get_documented_answers(case, bearer):
    cache.clear()  # the throttle is not what this test is about
    response = case.call(headers=bearer)
    case.validate_response(response, checks=CHECKS, headers=bearer)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert {"code", "message", "field"} <= set(error), error


def logged_in(user) -> tuple[dict[str, str], dict[str, str]]:
    """Cookies and headers of a console session (uploads need a curator, not an agent token);
    Django accepts the CSRF secret itself as the header's token."""
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    client = Client()
    client.force_login(user)
    secret = _get_new_csrf_string()
    return ({"sessionid": client.cookies["sessionid"].value, "csrftoken": secret},
            {"X-CSRFToken": secret})


def test_successful_answers_conform_to_the_schema(bearer, world, cast, api):
    """Generated data rarely gets past validation and the scope checks; one realistic request
    per operation checks that the success bodies match their documented schema too."""
    cookies, csrf = logged_in(cast.teammate)
    ops = {key: schema[key.split(" ")[1]][key.split(" ")[0]] for key in OPERATIONS}

    def check(key: str, expected: int, *, headers=None, cookies=None, **parts):
        case = ops[key].Case(**parts)
        headers = headers or bearer
        response = case.call(headers=headers, cookies=cookies)
        assert response.status_code == expected, (key, response.text[:300])
        case.validate_response(response, checks=CHECKS, headers=headers)
        return response.json()

    check("GET /api/", 200)
    check("GET /api/whoami", 200)
    answer = check("POST /api/contexts/retrieve", 200, media_type="application/json",
                   body={"query": "rate limiter", "budget_tokens": 500,
                         "scope": {"org_id": "acme", "repo_id": "web"}})
    assert answer["fragments"], answer
    # The trace row is written when the response is closed, which Schemathesis' WSGI client
    # does not do; Django's test client does.
    traced = as_token(api, cast.raw_token).post(
        "/api/contexts/retrieve", {"query": "rate limiter",
                                   "scope": {"org_id": "acme", "repo_id": "web"}},
        format="json")
    # ...and reconnects Django's connection closing when it is done: undo that again.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    check("GET /api/traces/{trace_id}", 200,
          path_parameters={"trace_id": traced.json()["trace_id"]})
    check("POST /api/fragments", 201, media_type="application/json",
          body={"scope": {"org_id": "acme", "repo_id": "web",
                          "session_id": cast.session.external_id},
                "title": "Summary", "body": "The bucket was raised to 20."})
    check("POST /api/fragments/{fragment_id}/feedback", 202, media_type="application/json",
          path_parameters={"fragment_id": world.repo_limiter.public_id},
          body={"signal": "helped"})
    # Schemathesis names a generated file part after its field; encode one with a file name.
    upload = encode_multipart(BOUNDARY, {
        "org_id": "acme", "repo_id": "web",
        "files": [SimpleUploadedFile("limits.md", b"# Limits\n\nTen tokens.\n")]})
    job = check("POST /api/sources", 202, cookies=cookies, media_type="multipart/form-data",
                body=upload, headers={**csrf, "Content-Type": MULTIPART_CONTENT})
    check("GET /api/jobs/{job_id}", 200, path_parameters={"job_id": job["id"]})
    # The organization's archive (binary), for an administrator of it.
    owner_cookies, owner_csrf = logged_in(cast.owner)
    case = ops["GET /api/orgs/{org}/export"].Case(path_parameters={"org": "acme"})
    response = case.call(headers=owner_csrf, cookies=owner_cookies)
    assert response.status_code == 200, response.text[:300]
    case.validate_response(response, checks=CHECKS, headers=owner_csrf)
