"""Redis: the cache, the throttle, the use counters and Celery's broker."""

from contexts.config.schema import INT, TEXT, Area, Setting

AREA = Area("Redis", "The cache, the throttle, the use counters and Celery's broker: embedded "
            "on this machine unless REDIS_URL names another.", (
    Setting("REDIS_URL", TEXT, "",
            "An external Redis (a `redis://` URL with its password); set, no Redis is embedded.",
            secret=True, shown_default="the embedded Redis on "
                                       "`127.0.0.1:$CONTEXTS_REDIS_PORT`, with its password"),
    Setting("CONTEXTS_REDIS_PORT", INT, 63799,
            "Port of the embedded Redis on 127.0.0.1.", minimum=1),
))
