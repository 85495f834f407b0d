"""The Celery application; configuration comes from Django settings (``CELERY_*``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")

app = Celery("contexts")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name="contexts.ping")
def ping() -> str:
    """A round trip through the broker and a worker; used by health checks and tests."""
    return "pong"
