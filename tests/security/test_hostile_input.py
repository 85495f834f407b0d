"""Hostile request bodies against every place that takes input: retrieve, ``POST /api/fragments``,
feedback, source uploads and the console's edit form.

Each one must be refused with a 4xx — for the API, the one JSON error shape naming the field
(``null`` when the body as a whole is at fault) — never a 500, and must leave nothing behind:
no fragment, version, job or counter half-written, the edited fragment exactly as it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.client import BOUNDARY, encode_multipart
from rest_framework.test import APIClient

from contexts.models import Fragment, FragmentVersion, IngestionJob, UploadBlob
from tests.api.conftest import as_token, world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture

RETRIEVE = "/api/contexts/retrieve"
FRAGMENTS = "/api/fragments"
# Django's test clients encode `data` themselves for their own MULTIPART_CONTENT constant
# (compared by identity); this equal string lets a test send a multipart body it built.
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
LIMIT = 64 * 1024  # DATA_UPLOAD_MAX_MEMORY_SIZE in these tests: big bodies stay cheap


@pytest.fixture(autouse=True)
def small_body_limit(settings, tmp_path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    settings.MEDIA_ROOT = tmp_path / "media"


@dataclass
class Target:
    url: str
    valid: dict  # a body the endpoint accepts


@pytest.fixture
def targets(cast, world) -> dict[str, Target]:  # noqa: F811
    web = {"org_id": "acme", "repo_id": "web"}
    session = {**web, "session_id": cast.session.external_id}
    return {
        "retrieve": Target(RETRIEVE, {"query": "rate limiter", "scope": web,
                                      "budget_tokens": 300}),
        "fragments": Target(FRAGMENTS, {"scope": session, "title": "Summary",
                                        "body": "We raised the bucket to 20."}),
        "feedback": Target(f"/api/fragments/{world.repo_limiter.public_id}/feedback",
                           {"signal": "helped"}),
    }


@pytest.fixture
def agent(cast) -> APIClient:  # noqa: F811
    return as_token(APIClient(), cast.raw_token)


def stored_state() -> tuple:
    """Everything a refused request could have half-written."""
    return (sorted(Fragment.objects.values_list("pk", "version", "body", "title",
                                                "helped_count", "hurt_count")),
            FragmentVersion.objects.count(), IngestionJob.objects.count(),
            UploadBlob.objects.count())


def raw_post(client, url: str, body: bytes, content_type: str = "application/json"):
    return client.post(url, data=body, content_type=content_type)


def assert_error(response, status: int | tuple[int, ...], field: str | None) -> dict:
    statuses = (status,) if isinstance(status, int) else status
    assert response.status_code in statuses, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert {"code", "message", "field"} <= set(error), error
    assert error["field"] == field, error
    return error


# --- bodies that are not (acceptable) JSON -------------------------------------------------------

NESTING = 10_000  # far deeper than Python's recursion limit, within the body limit

MALFORMED = {
    "invalid utf-8": b'{"query": "\xff\xfe\xfa", "scope": {"org_id": "acme"}}',
    "truncated": b'{"query": "x", "scope": {"org_id": ',
    "NaN": b'{"query": "x", "scope": {"org_id": "acme"}, "budget_tokens": NaN}',
    "Infinity": b'{"query": "x", "scope": {"org_id": "acme"}, "min_score": -Infinity}',
    "nested arrays": b"[" * NESTING + b"]" * NESTING,
    "nested objects": b'{"a":' * NESTING + b"1" + b"}" * NESTING,
    "huge integer": b'{"query": "x", "scope": {"org_id": "acme"}, "budget_tokens": '
                    + b"9" * 5000 + b"}",
}
NOT_AN_OBJECT = [b"[]", b'["query"]', b'"query"', b"42", b"true", b"null"]


@pytest.mark.parametrize("name", ["retrieve", "fragments", "feedback"])
def test_malformed_json_is_a_parse_error_naming_no_field(name, targets, agent):
    before = stored_state()
    for label, body in MALFORMED.items():
        error = assert_error(raw_post(agent, targets[name].url, body), 400, None)
        assert error["code"] == "parse_error", (label, error)
    for body in NOT_AN_OBJECT:
        assert_error(raw_post(agent, targets[name].url, body), 400, None)
    assert stored_state() == before


@pytest.mark.parametrize("name", ["retrieve", "fragments", "feedback"])
def test_oversized_bodies_are_413_before_they_are_parsed(name, targets, agent):
    before = stored_state()
    padded = {**targets[name].valid, "padding": "x" * (LIMIT + 1)}
    error = assert_error(raw_post(agent, targets[name].url, json.dumps(padded).encode()),
                         413, None)
    assert error["code"] == "too_large" and str(LIMIT) in error["message"]
    # A client that understates Content-Length is cut off at the limit all the same.
    body = json.dumps(padded).encode()
    lying = agent.generic("POST", targets[name].url, body, content_type="application/json",
                          CONTENT_LENGTH=str(LIMIT))
    assert lying.status_code == 400 and lying.json()["error"]["field"] is None
    assert stored_state() == before


@pytest.mark.parametrize("name", ["retrieve", "fragments", "feedback"])
def test_other_content_types_are_415(name, targets, agent):
    form = agent.post(targets[name].url, {"query": "x"}, format="multipart")
    assert_error(form, 415, None)
    text = raw_post(agent, targets[name].url, b"query=x", "text/plain")
    assert_error(text, 415, None)


# --- unknown fields ------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "extra", "field"), [
    ("retrieve", {"budgte_tokens": 5}, "budgte_tokens"),
    ("retrieve", {"scope": {"org_id": "acme", "repo": "web"}}, "scope.repo"),
    ("fragments", {"kindd": "policy"}, "kindd"),
    ("fragments", {"scope": {"org_id": "acme", "session": "x"}}, "scope.session"),
    ("feedback", {"signl": "hurt"}, "signl"),
])
def test_unknown_fields_are_refused_by_name(name, extra, field, targets, agent):
    before = stored_state()
    error = assert_error(agent.post(targets[name].url, {**targets[name].valid, **extra},
                                    format="json"), 400, field)
    assert "unknown field" in error["message"] and "expected one of" in error["message"]
    assert stored_state() == before
    # The same body without the typo goes through: the refusal was about the field alone.
    assert agent.post(targets[name].url, targets[name].valid, format="json").status_code < 300


def test_an_absurdly_long_unknown_key_is_not_echoed_in_full(targets, agent):
    key = "k" * 20_000
    error = assert_error(agent.post(RETRIEVE, {**targets["retrieve"].valid, key: 1},
                                    format="json"), 400, key[:100])
    assert len(json.dumps(error)) < 2_000


# --- values out of range -------------------------------------------------------------------------

BAD_NUMBERS = [-1, 0, 10**30, -(10**30), 1.5, "abc", "", "12abc", True, None, [], {},
               [3200], {"value": 3200}, 1e308]


@pytest.mark.parametrize("field", ["budget_tokens", "k_lexical", "k_dense", "rerank_top"])
def test_bad_budgets_and_ks_name_the_field(field, targets, agent):
    before = stored_state()
    for value in BAD_NUMBERS:
        if value == 0 and field != "budget_tokens":
            continue  # k = 0 switches a leg off: valid
        body = {**targets["retrieve"].valid, field: value}
        assert_error(agent.post(RETRIEVE, body, format="json"), 400, field)
    assert stored_state() == before


@pytest.mark.parametrize(("field", "values"), [
    ("min_score", [-0.1, 1.5, "NaN", "Infinity", "-inf", "x", 1e400]),
    ("freshness_halflife_days", [0, -5, 1e9, "nan", "inf", 1e400, "x"]),
    ("include_superseded", ["maybe", 2, [], {}]),
    ("as_of", ["yesterday", 5, "2026-13-45T99:00:00Z", "9" * 300]),
    ("reranker", ["gpt", "", 1, None]),
])
def test_bad_retrieval_parameters_name_the_field(field, values, targets, agent):
    for value in values:
        body = {**targets["retrieve"].valid, field: value}
        raw = json.dumps(body, allow_nan=True).encode()  # 1e400 is sent as bare Infinity
        error = assert_error(raw_post(agent, RETRIEVE, raw), 400,
                             None if value == float("inf") else field)
        assert error["code"] in ("invalid", "parse_error"), (value, error)


def test_enormous_queries_are_refused_by_length_or_size(targets, agent):
    within_body = "rate limiter " * ((LIMIT - 500) // 13)  # fits the body limit, not the query
    error = assert_error(agent.post(RETRIEVE, {**targets["retrieve"].valid, "query": within_body},
                                    format="json"), 400, "query")
    assert "4000" in error["message"]
    megabytes = "x" * 3_000_000
    assert_error(agent.post(RETRIEVE, {**targets["retrieve"].valid, "query": megabytes},
                            format="json"), 413, None)


@pytest.mark.parametrize("text", ["a\x00b", "\ud800 lone surrogate", "\udfff"])
def test_unstorable_text_is_refused_not_crashed_on(text, targets, agent):
    """PostgreSQL stores neither NUL nor lone surrogates: refuse them up front."""
    before = stored_state()
    for name, field in (("retrieve", "query"), ("fragments", "body"),
                        ("fragments", "title")):
        body = {**targets[name].valid, field: text}
        raw = json.dumps(body).encode()  # \u escapes: valid JSON, unstorable text
        assert_error(raw_post(agent, targets[name].url, raw), 400, field)
    assert stored_state() == before


def test_deep_but_parseable_nesting_in_a_field_is_a_field_error(targets, agent):
    deep: object = "acme"
    for _ in range(200):
        deep = {"org_id": deep}
    body = {**targets["retrieve"].valid, "scope": {"org_id": deep}}
    assert_error(agent.post(RETRIEVE, body, format="json"), 400, "scope.org_id")


def test_fragment_bodies_over_the_limit_are_refused_whole(targets, agent):
    before = stored_state()
    body = {**targets["fragments"].valid, "body": "y" * 50_001}
    assert_error(agent.post(FRAGMENTS, body, format="json"), 400, "body")
    heading = {**targets["fragments"].valid, "heading_path": ["h"] * 21}
    assert_error(agent.post(FRAGMENTS, heading, format="json"), 400, "heading_path")
    assert stored_state() == before


# --- uploads -------------------------------------------------------------------------------------

def note(name: str = "note.md", content: bytes = b"# Note\n\ntext\n") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


@pytest.fixture
def curator(cast) -> APIClient:  # noqa: F811
    client = APIClient()
    client.force_authenticate(cast.teammate)
    return client


def upload(client, **fields):
    return client.post("/api/sources", {"org_id": "acme", "repo_id": "web", **fields},
                       format="multipart")


def test_hostile_uploads_are_refused_and_create_no_job(curator, settings):
    before = stored_state()
    # A form field beyond the body limit (Django's own RequestDataTooBig).
    assert_error(upload(curator, files=[note()], context="c" * (LIMIT + 1)), 413, None)
    # More files than Django accepts in one request (TooManyFilesSent).
    many = [note(f"n{i}.md") for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FILES + 1)]
    assert_error(upload(curator, files=many), 400, "files")
    # Unknown fields, wrong types, a file over the per-file limit, no file at all.
    assert_error(upload(curator, files=[note()], repo="web"), 400, "repo")
    assert_error(upload(curator, files=[note("tool.exe")]), 400, "files")
    settings.INGEST_MAX_FILE_BYTES = 1_000
    assert_error(upload(curator, files=[note(content=b"z" * 1_001)]), 400, "files")
    assert_error(upload(curator), 400, "files")
    assert_error(upload(curator, files=["not a file"]), 400, "files.0")
    # JSON is not an upload.
    assert_error(curator.post("/api/sources", {"org_id": "acme", "files": []}, format="json"),
                 415, None)
    # Bodies that are not multipart, though they say so: garbage, and a body cut mid-part.
    garbage = raw_post(curator, "/api/sources", b"--nope\r\n\r\n", MULTIPART)
    assert_error(garbage, 400, "org_id")  # nothing parsed: the first required field
    whole = encode_multipart(BOUNDARY, {"org_id": "acme", "files": [note()]})
    cut = raw_post(curator, "/api/sources", whole[: len(whole) // 2], MULTIPART)
    assert_error(cut, 400, "files")  # the cut file part is dropped, not half-stored
    assert stored_state() == before


def test_an_uploaded_file_name_cannot_leave_the_job_folder(curator, tmp_path):
    body = encode_multipart(BOUNDARY, {"org_id": "acme", "repo_id": "web",
                                       "files": [note("../../../escape.md")]})
    response = raw_post(curator, "/api/sources", body, MULTIPART)
    assert response.status_code == 202, response.json()
    job = IngestionJob.objects.get(public_id=response.json()["id"])
    # Kept under the job's own key, in the database: nothing is written to any disk.
    assert list(UploadBlob.objects.values_list("org_id", "key")) == [
        (job.org_id, f"{job.org_id}/{job.public_id}/escape.md")]
    assert not list(tmp_path.rglob("escape.md"))


# --- the console's edit form ---------------------------------------------------------------------

@pytest.fixture
def edited(cast, world):  # noqa: F811
    """A curator's logged-in client and the fragment they edit, with its state before."""
    client = Client()
    client.force_login(cast.teammate)
    fragment = world.repo_limiter
    url = f"/fragments/{fragment.public_id}/edit"
    return client, fragment, url


def fragment_state(fragment: Fragment) -> tuple:
    fragment.refresh_from_db()
    versions = list(FragmentVersion.objects.filter(fragment=fragment)
                    .order_by("number").values_list("number", "body", "title"))
    return fragment.version, fragment.body, fragment.title, versions


@pytest.mark.parametrize(("label", "post"), [
    ("empty body", {"body": "", "based_on_version": "1"}),
    ("body over the limit", {"body": "y" * 50_001, "based_on_version": "1"}),
    ("NUL in body", {"body": "a\x00b", "based_on_version": "1"}),
    ("title over the limit", {"body": "ok", "title": "t" * 301, "based_on_version": "1"}),
    ("no version", {"body": "ok"}),
    ("version is text", {"body": "ok", "based_on_version": "one"}),
    ("version negative", {"body": "ok", "based_on_version": "-1"}),
    ("version zero", {"body": "ok", "based_on_version": "0"}),
    ("version float", {"body": "ok", "based_on_version": "1.5"}),
])
def test_invalid_edits_are_400_and_change_nothing(label, post, edited):
    client, fragment, url = edited
    before = fragment_state(fragment)
    response = client.post(url, post)
    assert response.status_code == 400, label
    assert fragment_state(fragment) == before, label


def test_edits_against_versions_that_do_not_exist_conflict_and_change_nothing(edited):
    client, fragment, url = edited
    before = fragment_state(fragment)
    for version in ("2", "99999", str(10**30)):
        response = client.post(url, {"body": "new text", "based_on_version": version})
        assert response.status_code in (400, 409), (version, response.status_code)
    assert fragment_state(fragment) == before


def test_an_oversized_edit_is_refused_before_it_is_read(edited):
    client, fragment, url = edited
    before = fragment_state(fragment)
    response = client.post(url, {"body": "z" * (LIMIT + 1), "based_on_version": "1"})
    assert response.status_code in (400, 413)
    multipart = client.post(url, data=encode_multipart(
        BOUNDARY, {"body": "z" * (LIMIT + 1), "based_on_version": "1"}),
        content_type=MULTIPART)
    assert multipart.status_code in (400, 413)
    assert fragment_state(fragment) == before


def test_invalid_utf8_in_an_edit_becomes_replacement_characters(edited):
    """Django decodes form bodies with errors="replace": the edit is stored as valid text."""
    client, fragment, url = edited
    response = client.post(url, data=b"body=%FF%FEok&based_on_version=1",
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302
    fragment.refresh_from_db()
    assert fragment.body == "\ufffd\ufffdok" and fragment.version == 2
