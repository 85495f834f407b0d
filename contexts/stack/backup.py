"""Backup and restore of the one store that matters: PostgreSQL.

Everything else is derived and rebuilt from it (the tantivy index by ``rebuild_index``), so a
backup is a ``pg_dump`` and a restore is a ``pg_restore`` followed by an index rebuild.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import connection

from contexts.stack.owner_db import owner_settings
from contexts.stack.servers import postgres_bin_dir


class BackupError(RuntimeError):
    pass


def pg_tool(name: str) -> str:
    """``pg_dump`` / ``pg_restore``: the embedded server's own build when none is on PATH (its
    version always matches the embedded server's)."""
    embedded = postgres_bin_dir() / name
    if embedded.exists():
        return str(embedded)
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found: install the PostgreSQL client tools")
    return found


def _connection_args() -> tuple[list[str], dict[str, str]]:
    # As the schema's owner: pg_restore creates tables, and pg_dump must read every row of the
    # tables with row-level security, which the application's role does only through policies.
    db = owner_settings()
    args = ["--host", str(db.get("HOST") or "127.0.0.1"), "--port", str(db.get("PORT") or 5432),
            "--username", str(db.get("USER") or "postgres"), "--dbname", str(db["NAME"])]
    env = {**os.environ}
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = str(db["PASSWORD"])  # not on the command line, where ps shows it
    return args, env


def _run(command: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode:
        raise BackupError(f"{Path(command[0]).name} failed:\n{result.stderr.strip()[-2000:]}")


def backup(target: Path) -> Path:
    """A consistent snapshot of the live database (custom format: compressed, selective)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    args, env = _connection_args()
    _run([pg_tool("pg_dump"), "--format=custom", "--file", str(target), *args], env)
    return target


def restore(source: Path) -> None:
    """Restore ``source`` into the configured database, which must be empty."""
    if not source.exists():
        raise BackupError(f"no backup at {source}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('public.contexts_fragment') IS NOT NULL")
        if cursor.fetchone()[0]:
            raise BackupError(f"database {settings.DATABASES['default']['NAME']!r} is not "
                              "empty; restore into a new database")
    connection.close()  # pg_restore needs no competing session holding locks
    args, env = _connection_args()
    with tempfile.TemporaryDirectory() as scratch:
        contents = Path(scratch) / "contents.list"
        contents.write_text(_restorable_contents(source, env))
        _run([pg_tool("pg_restore"), "--no-owner", "--exit-on-error", "--use-list",
              str(contents), *args, str(source)], env)


def _restorable_contents(source: Path, env: dict[str, str]) -> str:
    """The dump's table of contents without comments on extensions: only the extension's owner
    (a superuser) may set one, and the schema's owner, who restores, is not one. The extension
    itself stays (CREATE EXTENSION IF NOT EXISTS: a no-op where it already exists)."""
    listing = subprocess.run([pg_tool("pg_restore"), "--list", str(source)], env=env,
                             capture_output=True, text=True)
    if listing.returncode:
        raise BackupError(f"pg_restore --list failed:\n{listing.stderr.strip()[-2000:]}")
    return "".join(line + "\n" for line in listing.stdout.splitlines()
                   if " COMMENT - EXTENSION " not in line)
