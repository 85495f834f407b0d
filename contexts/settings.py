"""Django settings for Contexts, read from the environment (twelve-factor).

Defaults run everything embedded on one machine (see ``contexts/stack/servers.py``): PostgreSQL and
Redis listen on 127.0.0.1 at ``CONTEXTS_PG_PORT`` / ``CONTEXTS_REDIS_PORT`` with their data under
``CONTEXTS_VAR_DIR``. Setting ``DATABASE_URL`` / ``REDIS_URL`` switches to external services.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import dj_database_url

from contexts import config
from contexts.kernel import local_secrets
from contexts.stack.runsettings import served_url

BASE_DIR = Path(__file__).resolve().parent.parent

# Every variable read below is declared, with its type, default and a sentence, in
# contexts/config/ (docs/configuration.md is its reference). An invalid value does not stop this
# import: the reader keeps the default and records the error, and CONFIGURATION_ERRORS, at the
# end, holds them all for the start-up check (contexts/config/checks.py). Reading the settings
# writes no file and sets no environment variable (contexts/kernel/local_secrets.py generates
# the secrets read here, at start).
env = config.environment()

DEBUG = env("DEBUG")
VAR_DIR = config.var_dir(env)

# CONTEXTS_PRODUCTION=true (docker/compose.yaml sets it): secrets come from the environment
# only. A missing SECRET_KEY, or the compose file's "change-me…" placeholder, stops the start
# instead of quietly generating a key that differs per container and per volume.
PRODUCTION = env("CONTEXTS_PRODUCTION")
if PRODUCTION:
    if not env("SECRET_KEY") or env("SECRET_KEY").startswith("change-me"):
        env.error("SECRET_KEY", "must be set (or SECRET_KEY_FILE) to a long random value when "
                                "CONTEXTS_PRODUCTION is on")
    if DEBUG:
        env.error("DEBUG", "must be off when CONTEXTS_PRODUCTION is on")
    # Nor the compose file's placeholder passwords for PostgreSQL and Redis.
    for _name in ("DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL"):
        if "change-me" in env(_name):
            env.error(_name, "still holds a change-me placeholder password; set "
                             "POSTGRES_PASSWORD, CONTEXTS_DB_PASSWORD and REDIS_PASSWORD "
                             "(docs/operations.md)")
# Without SECRET_KEY (outside production), the random key the start generated into var/
# (local_secrets.prepare): never a fixed one, and stable across restarts so sessions and signed
# links survive them. Missing (settings imported by no entry point, e.g. a test process):
# empty, and Django refuses to sign anything with it.
SECRET_KEY = env("SECRET_KEY") or ("" if PRODUCTION else local_secrets.read(
    VAR_DIR / local_secrets.SECRET_KEY_FILE))
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("CSRF_TRUSTED_ORIGINS")

# --- Embedded services -------------------------------------------------------------------------
EMBEDDED_PG_PORT = env("CONTEXTS_PG_PORT")
EMBEDDED_REDIS_PORT = env("CONTEXTS_REDIS_PORT")
DATABASE_URL = env("DATABASE_URL")
REDIS_URL = env("REDIS_URL")
USE_EMBEDDED_POSTGRES = not DATABASE_URL
USE_EMBEDDED_REDIS = not REDIS_URL
# Both embedded services require a password, generated once into var/secrets/ (0600) at start
# (contexts/kernel/local_secrets.py). The application connects as contexts_app (no superuser, no
# BYPASSRLS, owns nothing); migrations, backups and restores as the owner, DATABASE_OWNER below
# (contexts/stack/owner_db.py).
from contexts.stack.servers import PG_APP_ROLE, PG_OWNER_ROLE  # noqa: E402


def embedded_database_url(role: str) -> str:
    password = local_secrets.read(local_secrets.secret_path(
        VAR_DIR, {PG_APP_ROLE: "postgres_app", PG_OWNER_ROLE: "postgres_owner"}[role]))
    return f"postgres://{role}:{password}@127.0.0.1:{EMBEDDED_PG_PORT}/contexts"


EMBEDDED_DATABASE_URL = embedded_database_url(PG_APP_ROLE) if USE_EMBEDDED_POSTGRES else ""
EMBEDDED_REDIS_URL = (
    f"redis://:{local_secrets.read(local_secrets.secret_path(VAR_DIR, 'redis'))}@127.0.0.1:"
    f"{EMBEDDED_REDIS_PORT}/0" if USE_EMBEDDED_REDIS else "")
# The schema's owner. Without DATABASE_OWNER_URL an external DATABASE_URL's role is the owner.
DATABASE_OWNER_URL = env("DATABASE_OWNER_URL") or (
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
WEB_THREADS = env("CONTEXTS_WEB_THREADS")
# Requests a keep-alive connection serves before the server closes it, so that connections
# spread over the web processes again (contexts/web/worker.py); 0 keeps them open.
KEEPALIVE_REQUESTS = env("CONTEXTS_KEEPALIVE_REQUESTS")
# Seconds a request body may take to arrive (the whole of a small body; between two reads of an
# upload), and a stalled streaming response may wait for its reader: contexts/web/wsgi_bridge.py.
REQUEST_BODY_TIMEOUT = env("CONTEXTS_REQUEST_BODY_TIMEOUT")
# A web process collects young objects every this many allocations (0: Python's default of
# 700); see contexts/web/serving.py.
GC_THRESHOLD = env("CONTEXTS_GC_THRESHOLD")
# A retrieval's trace row, use counts and metrics are written in its response's close(), each
# statement bounded by this many milliseconds (statement_timeout, lock_timeout), so a stuck
# database cannot hold a web worker; see contexts/api/after_response.py.
AFTER_RESPONSE_TIMEOUT_MS = env("CONTEXTS_AFTER_RESPONSE_TIMEOUT_MS")

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
        conn_max_age=env("DB_CONN_MAX_AGE"),
        conn_health_checks=True,
    )
}
# Statements run through accounts.sql.prepared_cursor() are prepared on first use (psycopg's
# threshold; Django's own cursors inline parameters and are never prepared). None: never.
DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
    0 if env("CONTEXTS_DB_PREPARED_STATEMENTS") else None)
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
LOGIN_FAILURE_LIMIT = env("CONTEXTS_LOGIN_FAILURE_LIMIT")
LOGIN_FAILURE_WINDOW_SECONDS = env("CONTEXTS_LOGIN_FAILURE_WINDOW_SECONDS")
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "console:login"

# --- Single sign-on (OpenID Connect; docs/operations.md "Single sign-on", ADR 0019) ----------
# On when a discovery URL (or an issuer, whose discovery document is at the standard path) and
# a client id are set. The client secret may come from a file (OIDC_CLIENT_SECRET_FILE).
OIDC_ISSUER = env("OIDC_ISSUER").rstrip("/")
OIDC_DISCOVERY_URL = env("OIDC_DISCOVERY_URL") or (
    f"{OIDC_ISSUER}/.well-known/openid-configuration" if OIDC_ISSUER else "")
OIDC_CLIENT_ID = env("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env("OIDC_CLIENT_SECRET")
OIDC_SCOPES = env("OIDC_SCOPES")
# Extra parameters of the authorization request, as a query string (Google issues a refresh
# token only with "access_type=offline&prompt=consent").
OIDC_AUTHORIZE_PARAMS = env("OIDC_AUTHORIZE_PARAMS")
OIDC_ENABLED = bool(OIDC_DISCOVERY_URL and OIDC_CLIENT_ID)
# Only these e-mail domains may sign in (empty: any the provider vouches for).
OIDC_ALLOWED_DOMAINS = [d.lower().lstrip("@") for d in env("OIDC_ALLOWED_DOMAINS")]
# The claim that lists the person's groups, and the mapping of groups to roles (JSON, or a
# file of it): {"group": [{"org": "acme", "role": "tech_lead"},
#                         {"org": "acme", "repo": "payments", "role": "curator"}], …}.
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM")
OIDC_GROUP_MAPPING = env("OIDC_GROUP_MAPPING")
# Every signed-in person is asked of the provider again (refresh token, then userinfo) after
# this many seconds: a removal there takes effect here within it, without a new login.
OIDC_RECHECK_SECONDS = env("OIDC_RECHECK_SECONDS")
# How often beat looks for people due: each is asked one tick before their interval ends, so
# the interval is the longest a removal at the provider goes unnoticed.
OIDC_RECHECK_TICK_SECONDS = max(30, OIDC_RECHECK_SECONDS // 4)
# Seconds to wait for the provider on each call.
OIDC_TIMEOUT_SECONDS = env("OIDC_TIMEOUT_SECONDS")
OIDC_BUTTON_LABEL = env("OIDC_BUTTON_LABEL")
# The username/password form (off: single sign-on only, but for the operator's staff and
# superuser accounts, which sign in with their password at /login/?operator).
LOCAL_LOGIN_ENABLED = env("CONTEXTS_LOCAL_LOGIN")
if not LOCAL_LOGIN_ENABLED and not OIDC_ENABLED:
    env.error("CONTEXTS_LOCAL_LOGIN", "off (0) needs single sign-on: set OIDC_DISCOVERY_URL (or "
                                      "OIDC_ISSUER) and OIDC_CLIENT_ID")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("STATIC_ROOT") or VAR_DIR / "staticfiles")
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
        "BACKEND": env("CONTEXTS_UPLOAD_STORAGE"),
        "OPTIONS": dict(env("CONTEXTS_UPLOAD_STORAGE_OPTIONS")),
    },
}
# Uploads of a job not finished this long after it was created are deleted by the hourly sweep
# (a finished job's are deleted when it finishes).
UPLOAD_RETENTION_HOURS = env("CONTEXTS_UPLOAD_RETENTION_HOURS")
MEDIA_ROOT = Path(env("MEDIA_ROOT") or VAR_DIR / "media")
# Organization export and import (docs/export-format.md): exports per caller per hour over the
# API, and what an import reads at most — the archive, one member and all members uncompressed.
EXPORT_RATE = env("CONTEXTS_THROTTLE_EXPORT")
IMPORT_MAX_BYTES = env("CONTEXTS_IMPORT_MAX_BYTES")
IMPORT_MAX_MEMBER_BYTES = env("CONTEXTS_IMPORT_MAX_MEMBER_BYTES")
IMPORT_MAX_TOTAL_BYTES = env("CONTEXTS_IMPORT_MAX_TOTAL_BYTES")

# --- Security (production values come from the environment) -----------------------------------
# Reverse proxies (addresses or CIDR networks) whose X-Forwarded-For names the client. Empty:
# nobody's — the client is the TCP peer, whatever headers it sends
# (contexts/kernel/client_address.py).
TRUSTED_PROXIES = env("CONTEXTS_TRUSTED_PROXIES")
# Who may read /metrics and /healthz's details besides superusers and the metrics token
# (contexts/web/restricted.py): client addresses or CIDR networks. Empty: nobody by address.
METRICS_ALLOW = env("CONTEXTS_METRICS_ALLOW")
METRICS_TOKEN = env("CONTEXTS_METRICS_TOKEN")
SECURE_SSL_REDIRECT = env("SECURE_SSL_REDIRECT")
SESSION_COOKIE_SECURE = env("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = env("CSRF_COOKIE_SECURE")
SECURE_HSTS_SECONDS = env("SECURE_HSTS_SECONDS")
SECURE_HSTS_INCLUDE_SUBDOMAINS = env("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env("SECURE_HSTS_PRELOAD")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Sent by contexts.web.csp.ContentSecurityPolicyMiddleware; see there why styles may be inline.
CONTENT_SECURITY_POLICY = env("CONTENT_SECURITY_POLICY")
if env("USE_X_FORWARDED_PROTO"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Email --------------------------------------------------------------------------------------
# Without a mail server (`make run`), each message is kept whole in a file under var/mail/ (0600)
# and the log says only where: e-mails carry set-password and nudge links, which logs never hold
# (contexts/kernel/mail.py). Production sets the SMTP backend (docs/operations.md, "E-mail").
EMAIL_BACKEND = env("EMAIL_BACKEND")
EMAIL_FILE_PATH = Path(env("EMAIL_FILE_PATH") or VAR_DIR / "mail")
EMAIL_HOST = env("EMAIL_HOST")
EMAIL_PORT = env("EMAIL_PORT")
EMAIL_HOST_USER = env("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env("EMAIL_USE_TLS")
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL")
# Absolute links in e-mails (nudges: what sends them is a beat tick, not a browser's request).
# Without CONTEXTS_BASE_URL, the address `make run` serves (runstack binds HOST:PORT, and
# passes the address on to its children and to var/run-settings.json).
BASE_URL = (env("CONTEXTS_BASE_URL") or served_url(env("HOST"), env("PORT"))).rstrip("/")

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
    "DEFAULT_THROTTLE_RATES": {"agent": env("CONTEXTS_THROTTLE_AGENT")},
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
    "visibility_timeout": env("CELERY_VISIBILITY_TIMEOUT"),
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
JOB_HEARTBEAT_SECONDS = env("CONTEXTS_JOB_HEARTBEAT_SECONDS")
JOB_LEASE_SECONDS = env("CONTEXTS_JOB_LEASE_SECONDS")
JOB_QUEUED_LEASE_SECONDS = env("CONTEXTS_JOB_QUEUED_LEASE_SECONDS")
JOB_MAX_ATTEMPTS = env("CONTEXTS_JOB_MAX_ATTEMPTS")
# How long, in all, a running ingestion job waits out transient database errors (PostgreSQL
# restarted, the connection lost) before it fails: it closes the broken connection, retries
# with a doubling pause (0.5 s up to 10 s) and resumes where it stopped (contexts/services/
# db_retry.py; docs/operations.md, "PostgreSQL restarted or unreachable").
JOB_DATABASE_RETRY_SECONDS = env("CONTEXTS_JOB_DATABASE_RETRY_SECONDS")
CELERY_BEAT_SCHEDULE = {
    "jobs-reap-stale": {"task": "contexts.tasks.reap_stale_jobs",
                        "schedule": float(env("CONTEXTS_JOB_REAP_SECONDS"))},
}

# --- Models and retrieval ----------------------------------------------------------------------
# Nothing is downloaded at run time: models come from paths or packages, and the hub is offline
# wherever one is loaded (contexts/embedding/embedder.py, offline()).
EMBEDDING_MODELS = {
    "prose": env("CONTEXTS_PROSE_MODEL"),
    "code": env("CONTEXTS_CODE_MODEL"),
}
RETRIEVAL = {
    # Fusion of the legs: "adaptive" (convex, with the legs' weights chosen per query by the
    # model in contexts/retrieval/fusion_model.json, fitted with `manage.py tune_fusion --fit`
    # on train/dev splits; ADR 0011), "convex" (weighted min-max normalised scores with the
    # fixed weights below) or "rrf" (Reciprocal Rank Fusion with constant rrf_k). See
    # docs/retrieval-quality.md.
    "fusion": env("CONTEXTS_FUSION"),
    "rrf_k": env("CONTEXTS_RRF_K"),
    "leg_weights": {"lexical": env("CONTEXTS_RRF_LEXICAL_WEIGHT"),
                    "dense": env("CONTEXTS_RRF_DENSE_WEIGHT")},
    # Per-namespace overrides of leg_weights.
    "namespace_leg_weights": {
        "code": {"lexical": env("CONTEXTS_RRF_CODE_LEXICAL_WEIGHT"),
                 "dense": env("CONTEXTS_RRF_CODE_DENSE_WEIGHT")},
    },
    # Weights of the lexical query's clauses (contexts/search/_backend.py): "text" is plain BM25
    # over title+body (one field, as bm25s scores it; no per-corpus field boosts), the others
    # only fire for identifier-like tokens and pasted-message phrases. See
    # docs/retrieval-quality.md ("Lexical leg vs bm25s").
    "lexical_field_boosts": {
        "text": 1.0,
        "identifiers": env("CONTEXTS_BM25_IDENTIFIER_BOOST"),
        "symbols": env("CONTEXTS_BM25_SYMBOL_BOOST"),
        "paths": env("CONTEXTS_BM25_PATH_BOOST"),
        "phrases": env("CONTEXTS_BM25_PHRASE_BOOST"),
        "messages": env("CONTEXTS_BM25_MESSAGE_BOOST"),
    },
    # Where the query's forward pass runs: "process" (a child per web process, in parallel
    # with the request's own work) or "thread". See contexts/retrieval/query_encoder.py.
    "query_encoder": env("CONTEXTS_QUERY_ENCODER"),
    # Concurrent queries are encoded in one forward pass (contexts/retrieval/batching.py): up to
    # encoder_max_batch of them, collected for at most encoder_batch_wait_ms — and only while
    # the encoder is busy, so a query that arrives alone never waits.
    "encoder_max_batch": env("CONTEXTS_ENCODER_MAX_BATCH"),
    "encoder_batch_wait_ms": env("CONTEXTS_ENCODER_BATCH_WAIT_MS"),
    # Query vectors kept per node in Redis (contexts/retrieval/vector_cache.py): slots of a
    # direct-mapped cache, ~1.6 KB each for a 384-dimensional model; 0 switches it off.
    "query_vector_cache_slots": env("CONTEXTS_QUERY_VECTOR_CACHE_SLOTS"),
    "reranker": env("CONTEXTS_RERANKER"),          # none | cross-encoder
    "cross_encoder": env("CONTEXTS_CROSS_ENCODER"),    # local path or cached model id
    "max_query_chars": env("CONTEXTS_MAX_QUERY_CHARS"),
    "max_k": env("CONTEXTS_MAX_K"),
    "max_budget_tokens": env("CONTEXTS_MAX_BUDGET_TOKENS"),
}
# Candidates an HNSW search keeps (pgvector's hnsw.ef_search, default 40): at least the dense
# leg's depth, so that its top 100 is what an exact search would return (docs/retrieval-quality.md).
HNSW_EF_SEARCH = env("CONTEXTS_HNSW_EF_SEARCH")
# How embeddings are stored and searched: "vector" (float32) or "halfvec" (float16, half the
# memory and disk; docs/performance.md has both measured). Changing it needs
# `manage.py vector_storage` (contexts/management/commands/vector_storage.py).
EMBEDDING_STORAGE = env("CONTEXTS_EMBEDDING_STORAGE")
# Defaults when neither the request nor the persona says otherwise.
DEFAULT_WEIGHTS = {"w_r": 0.7, "w_f": 0.15, "w_c": 0.1, "w_p": 0.05}
FRESHNESS_HALFLIFE_DAYS = {"policy": 365.0, "default": 90.0}
LEXICAL_INDEX_DIR = Path(env("CONTEXTS_INDEX_DIR") or VAR_DIR / "index")
# Every node that serves retrieval keeps its own lexical index and follows the change feed
# into it (contexts/indexes/follower.py, ADR 0015); "off" on a node that serves none (a worker
# node).
INDEX_FOLLOWER = env("CONTEXTS_INDEX_FOLLOWER")
# This node's name in the follower table (pruning, /metrics); unique per index directory.
NODE_NAME = env("CONTEXTS_NODE_NAME")
# How often a node's follower looks for changes, and how far behind (seconds) its index may be
# before retrievals say so in `degraded` and /readyz answers 503.
INDEX_FOLLOW_INTERVAL = env("CONTEXTS_INDEX_FOLLOW_INTERVAL")
INDEX_MAX_LAG = env("CONTEXTS_INDEX_MAX_LAG")
# Feed rows are pruned once every follower seen in the last FEED_FOLLOWER_TTL_HOURS has passed
# them, and whatever the followers, after FEED_RETENTION_DAYS (a node further behind rebuilds).
FEED_FOLLOWER_TTL_HOURS = env("CONTEXTS_FEED_FOLLOWER_TTL_HOURS")
FEED_RETENTION_DAYS = env("CONTEXTS_FEED_RETENTION_DAYS")
INGEST_MAX_FILE_BYTES = env("CONTEXTS_INGEST_MAX_FILE_BYTES")
# Directories under which superusers may ingest server paths from the console; empty: nobody
# may (the CLI is unaffected). See contexts/ingestion/server_paths.py.
INGEST_ROOTS = env("CONTEXTS_INGEST_ROOTS")
INGEST_EMBED_BATCH_CHUNKS = env("CONTEXTS_INGEST_BATCH")
# A path job of more files than this runs in the bulk lane, behind other long work; smaller
# ones and uploads in the interactive lane (contexts/ingestion/lanes.py).
INGEST_INTERACTIVE_MAX_FILES = env("CONTEXTS_INGEST_INTERACTIVE_MAX_FILES")
# A queued job or sync whose repository another run is ingesting goes back to its queue for
# this many seconds instead of holding its worker (contexts/tasks.py).
INGEST_BUSY_RETRY_SECONDS = env("CONTEXTS_INGEST_BUSY_RETRY_SECONDS")
# Git sources (docs/sources.md): how long one git fetch, log or read may take, and how often
# beat looks for sources whose next sync is due.
SOURCE_GIT_TIMEOUT_SECONDS = env("CONTEXTS_SOURCE_GIT_TIMEOUT_SECONDS")
SOURCE_POLL_SECONDS = env("CONTEXTS_SOURCE_POLL_SECONDS")
# A documentation export uploaded as a zip (contexts/ingestion/archives.py) is refused, before
# anything is written, past these bounds: the upload itself and its members together
# uncompressed at most ARCHIVE_MAX_BYTES, at most ARCHIVE_MAX_FILES members, and no member over
# 64 KiB (nor the whole over 1 MiB) expanding more than ARCHIVE_MAX_RATIO times its compressed
# size — text compresses 3-20x; a zip bomb a thousand times and more.
ARCHIVE_MAX_BYTES = env("CONTEXTS_ARCHIVE_MAX_BYTES")
ARCHIVE_MAX_FILES = env("CONTEXTS_ARCHIVE_MAX_FILES")
ARCHIVE_MAX_RATIO = env("CONTEXTS_ARCHIVE_MAX_RATIO")
# What a write with a detected secret becomes (contexts/services/secrets.py, ADR 0016):
# "redact" stores it with the secret replaced by a typed placeholder, "refuse" does not store it.
SECRET_POLICY = env("CONTEXTS_SECRET_POLICY")

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
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL")},
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
GOVERNANCE_HOT_MIN_USES = {"default": env("CONTEXTS_STALE_HOT_MIN_USES")}
GOVERNANCE_HOT_WINDOW_DAYS = env("CONTEXTS_STALE_HOT_WINDOW_DAYS")
# Verify-by intervals per kind (issue 38): a fragment a person vouches for (written or edited by
# one, or verified before) is asked about again — a verify_due nudge from the staleness scan —
# once this many days passed since it was last verified or edited. Policies sooner than ADRs.
GOVERNANCE_VERIFY_AFTER_DAYS = {
    "policy": env("CONTEXTS_VERIFY_DAYS_POLICY"),
    "runbook": env("CONTEXTS_VERIFY_DAYS_RUNBOOK"),
    "adr": env("CONTEXTS_VERIFY_DAYS_ADR"),
    "default": env("CONTEXTS_VERIFY_DAYS_DEFAULT"),
}
# (c) "probably contradicted by a newer fragment of its lineage" (docs/governance.md).
GOVERNANCE_CONTRADICTION_MIN_OVERLAP = 0.5  # sentence alignment: Jaccard of content words
# Nudges: unanswered for this long → escalated to the organization's tech leads and admins.
GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS = env("CONTEXTS_NUDGE_ESCALATE_AFTER_DAYS")
GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS = env("CONTEXTS_NUDGE_LINK_MAX_AGE_DAYS")
# Dedup review: proposals, never automatic merges (ingestion collapses distance ≤ 3 itself).
GOVERNANCE_DEDUP_MIN_HAMMING = 0
GOVERNANCE_DEDUP_MAX_HAMMING = 8
GOVERNANCE_DEDUP_MIN_COSINE = 0.9
GOVERNANCE_NEIGHBOURS = 10  # nearest neighbours examined per fragment in the vector searches
# Agents open sessions by naming a new session_id in a write (docs/api.md "Sessions"): at most
# this many open sessions per token, and a session an agent opened expires after this many
# minutes without a write (each write moves its expiry on).
CONTEXTS_SESSIONS_PER_TOKEN = env("CONTEXTS_SESSIONS_PER_TOKEN")
CONTEXTS_SESSION_IDLE_MINUTES = env("CONTEXTS_SESSION_IDLE_MINUTES")
# Open proposals one token may have waiting for review: a looping agent cannot flood the queue.
CONTEXTS_PROPOSALS_PER_TOKEN = env("CONTEXTS_PROPOSALS_PER_TOKEN")
# Authority: PageRank over the citation graph.
GOVERNANCE_PAGERANK_DAMPING = 0.85
# Re-embedding on a model upgrade.
EMBEDDING_SHADOW_DAYS = env("CONTEXTS_EMBEDDING_SHADOW_DAYS")
GOVERNANCE_REEMBED_BATCH = env("CONTEXTS_REEMBED_BATCH")
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
                             "schedule": float(env("CONTEXTS_USAGE_FLUSH_SECONDS"))},
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
TRACE_RETENTION_DAYS = env("CONTEXTS_TRACE_RETENTION_DAYS")
# --- end Governance ----------------------------------------------------------------------------

# Every invalid value found above, and in the settings only other processes read (make run's),
# as "NAME: why": the start-up check reports them all (contexts/config/checks.py).
CONFIGURATION_ERRORS = tuple(env.read_all())
