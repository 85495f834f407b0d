"""Configuration with a schema: every environment variable the product reads, declared once.

Each area of the product declares its settings in a module of this package (``core``,
``database``, ``web`` …): the variable, its type, its default and one sentence on what it does.
``contexts/settings.py`` reads them through :func:`environment`, which collects every invalid
value instead of raising; the start-up check (``contexts.config.checks``) reports them all, and
``manage.py settings_reference`` prints the reference, ``docs/configuration.md``.

Reading the configuration has no side effects: no file is written and no environment variable
set. The secrets a one-machine run generates are made by the process entry points
(``contexts.kernel.local_secrets``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from contexts.config import (
    cache,
    core,
    database,
    governance,
    indexes,
    ingestion,
    jobs,
    mail,
    retrieval,
    run,
    security,
    sso,
    web,
)
from contexts.config.schema import Area, Environment, Setting

__all__ = ["AREAS", "CHECKOUT", "Area", "Environment", "Setting", "environment", "var_dir"]

# The reference lists the areas in this order.
AREAS: tuple[Area, ...] = (
    core.AREA, database.AREA, cache.AREA, run.AREA, web.AREA, security.AREA, sso.AREA,
    mail.AREA, retrieval.AREA, indexes.AREA, ingestion.AREA, jobs.AREA, governance.AREA,
)
# The checkout (or the installed tree): where `var/` is by default.
CHECKOUT = Path(__file__).resolve().parents[2]


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """A reader of the declared settings from ``environ`` (default: this process's)."""
    return Environment(os.environ if environ is None else environ, AREAS)


def var_dir(env: Environment) -> Path:
    """``CONTEXTS_VAR_DIR``, or ``var/`` of the checkout: the settings and the entry points that
    generate its secrets agree on it."""
    return Path(env("CONTEXTS_VAR_DIR") or CHECKOUT / "var").resolve()
