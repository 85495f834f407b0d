"""Tokens (administrators): raw secret shown once, list, revoke. Traces: filters."""

from accounts.models import ApiToken
from accounts.tokens import verify_token
from contexts.models import RetrievalTrace
from tests.console.conftest import HTMX, client_for


def test_a_new_token_is_shown_once_and_works(cast):
    client = client_for(cast.owner)
    response = client.post("/o/acme/tokens/", {"name": "review-bot",
                                               "scopes": [cast.repo.scope.public_id],
                                               "expires_in_days": 30})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    raw = response.context["raw"]
    assert raw.startswith("ctx_") and raw in response.content.decode()
    token = verify_token(raw)
    assert token.name == "review-bot" and list(token.scopes.all()) == [cast.repo.scope]
    listing = client.get("/o/acme/tokens/").content.decode()
    assert "review-bot" in listing and raw not in listing


def test_tokens_can_only_bind_this_organization_s_scopes(cast):
    response = client_for(cast.owner).post(
        "/o/acme/tokens/", {"name": "x", "scopes": [cast.other_org.scope.public_id]})
    assert response.status_code == 400
    assert not ApiToken.objects.filter(name="x").exists()


def test_revoke(cast):
    client = client_for(cast.owner)
    response = client.post(f"/o/acme/tokens/{cast.token.public_id}/revoke", **HTMX)
    assert b"revoked" in response.content
    assert verify_token(cast.raw_token) is None


def test_traces_filter_by_query_token_and_scope(cast):
    by_token = RetrievalTrace.objects.create(org=cast.org, token=cast.token,
                                             query="rate limiter burst",
                                             scope_ids=[cast.repo.scope_id])
    by_user = RetrievalTrace.objects.create(org=cast.org, user=cast.lead, query="deploy policy",
                                            scope_ids=[cast.org.scope_id])
    client = client_for(cast.viewer)

    def listed(query):
        return {t.public_id for t in client.get(f"/o/acme/traces/?{query}").context["page"]}

    assert listed("") == {by_token.public_id, by_user.public_id}
    assert listed("q=burst") == {by_token.public_id}
    assert listed(f"token={cast.token.public_id}") == {by_token.public_id}
    assert listed("token=-") == {by_user.public_id}
    assert listed(f"scope={cast.org.scope.public_id}") == {by_user.public_id}


def test_the_token_filter_lists_only_tokens_whose_traces_i_may_read(cast):
    """A viewer of one repository must not learn the organization's other agents' names."""
    from accounts.tokens import create_token
    from contexts.models import RetrievalTrace

    other_repo_token, _ = create_token(cast.org, "billing-bot", [cast.other_repo.scope])
    RetrievalTrace.objects.create(org=cast.org, token=other_repo_token, query="invoices",
                                  scope_ids=[cast.other_repo.scope_id])
    RetrievalTrace.objects.create(org=cast.org, token=cast.token, query="rate limiter",
                                  scope_ids=[cast.repo.scope_id])
    silent_token, _ = create_token(cast.org, "quiet-bot", [cast.repo.scope])
    from guardian.shortcuts import assign_perm

    assign_perm("accounts.view_repository", cast.stranger, cast.repo)
    page = client_for(cast.stranger).get("/o/acme/traces/").content.decode()
    assert cast.token.name in page
    assert "billing-bot" not in page and other_repo_token.public_id not in page
    assert "quiet-bot" not in page and silent_token.public_id not in page
