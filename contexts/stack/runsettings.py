"""What ``make run`` records about itself, so that ``manage.py`` commands find its services.

``runstack`` writes its effective settings — the var directory, the embedded servers' ports, the
address it serves — into ``var/run-settings.json`` of the checkout when it starts. ``manage.py``
(``contexts.stack.cli``) reads them back as defaults for the variables its environment does not set,
before Django loads the settings: ``make run PORT=8001`` with ``CONTEXTS_PG_PORT`` exported in
one shell, then ``manage.py create_token`` in another, reaches the same PostgreSQL.

Precedence, per variable: the environment, then this file, then the defaults in
``contexts/settings.py``. Only ``manage.py`` reads the file — not gunicorn or Celery (runstack
passes them its environment), not the test suite — and ``runstack`` never does: it is the writer,
and its own settings come from its environment alone. ``CONTEXTS_RUN_SETTINGS`` names another
file, or ``off`` for none.

Standard library only: this runs before Django is configured.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, MutableMapping
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
DEFAULT_PATH = BASE_DIR / "var" / "run-settings.json"
# The variables the file may supply. Never a URL or a password: DATABASE_URL and REDIS_URL carry
# credentials, and the embedded servers' passwords are in the var directory already.
RECORDED = ("CONTEXTS_VAR_DIR", "CONTEXTS_INDEX_DIR", "CONTEXTS_PG_PORT", "CONTEXTS_REDIS_PORT",
            "CONTEXTS_BASE_URL")
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000


def path(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The file, or None when ``CONTEXTS_RUN_SETTINGS`` is ``off`` (or empty)."""
    named = environ.get("CONTEXTS_RUN_SETTINGS")
    if named is None:
        return DEFAULT_PATH
    if named.strip().lower() in ("", "off", "none", "0", "false"):
        return None
    return Path(named)


def served_url(host: str | None = None, port: int | str | None = None) -> str:
    """The address ``runstack`` serves at (``--host``/``HOST``, ``--port``/``PORT``), as a link.

    A wildcard bind address is no address to visit: links name the loopback one instead."""
    host = host or DEFAULT_HOST
    if host in ("0.0.0.0", "::", "[::]"):
        host = DEFAULT_HOST
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{port or DEFAULT_PORT}"


def read(file: Path | None) -> dict[str, str]:
    """The recorded variables; empty when there is no file or it cannot be read (a stale or
    half-written file must not stop a command: it only supplies defaults)."""
    if file is None:
        return {}
    try:
        data = json.loads(file.read_text())
        recorded = data["environment"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {name: str(value) for name, value in recorded.items()
            if name in RECORDED and value not in (None, "")}


def apply_defaults(environ: MutableMapping[str, str] = os.environ) -> dict[str, str]:
    """Fill the recorded variables the environment lacks; returns those filled (for messages
    that say where a value came from)."""
    filled = {}
    for name, value in read(path(environ)).items():
        if not environ.get(name):
            environ[name] = value
            filled[name] = value
    return filled


def record(environment: Mapping[str, str], *, address: str, pid: int | None = None,
           environ: Mapping[str, str] = os.environ) -> Path | None:
    """Write the file (atomically: a command starting meanwhile reads the old one or the new
    one); returns its path, or None when recording is off."""
    file = path(environ)
    if file is None:
        return None
    file.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "written_by": "manage.py runstack",
        "pid": pid if pid is not None else os.getpid(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "address": address,
        "environment": {name: str(value) for name, value in environment.items()
                        if name in RECORDED},
    }
    draft = file.with_name(f".{file.name}.{os.getpid()}")
    draft.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(draft, file)
    return file
