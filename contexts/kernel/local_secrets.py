"""The secrets a one-machine run keeps in its var directory, and the start-up that makes them.

Without ``SECRET_KEY`` (and outside production), Django's key is a random one kept in
``var/secret_key``; the embedded PostgreSQL's and Redis's passwords are random ones kept in
``var/secrets/`` (``<name>.password``). Each is generated once, 0600, and reused, so sessions and
signed links survive restarts and every process of a stack agrees on them.

Reading the settings never writes them (``contexts/settings.py`` only reads what is there): the
process entry points call :func:`prepare` first — ``manage.py`` (``contexts.stack.cli``, and
so ``make run``), the web application (``contexts.asgi``, ``contexts.wsgi``, gunicorn's worker
class) and Celery (``contexts.celery``, when its configuration is first read).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from contexts import config

SECRETS_DIR = "secrets"  # under the var dir: one ``<name>.password`` file per credential
SECRET_KEY_FILE = "secret_key"  # Django's key, under the var dir


def local_secret(path: Path, generate: Callable[[], str] | None = None, *,
                 private_dir: bool = True) -> str:
    """A random secret generated once into ``path`` (0600; its directory 0700 when
    ``private_dir``) and reused.

    Written beside and then hard-linked into place: two processes starting at once never read
    half a file, and the first one's secret wins."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if private_dir:
            path.parent.chmod(0o700)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            # URL-safe by default: a password goes into service URLs as is.
            file.write(generate() if generate else secrets.token_urlsafe(32))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


def secret_path(var_dir: Path, name: str) -> Path:
    """Where the embedded services' password ``name`` is kept."""
    return Path(var_dir) / SECRETS_DIR / f"{name}.password"


def embedded_secret(var_dir: Path, name: str) -> str:
    """The password ``name`` of the embedded services under ``var_dir``, generated if new."""
    return local_secret(secret_path(var_dir, name))


def read(path: Path) -> str:
    """A secret kept in ``path``, or empty when there is none yet (reading writes nothing)."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""


def prepare(environ: Mapping[str, str] | None = None) -> None:
    """Generate the secrets the settings will read from the var directory, those that are
    missing: the secret key unless ``SECRET_KEY`` is set (never in production, where a missing
    key is a configuration error instead), and the passwords of the services that are
    embedded (no ``DATABASE_URL`` / ``REDIS_URL``)."""
    from django.core.management.utils import get_random_secret_key

    env = config.environment(environ)
    var_dir = config.var_dir(env)
    if not env("SECRET_KEY") and not env("CONTEXTS_PRODUCTION"):
        local_secret(var_dir / SECRET_KEY_FILE, get_random_secret_key, private_dir=False)
    if not env("DATABASE_URL"):
        embedded_secret(var_dir, "postgres_app")
        if not env("DATABASE_OWNER_URL"):
            embedded_secret(var_dir, "postgres_owner")
    if not env("REDIS_URL"):
        embedded_secret(var_dir, "redis")
