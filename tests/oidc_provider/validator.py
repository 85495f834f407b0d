"""The provider's OAuth2Validator: our claims, refusal of deactivated users, ID-token tampering.

django-oauth-toolkit asks the class named by ``OAUTH2_PROVIDER["OAUTH2_VALIDATOR_CLASS"]`` for
the claims of the ID token and of the userinfo endpoint (``get_additional_claims``, filtered by
``oidc_claim_scope``) and has it sign each ID token (``finalize_id_token``).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from jwcrypto import jwk, jwt
from oauth2_provider.oauth2_validators import OAuth2Validator

# What POST /control/tamper accepts: how the next ID tokens are spoiled, until "none".
TAMPER_MODES = ("none", "bad_signature", "wrong_audience", "expired")
# The audience a "wrong_audience" token names instead of the client's id.
WRONG_AUDIENCE = "another-client"
# How far into the past an "expired" token's exp (and iat) are moved beyond their lifetime.
EXPIRED_BY_SECONDS = 3600

_lock = threading.Lock()
_tamper_mode = "none"
_impostor_key: jwk.JWK | None = None


def set_tamper_mode(mode: str) -> None:
    """Process-wide (the provider is one process): every request thread sees the change."""
    if mode not in TAMPER_MODES:
        raise ValueError(f"unknown tamper mode {mode!r}; one of {', '.join(TAMPER_MODES)}")
    global _tamper_mode
    with _lock:
        _tamper_mode = mode


def tamper_mode() -> str:
    with _lock:
        return _tamper_mode


def impostor_key() -> jwk.JWK:
    """Another RSA key, made on first use: signs the "bad_signature" tokens."""
    global _impostor_key
    with _lock:
        if _impostor_key is None:
            _impostor_key = jwk.JWK.generate(kty="RSA", size=2048)
        return _impostor_key


def _profile_value(user: Any, field: str, default: Any) -> Any:
    profile = getattr(user, "oidc_profile", None)
    return getattr(profile, field) if profile is not None else default


def _groups(user: Any) -> list[str]:
    # Read at every call: the userinfo endpoint and a refreshed ID token show the user's
    # groups as they are now, not as they were at sign-in.
    return sorted(user.groups.values_list("name", flat=True))


def _b64decode_json(segment: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


class ProviderValidator(OAuth2Validator):
    """Adds email, email_verified, name, preferred_username and groups; sub stays DOT's
    ``str(user.pk)``."""

    # A claim whose scope is not in this map is dropped by get_oidc_claims: groups needs one.
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self) -> dict[str, Callable[[Any], Any]]:
        """Request-agnostic form (no ``request`` argument): DOT then also lists these claims
        in the discovery document's ``claims_supported``. Each value is called with the
        oauthlib request whose ``user`` the token is for."""
        return {
            "email": lambda r: r.user.email,
            "email_verified": lambda r: bool(_profile_value(r.user, "email_verified", True)),
            "name": lambda r: _profile_value(r.user, "name", "") or r.user.get_username(),
            "preferred_username": lambda r: r.user.get_username(),
            "groups": lambda r: _groups(r.user),
        }

    def validate_refresh_token(self, refresh_token: str, client: Any, request: Any,
                               *args: Any, **kwargs: Any) -> bool:
        """DOT refreshes for any user the token belongs to; a user deactivated here must get
        invalid_grant, which is how a relying party's periodic refresh learns of removal."""
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            return False
        return bool(request.user.is_active)

    def validate_bearer_token(self, token: str, scopes: Any, request: Any) -> bool:
        """Nor does userinfo answer for a deactivated user's still-unexpired access token."""
        if not super().validate_bearer_token(token, scopes, request):
            return False
        return bool(request.user.is_active)

    def finalize_id_token(self, id_token: dict[str, Any], token: dict[str, Any],
                          token_handler: Any, request: Any) -> str:
        """DOT's signed token (and its IDToken row), re-signed spoiled when a tamper mode is
        set: the header, kid included, stays the genuine one."""
        serialized = super().finalize_id_token(id_token, token, token_handler, request)
        mode = tamper_mode()
        if mode == "none":
            return serialized
        header_segment, claims_segment, _signature = serialized.split(".")
        header = _b64decode_json(header_segment)
        claims = _b64decode_json(claims_segment)
        key = request.client.jwk_key
        if mode == "bad_signature":
            key = impostor_key()
        elif mode == "wrong_audience":
            claims["aud"] = WRONG_AUDIENCE
        elif mode == "expired":
            now = int(time.time())
            claims["exp"] = now - EXPIRED_BY_SECONDS
            claims["iat"] = now - EXPIRED_BY_SECONDS - settings.ID_TOKEN_SECONDS
        spoiled = jwt.JWT(header=json.dumps(header), claims=json.dumps(claims))
        spoiled.make_signed_token(key)
        return spoiled.serialize()
