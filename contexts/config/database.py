"""PostgreSQL: embedded by default, or external."""

from contexts.config.schema import BOOL, INT, TEXT, Area, Setting

AREA = Area("Database", "PostgreSQL with pgvector: embedded on this machine unless "
            "DATABASE_URL names another.", (
    Setting("DATABASE_URL", TEXT, "",
            "An external PostgreSQL (a `postgres://` URL with role, password, host and database), "
            "whose role should be the unprivileged application role; set, no PostgreSQL is "
            "embedded.",
            secret=True, shown_default="the embedded PostgreSQL on "
                                       "`127.0.0.1:$CONTEXTS_PG_PORT` as `contexts_app`"),
    Setting("DATABASE_OWNER_URL", TEXT, "",
            "The schema's owner, as whom `migrate`, `backup` and `restore` connect.",
            secret=True, shown_default="embedded: `contexts_owner`; else DATABASE_URL's role"),
    Setting("CONTEXTS_PG_PORT", INT, 54329,
            "Port of the embedded PostgreSQL on 127.0.0.1.", minimum=1),
    Setting("DB_CONN_MAX_AGE", INT, 60,
            "Seconds a database connection stays open for the next request (0: one per "
            "request).", minimum=0),
    Setting("CONTEXTS_DB_PREPARED_STATEMENTS", BOOL, True,
            "Statements run through `accounts.sql.prepared_cursor()` are prepared on first use; "
            "off, never."),
))
