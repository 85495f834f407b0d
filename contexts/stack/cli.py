"""``manage.py``: Django's command line, with the settings ``make run`` recorded, a start-up that
refuses a configuration with mistakes in it, and a one-line answer when the database cannot be
reached.

Before Django loads the settings, the variables ``runstack`` recorded in ``var/run-settings.json``
fill in what the environment does not set (``contexts.stack.runsettings``), and the secrets of a
one-machine run are generated into the var directory if missing
(``contexts.kernel.local_secrets``). Every command but ``check`` (which lists them itself, as
system check errors) then refuses to run while a setting is invalid, listing them all
(``contexts.config.checks``). A command that then cannot connect to its database says so in
one line on stderr, naming the settings to check, and exits with status 1 — instead of an
80-line traceback. Only a failure to *connect* is answered so: any other error, a failed query
included, keeps its traceback, as does any error under ``--traceback``.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator, Sequence

from contexts.kernel import local_secrets
from contexts.stack import runsettings

# Frames that only run while a connection is being opened (Django's ensure_connection and its
# backend's get_new_connection, psycopg's Connection.connect); an error raised below one of
# them is a failure to reach the database, not of a statement.
CONNECTING = frozenset({"ensure_connection", "get_new_connection", "connect"})
EXIT_UNREACHABLE = 1
# Commands that run on an invalid configuration: `check` reports it (as system check errors),
# `settings_reference` describes the settings, help and version need none.
RUN_ON_INVALID_CONFIGURATION = frozenset({"check", "settings_reference", "help", "version", ""})


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")
    # runstack writes the file and takes its settings from its environment alone: a plain
    # `make run` after `make run CONTEXTS_PG_PORT=…` is back on the defaults.
    filled = {} if _command(argv) == "runstack" else runsettings.apply_defaults(os.environ)
    local_secrets.prepare(os.environ)
    if _command(argv) not in RUN_ON_INVALID_CONFIGURATION and "--help" not in argv:
        from contexts.config.checks import refuse_to_start

        refuse_to_start(f"manage.py {_command(argv)}")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except Exception as exc:
        if "--traceback" in argv or not unreachable(exc):
            raise
        sys.stderr.write(unreachable_message(_command(argv), exc, filled) + "\n")
        sys.exit(EXIT_UNREACHABLE)


def _command(argv: Sequence[str]) -> str:
    return next((arg for arg in argv[1:] if not arg.startswith("-")), "")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _connection_error(exc: BaseException) -> BaseException | None:
    """psycopg's OperationalError behind ``exc`` when it was raised while connecting."""
    import psycopg

    for error in _chain(exc):
        if isinstance(error, psycopg.OperationalError):
            frames = {frame.name for frame in traceback.extract_tb(error.__traceback__)}
            return error if frames & CONNECTING else None
    return None


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to connect to PostgreSQL (refused, timed out, unknown host,
    password or database rejected) rather than an error of a command or a statement."""
    return _connection_error(exc) is not None


def unreachable_message(command: str, exc: BaseException, filled: dict[str, str]) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    where = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db.get('NAME')}"
    reason = _reason(_connection_error(exc))
    if not settings.USE_EMBEDDED_POSTGRES:
        check = "check DATABASE_URL"
    else:
        recorded = (f"; {', '.join(sorted(filled))} from {runsettings.path()}" if filled
                    else "")
        check = (f"check CONTEXTS_PG_PORT ({settings.EMBEDDED_PG_PORT}) and CONTEXTS_VAR_DIR "
                 f"({settings.VAR_DIR}){recorded} — or DATABASE_URL for another PostgreSQL — "
                 "and whether the embedded services run: manage.py services status")
    return f"manage.py {command}: cannot reach the database at {where} ({reason}); {check}"


def _reason(error: BaseException | None) -> str:
    """The server's or the driver's own words, on one line: 'Connection refused', 'password
    authentication failed for user …', 'database "x" does not exist'."""
    if error is None:
        return "connection failed"
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return first.rsplit(" failed: ", 1)[-1].removeprefix("FATAL:").strip()
