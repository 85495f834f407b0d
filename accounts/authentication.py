"""DRF authentication for agents: ``Authorization: Bearer ctx_…``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken
from accounts.tokens import personal_principal, verify_token

KEYWORD = "Bearer"


def bearer_credential(header: bytes | str) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header, else None."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    keyword, _, raw = header.partition(" ")
    return raw if raw and keyword.lower() == KEYWORD.lower() else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request)
        if not header:
            return None
        raw = bearer_credential(header)
        if raw is None:
            return None
        token = verify_token(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("invalid, expired or revoked token")
        if token.user_id is not None:
            # A personal token: the request is the member's, in the token's organization.
            user = personal_principal(token)
            if user is None:
                raise exceptions.AuthenticationFailed("invalid, expired or revoked token")
            return user, token
        return token, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describes agent tokens in the OpenAPI schema."""

    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "ctx_<prefix>_<secret>"}
