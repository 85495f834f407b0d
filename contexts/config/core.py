"""Core: debug, production mode, the secret key, hosts, the var directory, static files, logs."""

from contexts.config.schema import BOOL, LIST, PATH, TEXT, Area, Setting, choice

AREA = Area("Core", "What every process needs: its mode, its secret key, where its state lives.", (
    Setting("DEBUG", BOOL, False,
            "Django's debug mode (tracebacks in pages); never on in production."),
    Setting("CONTEXTS_PRODUCTION", BOOL, False,
            "On (docker/compose.yaml sets it), the start is refused without a real SECRET_KEY, "
            "with a `change-me` placeholder password, or with DEBUG on."),
    Setting("SECRET_KEY", TEXT, "",
            "Django's secret key, which signs sessions and the links in e-mails; set it (or "
            "SECRET_KEY_FILE) in production.",
            secret=True, shown_default="random, generated once into "
                                       "`$CONTEXTS_VAR_DIR/secret_key` (0600) at start"),
    Setting("ALLOWED_HOSTS", LIST, ["localhost", "127.0.0.1", "[::1]", "testserver"],
            "Host names this server answers to, comma-separated."),
    Setting("CSRF_TRUSTED_ORIGINS", LIST, [],
            "Further origins trusted for forms, comma-separated (e.g. "
            "`https://contexts.example.com` behind a TLS proxy)."),
    Setting("CONTEXTS_VAR_DIR", PATH, None,
            "Local state: the embedded servers' data, lexical indexes, the generated secret key "
            "and service passwords (`secrets/`, 0600), e-mails kept as files.",
            shown_default="`var/` of the checkout"),
    Setting("STATIC_ROOT", PATH, None,
            "Where `collectstatic` puts the static files the web server serves.",
            shown_default="`$CONTEXTS_VAR_DIR/staticfiles`"),
    Setting("MEDIA_ROOT", PATH, None,
            "Directory of Django's default file storage (uploads waiting for a job are in "
            "CONTEXTS_UPLOAD_STORAGE instead).",
            shown_default="`$CONTEXTS_VAR_DIR/media`"),
    Setting("LOG_LEVEL", choice("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "INFO",
            "Level of the root logger; every line goes to stderr, credentials redacted."),
))
