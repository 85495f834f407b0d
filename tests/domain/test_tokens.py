"""Agent tokens: minted by the CLI, stored hashed, bearer auth, expiry, revocation."""

import io

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import revoke_token


def mint(*args) -> str:
    out = io.StringIO()
    call_command("create_token", *args, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def test_create_token_prints_the_token_last_and_stores_only_a_hash(cast):
    raw = mint("--name", "bot", "--scope", "org:acme", "--scope", "repo:acme/web",
               "--scope", "persona:acme/sre", "--expires", "30")
    assert raw.startswith("ctx_")
    token = ApiToken.objects.get(name="bot")
    assert raw.split("_")[2] not in token.secret_hash
    assert token.prefix == raw.split("_")[1]
    assert set(token.scopes.values_list("label", flat=True)) == {
        "acme", "acme/web", "acme/persona:sre"}
    assert token.expires_at > timezone.now()


@pytest.mark.parametrize("scope", ["org:nope", "repo:acme/nope", "team:acme", "repo:acme"])
def test_create_token_rejects_unknown_scopes(cast, scope):
    with pytest.raises(CommandError):
        mint("--name", "bot", "--scope", scope)


def test_create_token_refuses_scopes_from_two_orgs(cast):
    with pytest.raises(CommandError, match="one organization"):
        mint("--name", "bot", "--scope", "org:acme", "--scope", "org:globex")


def test_bearer_auth_reads_the_tokens_scopes_and_records_use(cast, client):
    response = client.get("/api/whoami", HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    assert response.status_code == 200
    body = response.json()
    assert body["principal"]["type"] == "token"
    assert {s["id"] for s in body["scopes"]} == {cast.repo.public_id, cast.session.public_id}
    cast.token.refresh_from_db()
    assert cast.token.last_used_at is not None


@pytest.mark.parametrize("header", ["Bearer nope", "Bearer ctx_abc_def", "Bearer "])
def test_bad_tokens_get_401_in_the_api_error_shape(cast, client, header):
    response = client.get("/api/whoami", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in {"authentication_failed", "not_authenticated"}


def test_revoked_and_expired_tokens_are_refused(cast, client):
    revoke_token(cast.token)
    assert client.get("/api/whoami",
                      HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}").status_code == 401
    cast.token.revoked_at = None
    cast.token.expires_at = timezone.now()
    cast.token.save()
    assert client.get("/api/whoami",
                      HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}").status_code == 401


def test_no_credentials_is_401(client, db):
    assert client.get("/api/whoami").status_code == 401


def test_minting_and_revoking_a_token_are_audited(cast):
    from accounts.tokens import create_token
    from contexts.models import AuditEvent

    token, _ = create_token(cast.org, "deploy-bot", [cast.repo.scope], created_by=cast.owner)
    revoke_token(token, actor=cast.owner)
    revoke_token(token, actor=cast.owner)  # already revoked: nothing happens, nothing recorded
    events = list(AuditEvent.objects.filter(object_id=token.public_id).order_by("id"))
    assert [(e.action, e.actor, e.org) for e in events] == [
        ("token.create", cast.owner, cast.org), ("token.revoke", cast.owner, cast.org)]
    assert events[0].after["scopes"] == [cast.repo.scope.public_id]
    assert "secret" not in str(events[0].after) and token.secret_hash not in str(events[0].after)
