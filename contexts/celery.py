"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

from contexts.kernel.logfilters import redact_every_handler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")

app = Celery("contexts")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_credentials(**kwargs: object) -> None:
    """The worker's and beat's own log handlers redact credentials as Django's do."""
    redact_every_handler()


@app.task(name="contexts.ping")
def ping() -> str:
    """A round trip through the broker and a worker; used by health checks and tests."""
    return "pong"
