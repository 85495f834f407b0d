"""Settings of the test OpenID Connect provider (``python -m tests.oidc_provider``).

Read once, in the provider's own process: ``__main__`` puts the data directory, the issuer, the
token lifetimes and the control secret in the environment before Django loads this module.
Nothing here is shared with the project's settings.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _rsa_private_key_pem() -> str:
    """A fresh signing key per run: tests get their keys from the JWKS, never from a file."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()


DATA_DIR = Path(os.environ["OIDC_PROVIDER_DATA_DIR"])
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]
CONTROL_SECRET = os.environ["OIDC_PROVIDER_CONTROL_SECRET"]
ACCESS_TOKEN_SECONDS = int(os.environ.get("OIDC_PROVIDER_ACCESS_TOKEN_SECONDS", "300"))
ID_TOKEN_SECONDS = int(os.environ.get("OIDC_PROVIDER_ID_TOKEN_SECONDS", "300"))

SECRET_KEY = secrets.token_urlsafe(50)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "tests.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_provider.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
    ]},
}]

# One file, several request threads: WAL lets readers run beside the writer, IMMEDIATE
# transactions take the write lock up front (no deadlock-by-upgrade), and a writer waits for
# another rather than failing with "database is locked".
DATABASES = {"default": {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": DATA_DIR / "provider.sqlite3",
    "OPTIONS": {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    },
}}

# The provider and the relying party under test both run on 127.0.0.1, and browsers do not
# separate cookies by port: with Django's default names, signing in here would overwrite the
# console's session and CSRF cookies.
SESSION_COOKIE_NAME = "oidc_provider_sessionid"
CSRF_COOKIE_NAME = "oidc_provider_csrftoken"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Test users only: hashing speed buys nothing here.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _rsa_private_key_pem(),
    # Fixed rather than derived from each request's Host header, so that the discovery
    # document's issuer and every ID token's iss are the same string whatever host name a
    # client used.
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.ProviderValidator",
    "PKCE_REQUIRED": True,
    # offline_access is accepted (some clients ask for it) but not needed: the
    # authorization-code grant always issues a refresh token.
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Email address",
        "profile": "Name and username",
        "groups": "Group memberships",
        "offline_access": "Refresh tokens",
    },
    "DEFAULT_SCOPES": ["openid"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": ACCESS_TOKEN_SECONDS,
    "ID_TOKEN_EXPIRE_SECONDS": ID_TOKEN_SECONDS,
    "ROTATE_REFRESH_TOKEN": True,
    "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
    # RFC 9700 behaviour now rather than a warning per request: no implicit or password
    # grant, PKCE with S256 only.
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
}

# Requests are logged only when they fail (4xx, 5xx): the log is for diagnosing a test.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.server": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        "django": {"handlers": ["stderr"], "level": "WARNING"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "WARNING"},
    },
}
