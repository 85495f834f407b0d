"""Single sign-on test support: the console configured against the real test provider
(``tests.oidc_provider``, its own process), and a sign-in driven as a browser would drive it —
the console's redirect, the provider's login form, the callback back into the console."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from django.test import Client

from contexts.sso import oidc
from tests.oidc_provider.fixture import Provider, sign_in_at_provider

TIMEOUT = 30
# People's password at the provider, made at run time (no credential-shaped literal in a
# tracked file: this repository is the demo's corpus and must raise no secret finding).
PASSWORD = secrets.token_urlsafe(12)
MAPPING = {
    "acme-leads": [{"org": "acme", "role": "tech_lead"}],
    "acme-staff": [{"org": "acme", "role": "viewer"}],
    "payments-curators": [{"org": "acme", "repo": "payments", "role": "curator"}],
}


@dataclass
class Sso:
    provider: Provider
    client_id: str
    callback_urls: tuple[str, ...]

    def person(self, username: str, *, email: str | None = None, verified: bool = True,
               groups: tuple[str, ...] = ("acme-leads",), active: bool = True,
               name: str = "") -> str:
        """Create or update a person at the provider; returns their subject."""
        return self.provider.user(username, PASSWORD, email or f"{username}@acme.test",
                                  email_verified=verified, name=name or username.title(),
                                  groups=groups, active=active)


def configure(settings, provider: Provider, callback_urls: tuple[str, ...]) -> Sso:
    """Register a fresh client at the provider and point the console at it."""
    client_id = f"console-{secrets.token_hex(4)}"
    secret = secrets.token_urlsafe(24)
    provider.client(client_id, secret, list(callback_urls))
    settings.OIDC_DISCOVERY_URL = provider.discovery_url
    settings.OIDC_CLIENT_ID = client_id
    settings.OIDC_CLIENT_SECRET = secret
    settings.OIDC_SCOPES = "openid email profile groups"
    settings.OIDC_ENABLED = True
    settings.OIDC_GROUP_MAPPING = json.dumps(MAPPING)
    settings.OIDC_ALLOWED_DOMAINS = []
    oidc.reset()
    return Sso(provider, client_id, callback_urls)


@pytest.fixture
def sso(settings, oidc_provider: Provider):
    configured = configure(settings, oidc_provider,
                           ("http://testserver/login/sso/callback/",))
    yield configured
    oidc_provider.tamper("none")
    oidc.reset()


def provider_round_trip(sso: Sso, authorize_url: str, username: str) -> str:
    """A browser at the provider, signing in as ``username``; returns the console callback URL
    (path and query) the provider sends the browser back to."""
    parts = urlsplit(sign_in_at_provider(sso.provider, authorize_url, username, PASSWORD,
                                         sso.callback_urls))
    return f"{parts.path}?{parts.query}"


def start(client: Client) -> str:
    """The console's redirect to the provider; returns the authorization URL."""
    response = client.get("/login/sso/")
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def sign_in(sso: Sso, client: Client, username: str):
    """The whole sign-in; returns the console's answer to the callback."""
    return client.get(provider_round_trip(sso, start(client), username))
