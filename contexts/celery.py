"""The Celery application; configuration comes from Django settings (``CELERY_*``).

A worker's or beat's start: just before the configuration is first read, the secrets of a
one-machine run are generated if missing (``contexts.kernel.local_secrets``); once it is read, an
invalid setting stops the process with the list of them all. Not at import: this module is
imported with the ``contexts`` package, and so whenever the settings are.
"""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from contexts.kernel import local_secrets
from contexts.kernel.logfilters import redact_every_handler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")

app = Celery("contexts")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect
def _prepare_local_secrets(**kwargs: object) -> None:
    local_secrets.prepare()


@app.on_after_configure.connect
def _refuse_an_invalid_configuration(**kwargs: object) -> None:
    from contexts.config.checks import refuse_to_start

    refuse_to_start("celery")


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_credentials(**kwargs: object) -> None:
    """The worker's and beat's own log handlers redact credentials as Django's do."""
    redact_every_handler()


@app.task(name="contexts.ping")
def ping() -> str:
    """A round trip through the broker and a worker; used by health checks and tests."""
    return "pong"
