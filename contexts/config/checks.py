"""The one start-up check of the configuration.

``contexts/settings.py`` records every invalid value as ``CONFIGURATION_ERRORS`` (``"NAME:
why"``) rather than raising at import. :func:`configuration`, a system check, reports each, so
``manage.py check`` lists them all and every command that runs the checks refuses to run.
:func:`refuse_to_start` is what the process entry points call (``manage.py`` before any command,
the web application, Celery), so that nothing starts on a configuration with a mistake in it.
"""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.checks import Error, register

TAG = "configuration"
CHECK_ID = "contexts.E001"
HINT = "docs/configuration.md describes every setting"


def errors() -> list[str]:
    return list(getattr(settings, "CONFIGURATION_ERRORS", ()))


@register(TAG)
def configuration(app_configs=None, **kwargs) -> list[Error]:
    """Every invalid setting, naming its environment variable and why."""
    return [Error(message, hint=HINT, id=CHECK_ID) for message in errors()]


def report(what: str, found: list[str]) -> str:
    lines = "\n".join(f"  {message}" for message in found)
    noun = "error" if len(found) == 1 else "errors"
    return f"{what}: the configuration has {len(found)} {noun}:\n{lines}\n({HINT})"


def refuse_to_start(what: str, exit_status: int = 1) -> None:
    """Stop ``what`` with the list of errors on stderr, without a traceback, if any setting is
    invalid. A SystemExit: Celery's signal dispatch swallows exceptions but not this, and
    gunicorn halts (rather than booting the worker again and again) on its exit status 3."""
    found = errors()
    if found:
        sys.stderr.write(report(what, found) + "\n")
        sys.stderr.flush()
        raise SystemExit(exit_status)
