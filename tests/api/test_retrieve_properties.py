"""Property-based checks of the retrieval endpoint: no leaks, no 500s."""

import string

from django.core.cache import cache
from guardian.shortcuts import assign_perm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.scopes import readable_scopes
from accounts.tokens import create_token
from contexts.models import Fragment, RetrievalTrace
from tests.api.conftest import as_token

URL = "/api/contexts/retrieve"
WORDS = ["rate", "limiter", "bucket", "deploy", "friday", "billing", "retries", "secret",
         "globex", "session", "runbook", "burst", "RateLimiter.acquire", "ERR_RATE", "the"]
SLOW = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


def principals(cast):
    """Users and tokens with assorted grants (a fixed, varied cast)."""
    assign_perm("accounts.view_repository", cast.stranger, cast.repo)
    people = [cast.owner, cast.viewer, cast.stranger]
    tokens = [cast.raw_token]
    for scopes in ([cast.org.scope], [cast.persona.scope], [cast.session.scope],
                   [cast.other_repo.scope, cast.persona.scope]):
        tokens.append(create_token(cast.org, "t", scopes)[1])
    tokens.append(create_token(cast.other_org, "g", [cast.other_org.scope])[1])
    return people, tokens


@SLOW
@given(data=st.data())
def test_no_response_and_no_trace_ever_holds_an_out_of_scope_fragment(api, cast, world, data):
    cache.clear()  # keep the throttle out of the way
    people, tokens = principals(cast)
    who = data.draw(st.sampled_from(people + tokens))
    if isinstance(who, str):
        api.force_authenticate(None)  # force_authenticate outlives credentials(): clear it
        as_token(api, who)
        from accounts.tokens import verify_token

        principal = verify_token(who)
    else:
        api.credentials()
        api.force_authenticate(who)
        principal = who
    org = data.draw(st.sampled_from([cast.org, cast.other_org]))
    scope = {"org_id": data.draw(st.sampled_from([org.slug, org.public_id]))}
    if org == cast.org:
        if data.draw(st.booleans()):
            scope["repo_id"] = data.draw(st.sampled_from(["web", "billing"]))
        if data.draw(st.booleans()):
            scope["persona_id"] = "sre"
        if data.draw(st.booleans()):
            scope["session_id"] = cast.session.external_id
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5)))
    response = api.post(URL, {"query": query, "scope": scope, "budget_tokens": 100000},
                        format="json")
    assert response.status_code in (200, 403), response.content
    if response.status_code == 403:
        return
    allowed = readable_scopes(principal)
    body = response.json()
    for item in body["fragments"]:
        fragment = Fragment.objects.get(public_id=item["id"])
        assert set(fragment.scope_ids) & allowed, (item["id"], scope)
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert set(trace.scope_ids) <= allowed
    candidate_ids = [c["id"] for c in trace.candidates]
    visible = set(Fragment.objects.filter(public_id__in=candidate_ids,
                                          scope_ids__overlap=trace.scope_ids)
                  .values_list("public_id", flat=True))
    assert set(candidate_ids) == visible  # no stage ever saw a fragment outside the scopes


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
bodies = st.fixed_dictionaries({}, optional={
    "query": st.one_of(st.text(alphabet=string.printable, max_size=50), json_values),
    "scope": st.one_of(st.fixed_dictionaries({"org_id": st.sampled_from(["acme", "x", ""])},
                                             optional={"repo_id": json_values,
                                                       "session_id": json_values}),
                       json_values),
    "budget_tokens": json_values, "k_lexical": json_values, "k_dense": json_values,
    "rerank_top": json_values, "min_score": json_values, "as_of": json_values,
    "freshness_halflife_days": json_values, "include_superseded": json_values,
}) | json_values


@SLOW
@given(body=bodies)
def test_no_request_body_produces_a_500(api, cast, world, body):
    cache.clear()
    api.force_authenticate(cast.viewer)
    response = api.post(URL, body, format="json")
    assert response.status_code in (200, 400, 403), (body, response.content)
    if response.status_code != 200:
        assert set(response.json()["error"]) >= {"code", "message", "field"}
