"""DRF authentication for agents: ``Authorization: Bearer ctx_…``."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken
from accounts.tokens import verify_token

KEYWORD = "Bearer"


def bearer_credential(header: bytes | str) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header, else None."""
    if isinstance(header, bytes):
        header = header.decode("latin-1")
    keyword, _, raw = header.partition(" ")
    return raw if raw and keyword.lower() == KEYWORD.lower() else None


class RecentCredentials:
    """Bearer credentials that authenticated in this process within ``ttl`` seconds and were
    not refused since (by authentication or the throttle).

    It grants nothing: every request is still authenticated and throttled. It only tells
    :class:`contexts.api.early.EarlyEmbeddingMiddleware` that a request's forward pass may
    start before that, because its credential is very likely good — so a caller without a
    working credential, or one being throttled, can never make the server embed a query.
    Credentials are kept as SHA-256 digests, at most ``size`` of them (oldest out first).
    """

    def __init__(self, ttl: float = 300.0, size: int = 10_000) -> None:
        self.ttl, self.size = ttl, size
        self._seen: OrderedDict[bytes, float] = OrderedDict()  # digest → monotonic expiry
        self._lock = threading.Lock()

    @staticmethod
    def _digest(credential: str) -> bytes:
        return hashlib.sha256(credential.encode()).digest()

    def remember(self, credential: str) -> None:
        digest = self._digest(credential)
        with self._lock:
            self._seen[digest] = time.monotonic() + self.ttl
            self._seen.move_to_end(digest)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def forget(self, credential: str | None) -> None:
        if credential:
            with self._lock:
                self._seen.pop(self._digest(credential), None)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def __contains__(self, credential: str) -> bool:
        expires = self._seen.get(self._digest(credential))
        return expires is not None and expires > time.monotonic()


recent_credentials = RecentCredentials()


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = KEYWORD

    def authenticate(self, request: Request) -> tuple[ApiToken, ApiToken] | None:
        header = authentication.get_authorization_header(request)
        if not header:
            return None
        raw = bearer_credential(header)
        if raw is None:
            return None
        token = verify_token(raw)
        if token is None:
            recent_credentials.forget(raw)
            raise exceptions.AuthenticationFailed("invalid, expired or revoked token")
        recent_credentials.remember(raw)
        return token, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describes agent tokens in the OpenAPI schema."""

    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "ctx_<prefix>_<secret>"}
