"""Security: proxies, who may read metrics, HTTPS, headers, login limits, secrets in texts."""

from contexts.config.schema import (
    BOOL,
    INT,
    NETWORKS,
    TEXT,
    Area,
    Setting,
    choice,
)

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:", "font-src 'self' data:", "connect-src 'self'",
    "object-src 'none'", "base-uri 'self'", "form-action 'self'", "frame-ancestors 'none'",
])

AREA = Area("Security", "Production values come from here (`docs/operations.md`, *Security "
            "settings*).", (
    Setting("CONTEXTS_TRUSTED_PROXIES", NETWORKS, [],
            "Reverse proxies (addresses or CIDR networks, comma-separated) whose "
            "X-Forwarded-For names the client; empty, the client is the TCP peer."),
    Setting("CONTEXTS_METRICS_ALLOW", NETWORKS, [],
            "Client addresses or networks that may read /metrics and /healthz's details "
            "besides superusers and the metrics token."),
    Setting("CONTEXTS_METRICS_TOKEN", TEXT, "",
            "Bearer token with which a scraper reads /metrics.", secret=True),
    Setting("SECURE_SSL_REDIRECT", BOOL, False, "Redirect plain HTTP to HTTPS."),
    Setting("SESSION_COOKIE_SECURE", BOOL, False, "Send the session cookie over HTTPS only."),
    Setting("CSRF_COOKIE_SECURE", BOOL, False, "Send the CSRF cookie over HTTPS only."),
    Setting("SECURE_HSTS_SECONDS", INT, 0,
            "Strict-Transport-Security max-age in seconds (0: no header).", minimum=0),
    Setting("SECURE_HSTS_INCLUDE_SUBDOMAINS", BOOL, False,
            "Strict-Transport-Security covers subdomains."),
    Setting("SECURE_HSTS_PRELOAD", BOOL, False, "Strict-Transport-Security asks for preload."),
    Setting("USE_X_FORWARDED_PROTO", BOOL, False,
            "Trust X-Forwarded-Proto: https from the TLS-terminating proxy in front."),
    Setting("CONTENT_SECURITY_POLICY", TEXT, CONTENT_SECURITY_POLICY,
            "The Content-Security-Policy of every response, `/mcp` included."),
    Setting("CONTEXTS_LOGIN_FAILURE_LIMIT", INT, 10,
            "Failed console logins per address and username within the window; then 429."),
    Setting("CONTEXTS_LOGIN_FAILURE_WINDOW_SECONDS", INT, 300,
            "The window of CONTEXTS_LOGIN_FAILURE_LIMIT, in seconds."),
    Setting("CONTEXTS_SECRET_POLICY", choice("redact", "refuse", normalise=True), "redact",
            "What a write with a detected secret becomes: stored with the secret replaced by a "
            "typed placeholder (`redact`), or not stored (`refuse`)."),
))
