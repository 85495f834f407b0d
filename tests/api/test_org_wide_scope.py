"""``"repo_id": "*"`` and the empty answer's ``hint`` (issue 19, item 6), over REST.

The cast (tests/domain/conftest.py): organization acme with repositories web and billing, persona
sre and a session in web; globex is another organization. ``cast.raw_token`` is bound to web.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.indexes.follower import reindex_fragments
from contexts.services.fragments import create_fragment
from tests.api.conftest import as_token
from tests.factories import MembershipFactory, OrganizationFactory, RepositoryFactory, UserFactory

URL = "/api/contexts/retrieve"
QUERY = "rate limiter bucket deploy billing runbook session"


def ask(api, scope, query=QUERY, **extra):
    return api.post(URL, {"query": query, "scope": scope, **extra}, format="json")


def ids(response) -> set[str]:
    assert response.status_code == 200, response.json()
    return {f["id"] for f in response.json()["fragments"]}


def scored(api, response) -> set[str]:
    """Every candidate the retrieval scored (its trace), not only those returned."""
    trace = api.get(f"/api/traces/{response.json()['trace_id']}").json()
    return {c["id"] for c in trace["candidates"]}


def test_a_member_asking_star_gets_org_wide_and_every_repository(api, cast, world):
    api.force_authenticate(cast.viewer)
    response = ask(api, {"org_id": "acme", "repo_id": "*"})
    got = ids(response)
    assert {world.org_note.public_id, world.repo_limiter.public_id,
            world.other_repo_billing.public_id} <= got
    # Personas and sessions keep their meaning: only when named. Never another organization.
    outside = {world.persona_runbook.public_id, world.session_note.public_id,
               world.globex_secret.public_id}
    assert not got & outside
    assert not scored(api, response) & outside  # never even scored
    assert response.json()["hint"] is None


def test_star_with_a_persona_and_a_session_adds_them(api, cast, world):
    api.force_authenticate(cast.viewer)
    got = ids(ask(api, {"org_id": "acme", "repo_id": "*", "persona_id": "sre",
                        "session_id": cast.session.external_id}))
    assert {world.persona_runbook.public_id, world.session_note.public_id,
            world.repo_limiter.public_id, world.other_repo_billing.public_id,
            world.org_note.public_id} <= got
    assert world.globex_secret.public_id not in got


def test_a_token_bound_to_one_repository_gets_only_that_repository(api, cast, world):
    response = ask(as_token(api, cast.raw_token), {"org_id": "acme", "repo_id": "*"})
    assert ids(response) == {world.repo_limiter.public_id}
    # Not the organization-wide note (the token may not read it), not billing, not globex.
    assert scored(api, response) == {world.repo_limiter.public_id}
    _, billing_only = create_token(cast.org, "billing", [cast.other_repo.scope])
    assert ids(ask(as_token(api, billing_only), {"org_id": "acme", "repo_id": "*"})) == {
        world.other_repo_billing.public_id}


def test_a_token_of_another_organization_cannot_use_star_there(api, cast, world):
    _, globex = create_token(cast.other_org, "globex", [cast.other_org.scope])
    response = ask(as_token(api, globex), {"org_id": "acme", "repo_id": "*"})
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "scope not found or not readable"
    api.force_authenticate(cast.stranger)
    assert ask(api, {"org_id": "acme", "repo_id": "*"}).status_code == 403


@pytest.mark.parametrize("bad", ["**", "web/*", "*web", "Web", "w\u00e9b"])
def test_a_repo_id_that_can_name_nothing_is_a_400_naming_the_field(api, cast, world, bad):
    api.force_authenticate(cast.viewer)
    response = ask(api, {"org_id": "acme", "repo_id": bad})
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["field"] == "scope.repo_id"
    assert '"*"' in error["message"] and bad not in error["message"].replace('"*"', "")


def test_the_hint_names_how_many_readable_fragments_lie_elsewhere(api, cast, world):
    empty = RepositoryFactory(org=cast.org, slug="empty")
    # Reads the empty repository and web; billing (1 fragment) and the organization-wide note
    # are not its to count.
    _, raw = create_token(cast.org, "two repos", [empty.scope, cast.repo.scope])
    response = ask(as_token(api, raw), {"org_id": "acme", "repo_id": "empty"})
    body = response.json()
    assert ids(response) == set()
    assert body["hint"] == (
        "no fragments in repository 'empty'; 1 fragment you can read is elsewhere in "
        "organization 'acme' — ask with \"repo_id\": \"*\" to search its organization-wide "
        "fragments and every repository you can read")
    assert "web" not in body["hint"] and "billing" not in body["hint"]
    assert ids(ask(api, {"org_id": "acme", "repo_id": "*"})) == {world.repo_limiter.public_id}


def test_no_hint_when_nothing_readable_lies_elsewhere(api, cast, world):
    empty = RepositoryFactory(org=cast.org, slug="empty")
    _, raw = create_token(cast.org, "empty only", [empty.scope])
    as_token(api, raw)
    # Six fragments exist elsewhere in acme and globex; none of them are this token's.
    for scope in ({"org_id": "acme", "repo_id": "empty"}, {"org_id": "acme", "repo_id": "*"}):
        response = ask(api, scope)
        assert ids(response) == set() and response.json()["hint"] is None


def test_no_hint_on_an_answer_with_fragments(api, cast, world):
    response = ask(as_token(api, cast.raw_token), {"org_id": "acme", "repo_id": "web"})
    assert ids(response) and response.json()["hint"] is None


def test_nothing_matched_in_a_scope_that_holds_fragments(api, cast, world):
    # min_score 1 drops everything: the scope is not empty, the answer is.
    api.force_authenticate(cast.viewer)
    response = ask(api, {"org_id": "acme", "repo_id": "web"}, min_score=1.0)
    hint = response.json()["hint"]
    assert ids(response) == set()
    assert hint.startswith("nothing in repository 'web' matched; 1 fragment you can read is "
                           "elsewhere in organization 'acme'")


def test_star_with_nothing_more_to_add_points_to_personas_and_sessions(api, cast, world):
    _, raw = create_token(cast.org, "persona and empty repo",
                          [RepositoryFactory(org=cast.org, slug="empty").scope,
                           cast.persona.scope])
    response = ask(as_token(api, raw), {"org_id": "acme", "repo_id": "*"})
    assert ids(response) == set()
    assert response.json()["hint"] == (
        "no fragments in any repository you can read (or organization-wide); 1 fragment you "
        "can read is in scopes of organization 'acme' that this request does not name "
        "(personas, sessions) — name one with \"persona_id\" or \"session_id\"")


# --- the third case: the demo organization as `make run` seeds it ------------------------
@pytest.fixture
def demo(db, settings, tmp_path):
    """As ``manage.py bootstrap`` leaves it once ingested: organization demo, one repository
    (contexts) holding every fragment, nothing organization-wide; its admin a member."""
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    org = OrganizationFactory(slug="demo")
    repo = RepositoryFactory(org=org, slug="contexts")
    admin = UserFactory(username="demo-admin")
    MembershipFactory(user=admin, org=org, role="admin")
    fragments = [
        create_fragment(SYSTEM, repo.scope, title="Agent tokens",
                        body="Agent tokens are hashed with sha256 in hash_token_secret; the raw "
                             "secret is shown once."),
        create_fragment(SYSTEM, repo.scope, title="Scope enforcement",
                        body="Scope is enforced by accounts.scopes.readable_scopes and by "
                             "row-level security on contexts_fragment."),
    ]
    reindex_fragments([f.pk for f in fragments])
    return admin, fragments


def test_the_demo_organization_alone_says_where_its_fragments_are(api, demo):
    admin, fragments = demo
    api.force_authenticate(admin)
    org_only = ask(api, {"org_id": "demo"}, query="how are agent tokens hashed?")
    body = org_only.json()
    # Before: 200 with an empty list and no word of why.
    assert body["fragments"] or body["hint"]
    assert re.fullmatch(r"no fragments in the organization-wide scope of 'demo'; 2 "
                        r"fragments you can read are elsewhere in organization 'demo' — ask "
                        r"with \"repo_id\": \"\*\" .*", body["hint"])
    wide = ask(api, {"org_id": "demo", "repo_id": "*"}, query="how are agent tokens hashed?")
    assert wide.json()["fragments"][0]["id"] == fragments[0].public_id
    assert wide.json()["hint"] is None


def test_a_repeated_empty_answer_reuses_its_count_until_the_feed_moves(api, demo):
    """The hint's COUNT is kept per process for the same question at the same change-feed
    position: asked again, no COUNT runs; after a write (through the one door), the new count."""
    admin, fragments = demo
    api.force_authenticate(admin)

    def hint_and_counts() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            hint = ask(api, {"org_id": "demo"}, query="how are agent tokens hashed?"
                       ).json()["hint"]
        return hint, sum("count(*) FILTER" in q["sql"] for q in queries.captured_queries)

    first, counted = hint_and_counts()
    assert "2 fragments you can read are elsewhere" in first and counted == 1
    again, counted = hint_and_counts()
    assert again == first and counted == 0
    create_fragment(SYSTEM, fragments[0].scope, title="Token expiry",
                    body="Agent tokens expire after ninety days unless renewed.")
    after, counted = hint_and_counts()
    assert "3 fragments you can read are elsewhere" in after and counted == 1
