"""The console's OpenID Connect client: the provider's metadata, the authorization-code flow with
PKCE, the ID token's validation, and the back-channel questions the periodic check asks.

Authlib (ADR 0019) does the protocol: discovery, ``state``, ``nonce`` and the PKCE verifier kept
in the Django session between the redirect and the callback, the code exchange, and the ID
token's validation — signature against the provider's keys, issuer, audience, expiry, nonce
and ``at_hash``. This module configures it from settings, turns its errors into one
:class:`SignInFailed` with a reason a person can read, and seals the refresh tokens it stores.

Refresh tokens are sealed (Fernet, a key derived from ``SECRET_KEY``): a copy of the database
alone does not let anyone ask the provider for tokens. Rotating ``SECRET_KEY`` makes the
stored ones unreadable; the periodic check then drops them (logged) and those people are
checked at their next sign-in instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import parse_qsl

from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.django_client import OAuth
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from joserfc.errors import BadSignatureError, ClaimError, ExpiredTokenError
from requests import RequestException

from accounts.models import Role

logger = logging.getLogger(__name__)

NAME = "oidc"


class SignInFailed(Exception):
    """The provider's answer was refused; ``reason`` is shown to the person."""

    def __init__(self, reason: str, *, detail: str = "", audited: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail  # for the log and the audit event, not the page
        # A callback without this browser's state names nobody and costs an anonymous caller
        # nothing to send: logged, not written to every organization's audit trail.
        self.audited = audited


class ProviderUnavailable(Exception):
    """The provider did not answer: nothing is concluded about the person."""


@dataclass(frozen=True)
class Grant:
    """A role the mapping gives: in an organization, or in one of its repositories."""

    org: str
    role: str
    repo: str | None = None


def enabled() -> bool:
    return settings.OIDC_ENABLED


@cache
def _oauth() -> OAuth:
    oauth = OAuth()
    oauth.register(
        NAME, client_id=settings.OIDC_CLIENT_ID, client_secret=settings.OIDC_CLIENT_SECRET,
        server_metadata_url=settings.OIDC_DISCOVERY_URL,
        client_kwargs={"scope": settings.OIDC_SCOPES, "code_challenge_method": "S256",
                       "default_timeout": settings.OIDC_TIMEOUT_SECONDS},
        # e.g. Google's access_type=offline, without which it issues no refresh token.
        authorize_params=dict(parse_qsl(settings.OIDC_AUTHORIZE_PARAMS)) or None)
    return oauth


def client() -> Any:
    if not enabled():
        raise ImproperlyConfigured("single sign-on is not configured (OIDC_DISCOVERY_URL or "
                                   "OIDC_ISSUER, and OIDC_CLIENT_ID)")
    return _oauth().create_client(NAME)


def reset() -> None:
    """Forget the client and its cached metadata (settings changed: tests, reconfiguration)."""
    _oauth.cache_clear()
    group_mapping.cache_clear()


def issuer() -> str:
    """The provider's issuer, as its discovery document states it."""
    try:
        return client().load_server_metadata()["issuer"]
    except Exception as exc:  # noqa: BLE001 - unreachable, or not a discovery document
        raise ProviderUnavailable(f"the provider's discovery document: {exc}") from exc


def authorize_redirect(request: HttpRequest, redirect_uri: str) -> HttpResponse:
    """The redirect to the provider; ``state``, ``nonce`` and the PKCE verifier go into the
    session."""
    try:
        return client().authorize_redirect(request, redirect_uri)
    except Exception as exc:  # noqa: BLE001 - the provider's metadata could not be read
        raise SignInFailed("The identity provider cannot be reached. Try again later.",
                           detail=str(exc)) from exc


_NOT_STARTED_HERE = ("This sign-in link is not the one this browser started (the state does not "
                     "match). Start again from the login page.")


def complete(request: HttpRequest) -> tuple[dict, dict]:
    """The callback: (the ID token's validated claims, the token response). Raises
    :class:`SignInFailed` for an answer that does not hold (state, nonce, signature,
    audience, expiry, or the provider's own error)."""
    app = client()
    state = request.GET.get("state")
    # Checked before anything else, the provider's error too (authlib reads ``error`` first):
    # anyone can send a callback, and only one answering a sign-in this browser started may
    # write an audit event.
    if not state or not app.framework.get_state_data(request.session, state):
        raise SignInFailed(_NOT_STARTED_HERE, detail="no sign-in of this browser has this state",
                           audited=False)
    if not request.GET.get("code") and not request.GET.get("error"):
        app.framework.clear_state_data(request.session, state)  # this sign-in is over
        raise SignInFailed("The identity provider's answer carried no authorization code. "
                           "Start again from the login page.", detail="no code, no error")
    try:
        token = app.authorize_access_token(request)
    except OAuthError as exc:
        if exc.error == "mismatching_state":
            raise SignInFailed(_NOT_STARTED_HERE, detail=str(exc), audited=False) from exc
        raise SignInFailed(f"The identity provider refused the sign-in ({exc.error}).",
                           detail=str(exc)) from exc
    except RequestException as exc:
        raise SignInFailed("The identity provider cannot be reached. Try again later.",
                           detail=str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - joserfc's errors: the ID token does not hold
        raise SignInFailed(_why_token_refused(exc), detail=f"{type(exc).__name__}: {exc}"
                           ) from exc
    claims = token.get("userinfo")
    if not claims or not claims.get("sub"):
        # Without an ID token there is nothing signed that says who this is.
        raise SignInFailed("The identity provider sent no ID token.",
                           detail=f"token keys: {sorted(token)}")
    return dict(claims), token


_CLAIM_REASONS = {
    "aud": "it was issued for another application (audience)",
    "azp": "it was issued for another application (audience)",
    "exp": "it has expired",
    "iat": "its issue time is wrong",
    "nonce": "it does not answer this sign-in (nonce)",
    "iss": "it comes from another issuer",
    "at_hash": "it does not match the access token (at_hash)",
}


def _why_token_refused(exc: Exception) -> str:
    if isinstance(exc, BadSignatureError):
        why = "its signature does not verify against the provider's keys"
    elif isinstance(exc, ExpiredTokenError):
        why = "it has expired"
    elif isinstance(exc, ClaimError):
        why = _CLAIM_REASONS.get(exc.claim, f"its {exc.claim!r} claim does not hold")
    else:
        why = "it is not valid"
    return f"The identity provider's ID token was refused: {why}. Nothing was signed in."


class TokenUnreadable(Exception):
    """A stored refresh token does not open (``SECRET_KEY`` changed): the provider cannot be
    asked, which says nothing about the person."""


def refresh(sealed_token: str) -> tuple[dict | None, str]:
    """Ask the provider about a person again: (their current claims, or None when the provider
    refused them; the new sealed refresh token). The claims are the refreshed ID token's
    (validated as at sign-in, but for the nonce) with userinfo's over them: some providers put
    groups only in the ID token (Entra ID), others only in userinfo. Raises
    :class:`ProviderUnavailable` when the provider did not answer, :class:`TokenUnreadable`
    when the stored token does not open."""
    refresh_token = unseal(sealed_token)
    if not refresh_token:
        raise TokenUnreadable("the stored refresh token does not open")
    oidc = client()
    try:
        token = oidc.fetch_access_token(grant_type="refresh_token", refresh_token=refresh_token)
    except OAuthError as exc:
        if exc.error in {"invalid_grant", "unauthorized_client", "invalid_client"}:
            return None, ""
        raise ProviderUnavailable(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - network: conclude nothing
        raise ProviderUnavailable(str(exc)) from exc
    claims: dict = {}
    if token.get("id_token"):
        try:
            claims.update(oidc.parse_id_token(token, nonce=None))
        except Exception as exc:  # noqa: BLE001 - a refreshed ID token that does not hold
            raise ProviderUnavailable(f"the refreshed ID token was refused: {exc}") from exc
    try:
        claims.update(oidc.userinfo(token=token))
    except Exception as exc:  # noqa: BLE001 - 401: the provider no longer knows the person
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return None, ""
        raise ProviderUnavailable(str(exc)) from exc
    return claims, seal(token.get("refresh_token") or refresh_token)


# --- the mapping from groups to roles -----------------------------------------------------------
@cache
def group_mapping() -> dict[str, tuple[Grant, ...]]:
    """``OIDC_GROUP_MAPPING`` parsed and checked; a mistake is a configuration error that says
    where."""
    try:
        raw = json.loads(settings.OIDC_GROUP_MAPPING or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"OIDC_GROUP_MAPPING is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ImproperlyConfigured("OIDC_GROUP_MAPPING must be an object: group → list of "
                                   "grants")
    mapping: dict[str, tuple[Grant, ...]] = {}
    for group, grants in raw.items():
        if isinstance(grants, dict):
            grants = [grants]
        if not isinstance(grants, list):
            raise ImproperlyConfigured(f"OIDC_GROUP_MAPPING[{group!r}] must be a list of "
                                       "grants")
        parsed = []
        for n, grant in enumerate(grants):
            where = f"OIDC_GROUP_MAPPING[{group!r}][{n}]"
            if not isinstance(grant, dict) or set(grant) - {"org", "repo", "role"}:
                raise ImproperlyConfigured(f"{where} must be {{\"org\", \"role\"[, \"repo\"]}}")
            if not isinstance(grant.get("org"), str) or not grant["org"]:
                raise ImproperlyConfigured(f"{where}: \"org\" (an organization slug) is needed")
            if grant.get("role") not in Role.values:
                raise ImproperlyConfigured(f"{where}: \"role\" must be one of "
                                           f"{', '.join(Role.values)}, not {grant.get('role')!r}")
            repo = grant.get("repo")
            if repo is not None and (not isinstance(repo, str) or not repo):
                raise ImproperlyConfigured(f"{where}: \"repo\" must be a repository slug")
            parsed.append(Grant(grant["org"], grant["role"], repo))
        mapping[str(group)] = tuple(parsed)
    return mapping


def states_groups(claims: dict) -> bool:
    """Do these claims say the person's groups at all? (An absent claim says nothing: a
    periodic check keeps the groups last seen rather than read it as "in no group".)"""
    return settings.OIDC_GROUPS_CLAIM in claims


def groups_of(claims: dict) -> list[str]:
    """The groups claim as a list of strings (one string is one group; absent is none)."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return sorted({str(group) for group in value if isinstance(group, str | int)})


def grants_for(groups: list[str]) -> list[Grant]:
    mapping = group_mapping()
    return [grant for group in groups for grant in mapping.get(group, ())]


def email_allowed(email: str) -> bool:
    domains = settings.OIDC_ALLOWED_DOMAINS
    if not domains:
        return True
    return "@" in email and email.rsplit("@", 1)[1].lower() in domains


# --- sealed refresh tokens ------------------------------------------------------------------------
@cache
def _fernet() -> Fernet:
    key = hashlib.sha256(b"contexts.oidc.refresh-token|" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(refresh_token: str | None) -> str:
    return _fernet().encrypt(refresh_token.encode()).decode() if refresh_token else ""


def unseal(sealed: str) -> str:
    if not sealed:
        return ""
    try:
        return _fernet().decrypt(sealed.encode()).decode()
    except InvalidToken:
        logger.warning("a stored refresh token does not open (SECRET_KEY changed?)")
        return ""
