"""`make run` (``manage.py runstack``): what it serves and how many processes it starts."""

from contexts.config.schema import INT, TEXT, Area, Setting

AREA = Area("make run", "Read by `manage.py runstack`, which `make run` calls.", (
    Setting("HOST", TEXT, "127.0.0.1",
            "Address the web server binds to (`0.0.0.0`: every interface)."),
    Setting("PORT", INT, 8000, "Port of the web server.", minimum=1),
    Setting("WEB_CONCURRENCY", INT, 2, "Web processes (gunicorn workers).", minimum=1),
    Setting("CELERY_CONCURRENCY", INT, 1, "Processes of the Celery worker.", minimum=1),
    Setting("CONTEXTS_RUN_SETTINGS", TEXT, "",
            "The file in which `make run` records its ports, var directory and address for "
            "`manage.py` commands in other shells; `off` for none.",
            shown_default="`var/run-settings.json` of the checkout"),
))
