"""The test OpenID provider itself, driven as a relying party would drive it: requests for
HTTP, joserfc for the tokens; no browser, no project database.

Each test makes its own client and user (the provider is shared by the session) and checks
what the console's SSO tests will rely on: the authorization-code flow with PKCE, a genuine
signed ID token with our claims, refresh (and its refusal once the user is deactivated),
userinfo showing current groups, and the tamper modes each failing their check.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from authlib.integrations.requests_client import OAuth2Session
from joserfc import jwt
from joserfc.errors import BadSignatureError, ExpiredTokenError, InvalidClaimError
from joserfc.jwk import KeySet

from tests.oidc_provider.fixture import (  # noqa: F401 - oidc_provider is the fixture
    Provider,
    oidc_provider,
    running_provider,
    sign_in_at_provider,
)

REDIRECT_URI = "http://127.0.0.1:9/sso/callback"  # never requested: the code is read from it
SCOPE = "openid email profile groups"
TIMEOUT = 30


@dataclass
class Party:
    """A relying party registered at the provider, and a user who can sign in there."""

    provider: Provider
    client_id: str
    client_secret: str
    username: str
    password: str
    sub: str

    @property
    def discovery(self) -> dict[str, Any]:
        return requests.get(self.provider.discovery_url, timeout=TIMEOUT).json()


@pytest.fixture
def party(oidc_provider: Provider) -> Iterator[Party]:
    """A fresh client and user; tampering is off before and after."""
    tag = secrets.token_hex(4)
    client_id, client_secret = f"console-{tag}", secrets.token_hex(16)
    oidc_provider.client(client_id, client_secret, [REDIRECT_URI])
    username, password = f"user-{tag}", secrets.token_hex(8)
    sub = oidc_provider.user(username, password, f"{username}@example.com",
                             email_verified=True, name="Ada Lovelace", groups=["engineering"])
    oidc_provider.tamper("none")
    yield Party(oidc_provider, client_id, client_secret, username, password, sub)
    oidc_provider.tamper("none")


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize(party: Party, *, nonce: str, challenge: str | None) -> dict[str, list[str]]:
    """The authorization request with these parameters, signed in; returns the callback's
    query parameters."""
    params = {"response_type": "code", "client_id": party.client_id,
              "redirect_uri": REDIRECT_URI, "scope": SCOPE, "state": "st4te", "nonce": nonce}
    if challenge is not None:
        params.update(code_challenge=challenge, code_challenge_method="S256")
    url = f"{party.discovery['authorization_endpoint']}?{urlencode(params)}"
    return parse_qs(urlsplit(follow_to_callback(party, url)).query)


def follow_to_callback(party: Party, authorization_url: str) -> str:
    """What the browser does; returns the URL the provider sends back to the callback."""
    return sign_in_at_provider(party.provider, authorization_url, party.username,
                               party.password, REDIRECT_URI)


def sign_in(party: Party, nonce: str = "n0nce") -> dict[str, Any]:
    """The whole code flow with PKCE S256; returns the token endpoint's answer."""
    verifier, challenge = pkce_pair()
    callback = authorize(party, nonce=nonce, challenge=challenge)
    assert callback["state"] == ["st4te"]
    response = requests.post(party.discovery["token_endpoint"], data={
        "grant_type": "authorization_code", "code": callback["code"][0],
        "redirect_uri": REDIRECT_URI, "code_verifier": verifier,
    }, auth=(party.client_id, party.client_secret), timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    return response.json()


def refresh(party: Party, refresh_token: str) -> requests.Response:
    return requests.post(party.discovery["token_endpoint"], data={
        "grant_type": "refresh_token", "refresh_token": refresh_token,
    }, auth=(party.client_id, party.client_secret), timeout=TIMEOUT)


def userinfo(party: Party, access_token: str) -> requests.Response:
    return requests.get(party.discovery["userinfo_endpoint"],
                        headers={"Authorization": f"Bearer {access_token}"}, timeout=TIMEOUT)


def jwks(party: Party) -> KeySet:
    return KeySet.import_key_set(
        requests.get(party.discovery["jwks_uri"], timeout=TIMEOUT).json())


def genuine_kid(party: Party) -> str:
    keys = requests.get(party.discovery["jwks_uri"], timeout=TIMEOUT).json()["keys"]
    assert len(keys) == 1
    return keys[0]["kid"]


def peek(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and claims, unverified."""
    header, claims, _signature = token.split(".")
    return _b64_json(header), _b64_json(claims)


def _b64_json(segment: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def verify_id_token(party: Party, id_token: str, nonce: str | None = "n0nce") -> dict[str, Any]:
    """What a relying party does: signature against the JWKS, then iss, aud, exp, iat,
    nonce."""
    token = jwt.decode(id_token, jwks(party), algorithms=["RS256"])
    options: dict[str, Any] = {
        "iss": {"essential": True, "value": party.provider.issuer},
        "aud": {"essential": True, "value": party.client_id},
        "exp": {"essential": True}, "iat": {"essential": True}, "sub": {"essential": True},
    }
    if nonce is not None:
        options["nonce"] = {"essential": True, "value": nonce}
    jwt.JWTClaimsRegistry(**options).validate(token.claims)
    return token.claims


def test_discovery_names_the_issuer_the_tokens_carry(party: Party) -> None:
    discovery = party.discovery
    assert discovery["issuer"] == party.provider.issuer
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/o", discovery["issuer"])
    assert discovery["code_challenge_methods_supported"] == ["S256"]
    assert {"openid", "email", "profile", "groups"} <= set(discovery["scopes_supported"])
    assert {"sub", "email", "email_verified", "name", "preferred_username",
            "groups"} <= set(discovery["claims_supported"])
    claims = verify_id_token(party, sign_in(party)["id_token"])
    assert claims["iss"] == discovery["issuer"]


def test_code_flow_issues_a_signed_id_token_with_our_claims(party: Party) -> None:
    tokens = sign_in(party, nonce="the-nonce")
    assert tokens["token_type"] == "Bearer"
    assert tokens["refresh_token"]
    assert 0 < tokens["expires_in"] <= 300
    header, _claims = peek(tokens["id_token"])
    assert header["alg"] == "RS256"
    assert header["kid"] == genuine_kid(party)
    claims = verify_id_token(party, tokens["id_token"], nonce="the-nonce")
    assert claims["sub"] == party.sub
    assert claims["email"] == f"{party.username}@example.com"
    assert claims["email_verified"] is True
    assert claims["name"] == "Ada Lovelace"
    assert claims["preferred_username"] == party.username
    assert claims["groups"] == ["engineering"]
    assert claims["exp"] - claims["iat"] == 300


def test_an_authlib_client_completes_the_flow(party: Party) -> None:
    """The console's OIDC library (Authlib) against this provider: its PKCE, its client
    authentication (client_secret_basic), its refresh, its at_hash check."""
    discovery = party.discovery
    client = OAuth2Session(party.client_id, party.client_secret, scope=SCOPE,
                           redirect_uri=REDIRECT_URI, code_challenge_method="S256")
    verifier = secrets.token_urlsafe(48)
    url, _state = client.create_authorization_url(
        discovery["authorization_endpoint"], code_verifier=verifier, nonce="authlib-nonce")
    callback = follow_to_callback(party, url)
    tokens = client.fetch_token(discovery["token_endpoint"], authorization_response=callback,
                                code_verifier=verifier)
    claims = verify_id_token(party, tokens["id_token"], nonce="authlib-nonce")
    at_hash = hashlib.sha256(tokens["access_token"].encode()).digest()[:16]
    assert claims["at_hash"] == base64.urlsafe_b64encode(at_hash).rstrip(b"=").decode()
    fresh = client.refresh_token(discovery["token_endpoint"],
                                 refresh_token=tokens["refresh_token"])
    assert fresh["refresh_token"] != tokens["refresh_token"]
    assert verify_id_token(party, fresh["id_token"], nonce=None)["sub"] == party.sub


def test_userinfo_shows_the_same_claims(party: Party) -> None:
    tokens = sign_in(party)
    response = userinfo(party, tokens["access_token"])
    assert response.status_code == 200, response.text
    assert response.json() == {
        "sub": party.sub, "email": f"{party.username}@example.com", "email_verified": True,
        "name": "Ada Lovelace", "preferred_username": party.username,
        "groups": ["engineering"]}


def test_unverified_email_is_reported(party: Party) -> None:
    party.provider.user(party.username, party.password, f"{party.username}@example.com",
                        email_verified=False, groups=["a", "b"])
    claims = verify_id_token(party, sign_in(party)["id_token"])
    assert claims["email_verified"] is False
    assert claims["groups"] == ["a", "b"]
    assert claims["name"] == party.username  # no name given: the username stands in


def test_refresh_returns_fresh_tokens_and_current_groups(party: Party) -> None:
    tokens = sign_in(party)
    assert party.provider.user(party.username, party.password, f"{party.username}@example.com",
                               name="Ada Lovelace", groups=["finance", "admins"]) == party.sub
    # The access token issued before the change already shows the current groups.
    assert userinfo(party, tokens["access_token"]).json()["groups"] == ["admins", "finance"]
    response = refresh(party, tokens["refresh_token"])
    assert response.status_code == 200, response.text
    fresh = response.json()
    assert fresh["access_token"] != tokens["access_token"]
    assert fresh["refresh_token"] != tokens["refresh_token"]  # rotated
    claims = verify_id_token(party, fresh["id_token"], nonce=None)
    assert claims["sub"] == party.sub
    assert claims["groups"] == ["admins", "finance"]
    assert userinfo(party, fresh["access_token"]).json()["groups"] == ["admins", "finance"]
    # Rotation: the old refresh token is spent.
    assert refresh(party, tokens["refresh_token"]).status_code == 400


def test_refresh_fails_once_the_user_is_deactivated(party: Party) -> None:
    tokens = sign_in(party)
    party.provider.user(party.username, party.password, f"{party.username}@example.com",
                        active=False)
    response = refresh(party, tokens["refresh_token"])
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "invalid_grant"
    assert userinfo(party, tokens["access_token"]).status_code == 401
    # Reactivated, the same refresh token works again: the refusal was for the user.
    party.provider.user(party.username, party.password, f"{party.username}@example.com")
    assert refresh(party, tokens["refresh_token"]).status_code == 200


def test_pkce_is_required(party: Party) -> None:
    callback = authorize(party, nonce="n", challenge=None)
    assert callback["error"] == ["invalid_request"]
    verifier, challenge = pkce_pair()
    code = authorize(party, nonce="n", challenge=challenge)["code"][0]
    response = requests.post(party.discovery["token_endpoint"], data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI,
        "code_verifier": pkce_pair()[0]}, auth=(party.client_id, party.client_secret),
        timeout=TIMEOUT)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_grant"


@pytest.mark.parametrize(("mode", "error", "claim"), [
    ("bad_signature", BadSignatureError, None),
    ("wrong_audience", InvalidClaimError, "aud"),
    ("expired", ExpiredTokenError, "exp"),
])
def test_tampered_id_tokens_fail_their_check(party: Party, mode: str, error: type[Exception],
                                             claim: str | None) -> None:
    party.provider.tamper(mode)
    tokens = sign_in(party)
    with pytest.raises(error) as raised:
        verify_id_token(party, tokens["id_token"])
    if claim is not None:
        assert raised.value.claim == claim
    # Only that check fails: the genuine kid, a signature that verifies unless it is the
    # one spoiled, and otherwise the genuine claims.
    header, claims = peek(tokens["id_token"])
    assert header["kid"] == genuine_kid(party)
    if mode == "bad_signature":
        jwt.JWTClaimsRegistry(aud={"essential": True, "value": party.client_id}).validate(claims)
    else:
        jwt.decode(tokens["id_token"], jwks(party), algorithms=["RS256"])
    if mode == "wrong_audience":
        assert claims["aud"] == "another-client"
    if mode == "expired":
        assert claims["exp"] < time.time() - 3000
        assert claims["iat"] < claims["exp"]
    assert claims["sub"] == party.sub and claims["nonce"] == "n0nce"
    # A refresh while tampering is spoiled too; back to "none", tokens are genuine again.
    response = refresh(party, tokens["refresh_token"])
    assert response.status_code == 200, response.text
    refreshed = response.json()
    with pytest.raises(error):
        verify_id_token(party, refreshed["id_token"], nonce=None)
    party.provider.tamper("none")
    verify_id_token(party, refresh(party, refreshed["refresh_token"]).json()["id_token"],
                    nonce=None)
    verify_id_token(party, sign_in(party)["id_token"])


@pytest.mark.parametrize("secret", [None, "", "wrong"])
@pytest.mark.parametrize(("endpoint", "payload"), [
    ("clients", {"client_id": "x", "client_secret": "y", "redirect_uris": [REDIRECT_URI]}),
    ("users", {"username": "mallory", "password": "p", "email": "m@example.com"}),
    ("tamper", {"mode": "expired"}),
])
def test_control_api_refuses_a_wrong_secret(oidc_provider: Provider, endpoint: str,
                                            payload: dict[str, Any], secret: str | None) -> None:
    headers = {} if secret is None else {"X-Control-Secret": secret}
    response = requests.post(f"{oidc_provider.base_url}/control/{endpoint}", json=payload,
                             headers=headers, timeout=TIMEOUT)
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden"}


def test_control_api_rejects_bad_input(oidc_provider: Provider) -> None:
    headers = {"X-Control-Secret": oidc_provider.control_secret}
    for endpoint, payload in [("tamper", {"mode": "sideways"}), ("users", {"username": "u"}),
                              ("clients", {"client_id": "c", "client_secret": "s",
                                           "redirect_uris": ["notaurl"]})]:
        response = requests.post(f"{oidc_provider.base_url}/control/{endpoint}", json=payload,
                                 headers=headers, timeout=TIMEOUT)
        assert response.status_code == 400, (endpoint, response.text)


def test_login_page_is_a_plain_form(party: Party) -> None:
    """What a browser test fills in: username, password, a "Sign in" button; a wrong password
    stays on the page with an alert."""
    session = requests.Session()
    login_url = f"{party.provider.base_url}/accounts/login/"
    page = session.get(login_url, timeout=TIMEOUT)
    assert page.status_code == 200
    for fragment in ('name="username"', 'name="password"', '<button type="submit">Sign in'):
        assert fragment in page.text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token
    assert set(session.cookies.keys()) == {"oidc_provider_csrftoken"}
    wrong = session.post(login_url, data={"csrfmiddlewaretoken": token.group(1),
                                          "username": party.username, "password": "nope"},
                         allow_redirects=False, timeout=TIMEOUT)
    assert wrong.status_code == 200 and 'role="alert"' in wrong.text
    right = session.post(login_url, data={"csrfmiddlewaretoken": token.group(1),
                                          "username": party.username,
                                          "password": party.password},
                         allow_redirects=False, timeout=TIMEOUT)
    assert right.status_code == 302
    # An upsert with the same password keeps the provider session (no second sign-in).
    party.provider.user(party.username, party.password, f"{party.username}@example.com",
                        groups=["other"])
    home = session.get(f"{party.provider.base_url}/", timeout=TIMEOUT)
    assert home.text.endswith(f"signed in as {party.username}.")


def test_token_lifetimes_come_from_the_command_line(tmp_path: Path) -> None:
    with running_provider(tmp_path, access_token_seconds=7, id_token_seconds=11) as provider:
        tag = secrets.token_hex(4)
        party = Party(provider, f"short-{tag}", secrets.token_hex(16), f"u-{tag}", "pw", "")
        provider.client(party.client_id, party.client_secret, [REDIRECT_URI])
        party.sub = provider.user(party.username, party.password, "u@example.com")
        tokens = sign_in(party)
        assert tokens["expires_in"] == 7
        claims = verify_id_token(party, tokens["id_token"])
        # oauthlib stamps iat, then DOT reads the clock again for exp (oauth2_validators'
        # get_id_token_dictionary): a second boundary between the two reads makes it 12.
        assert claims["exp"] - claims["iat"] in (11, 12)
        process = provider.process
    assert process.poll() is not None  # stopped when the block ends
