"""Answers say how current they are (issue 38, item 5).

Every fragment of a retrieval answer carries ``source.commit``, ``source.state``,
``verified_at`` and an evidence summary, over REST and over MCP (one payload,
``contexts.protocol.retrieval``). A request may ask ``max_age_days`` (age: since the later of
the last edit and the last verification), ``verified_only`` or ``exclude_states`` (source and
evidence states); the rule is part of which rows a request may return
(``contexts.retrieval.rows.retrievable``), so a filtered fragment is never scored; the trace
records the filters; a bad value is a 400 naming the field.
"""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from contexts.mcp import server as mcp_server
from contexts.models import Fragment, RetrievalTrace, SourceDocument, SourcePointer
from contexts.models.traces import expand_table
from tests.api.conftest import as_token

URL = "/api/contexts/retrieve"
WEB = {"org_id": "acme", "repo_id": "web"}
QUERY = "rate limiter bucket deploy"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def ask(api, **extra):
    return api.post(URL, {"query": QUERY, "scope": WEB, **extra}, format="json")


def by_id(response) -> dict[str, dict]:
    assert response.status_code == 200, response.json()
    return {f["id"]: f for f in response.json()["fragments"]}


@pytest.fixture
def current_world(cast, world):
    """The limiter comes from a git source's file at COMMIT and is in sync with it; its text
    cites two things, one of which changed. The deploy policy (org-wide) was last edited
    400 days ago and never verified."""
    limiter = world.repo_limiter
    document = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                             path="docs/limits.md", content_hash="h",
                                             source_commit=COMMIT)
    SourcePointer.objects.create(fragment=limiter, document=document, anchor="limits",
                                 start_line=3, end_line=9)
    cited = [{"ref": "refill_bucket", "kind": "symbol", "path": "src/x.py", "state": "changed"},
             {"ref": "src/y.py", "kind": "file", "path": "src/y.py", "state": "current"}]
    Fragment.objects.filter(pk=limiter.pk).update(source_state="in_sync", evidence=cited,
                                                  evidence_paths=["src/x.py", "src/y.py"],
                                                  evidence_state="changed")
    Fragment.objects.filter(pk=world.org_note.pk).update(
        last_edited_at=timezone.now() - dt.timedelta(days=400))
    return world


def test_each_fragment_says_how_current_it_is(api, cast, current_world):
    got = by_id(ask(as_token(api, cast.raw_token)))
    limiter = got[current_world.repo_limiter.public_id]
    assert limiter["source"]["commit"] == COMMIT
    assert limiter["source"]["state"] == "in_sync"
    assert limiter["verified_at"] is None
    assert limiter["evidence"] == {"state": "changed", "refs": 3, "changed": 1}


def test_verified_at_and_an_empty_evidence(api, cast, current_world):
    api.force_authenticate(cast.viewer)
    when = timezone.now() - dt.timedelta(days=2)
    Fragment.objects.filter(pk=current_world.org_note.pk).update(verified_at=when)
    note = by_id(ask(api))[current_world.org_note.public_id]
    assert note["source"]["kind"] == "console" and note["source"]["state"] is None
    assert note["verified_at"] is not None
    assert dt.datetime.fromisoformat(note["verified_at"].replace("Z", "+00:00")) == when
    assert note["evidence"] == {"state": None, "refs": 0, "changed": 0}


def test_max_age_days_counts_from_the_later_of_edit_and_verification(api, cast,
                                                                   current_world):
    api.force_authenticate(cast.viewer)
    note, limiter = current_world.org_note.public_id, current_world.repo_limiter.public_id
    assert {note, limiter} <= set(by_id(ask(api)))
    fresh = by_id(ask(api, max_age_days=30))
    assert limiter in fresh and note not in fresh
    # Verified last week: as current as an edit last week.
    Fragment.objects.filter(pk=current_world.org_note.pk).update(
        verified_at=timezone.now() - dt.timedelta(days=7))
    assert note in by_id(ask(api, max_age_days=30))
    assert note not in by_id(ask(api, max_age_days=5))


def test_verified_only(api, cast, current_world):
    api.force_authenticate(cast.viewer)
    assert by_id(ask(api, verified_only=True)) == {}
    Fragment.objects.filter(pk=current_world.repo_limiter.pk).update(
        verified_at=timezone.now())
    assert set(by_id(ask(api, verified_only=True))) == {current_world.repo_limiter.public_id}


def test_exclude_states_names_source_and_evidence_states(api, cast, current_world):
    api.force_authenticate(cast.viewer)
    limiter = current_world.repo_limiter.public_id
    note = current_world.org_note
    assert limiter not in by_id(ask(api, exclude_states=["changed"]))
    assert limiter not in by_id(ask(api, exclude_states=["in_sync"]))
    assert limiter in by_id(ask(api, exclude_states=["conflict", "missing"]))
    Fragment.objects.filter(pk=note.pk).update(source_state="conflict")
    got = by_id(ask(api, exclude_states=["conflict", "changed"]))
    assert note.public_id not in got and limiter not in got


def test_the_trace_records_the_filters(api, cast, current_world):
    api.force_authenticate(cast.viewer)
    response = ask(api, max_age_days=1000, verified_only=False,
                   exclude_states=["conflict", "changed"])
    assert response.status_code == 200
    trace = RetrievalTrace.objects.get(public_id=response.json()["trace_id"])
    assert trace.parameters["max_age_days"] == 1000
    assert trace.parameters["exclude_states"] == ["conflict", "changed"]
    # Filtered before scoring: the excluded fragment is no candidate at all.
    candidates = {row["id"] for row in expand_table(trace.stage_table)}
    assert current_world.org_note.public_id in candidates
    assert current_world.repo_limiter.public_id not in candidates
    plain = ask(api)
    assert "exclude_states" not in RetrievalTrace.objects.get(
        public_id=plain.json()["trace_id"]).parameters


@pytest.mark.parametrize(("extra", "field"), [
    ({"exclude_states": ["stale-ish"]}, "exclude_states"),
    ({"exclude_states": "changed"}, "exclude_states"),
    ({"max_age_days": -1}, "max_age_days"),
    ({"max_age_days": "soon"}, "max_age_days"),
    ({"verified_only": "perhaps"}, "verified_only"),
])
def test_bad_filter_values_are_a_400_naming_the_field(api, cast, current_world, extra, field):
    api.force_authenticate(cast.viewer)
    response = ask(api, **extra)
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["field"].split(".")[0] == field


# --- the same over MCP: the tool itself, run for the cast's agent token ---------------------
def call_tool(cast, **arguments) -> tuple[bool, dict]:
    ctx = SimpleNamespace(request_context=SimpleNamespace(request=SimpleNamespace(
        scope={mcp_server.TOKEN_SCOPE_KEY: cast.token})))
    result = async_to_sync(mcp_server.retrieve)(query=QUERY, scope=mcp_server.RetrievalScope(
        **WEB), ctx=ctx, **arguments)
    return result.is_error, json.loads(result.content[0].text)


@pytest.mark.django_db(transaction=True)
def test_the_same_fields_and_filters_over_mcp(cast, current_world):
    failed, body = call_tool(cast)
    assert not failed, body
    limiter = {f["id"]: f for f in body["fragments"]}[current_world.repo_limiter.public_id]
    assert limiter["source"]["commit"] == COMMIT and limiter["source"]["state"] == "in_sync"
    assert "verified_at" in limiter
    assert limiter["evidence"] == {"state": "changed", "refs": 3, "changed": 1}
    failed, body = call_tool(cast, exclude_states=["changed"])
    assert not failed and current_world.repo_limiter.public_id not in {
        f["id"] for f in body["fragments"]}
    failed, body = call_tool(cast, verified_only=True)
    assert not failed and body["fragments"] == []
    failed, body = call_tool(cast, exclude_states=["bogus"])
    assert failed and body["error"]["field"].split(".")[0] == "exclude_states"
