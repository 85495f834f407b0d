"""Telling a database outage from a wrong statement, and waiting one out, for long work outside
a request — an ingestion job (``contexts.ingestion.jobs``).

A request that meets a dead connection answers 503 and its caller retries
(``contexts.kernel.availability``). A job has no caller to retry it: a PostgreSQL restart of a few
seconds in the middle of a long ingestion must not fail it for good. So a job that meets a
*transient* error — the connection lost, the server shutting down or starting up — closes its
broken connection, waits with a growing pause until the server answers again, and runs again
(ingestion is idempotent: ADR 0004). A *permanent* error — anything else, a constraint, a
wrong statement, a statement timeout — is not retried. The waiting is bounded
(``JOB_DATABASE_RETRY_SECONDS``), so a database that stays down still ends the job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError, InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

# SQLSTATEs of an outage, not of a statement: class 08 (connection exception), and the
# server going away or not ready — admin_shutdown ("terminating connection due to
# administrator command"), crash_shutdown, cannot_connect_now ("the database system is
# starting up" / "shutting down").
OUTAGE_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
# What psycopg says when the connection itself is gone (no SQLSTATE: the server never
# answered, or hung up).
OUTAGE_WORDS = ("the database system is starting up", "the database system is shutting down",
                "the database system is in recovery mode",
                "terminating connection due to administrator command",
                "server closed the connection unexpectedly", "connection refused",
                "connection already closed", "the connection is closed", "connection is lost",
                "consuming input failed", "could not connect", "connection failed",
                "no connection to the server", "server conn crashed")


def _sqlstate(exc: BaseException) -> str | None:
    for error in (exc, exc.__cause__):
        state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if state:
            return str(state)
    return None


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) means "the database could not be reached
    or went away" — worth waiting out — rather than "the statement was wrong"."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, InterfaceError):
            return True  # Django's "connection already closed": only ever an outage
        if isinstance(error, OperationalError):
            state = _sqlstate(error)
            if state is not None:
                return state.startswith("08") or state in OUTAGE_SQLSTATES
            text = str(error).lower()
            return any(words in text for words in OUTAGE_WORDS)
        error = error.__cause__ or error.__context__
    return False


def describe(exc: BaseException) -> str:
    """A line for the job page and the log: the error's type and its first line."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


@dataclass
class Backoff:
    """Pauses that double from ``first`` up to ``longest``, at most ``budget`` seconds in all
    (each failure of a run and each failed reconnection spends some)."""

    budget: float
    first: float = 0.5
    longest: float = 10.0
    sleep: Callable[[float], None] = time.sleep
    waited: float = 0.0
    pauses: int = 0
    errors: list[str] = field(default_factory=list)  # one line per interruption

    def pause(self) -> bool:
        """Sleep the next pause; False when the budget is spent (nothing slept)."""
        left = self.budget - self.waited
        if left <= 0:
            return False
        seconds = min(self.first * 2 ** self.pauses, self.longest, left)
        self.sleep(seconds)
        self.waited += seconds
        self.pauses += 1
        return True


def drop_connection() -> None:
    """Close this thread's broken connection, so the next query opens a new one: Django does
    that at the end of a request, and a job is not one."""
    try:
        connection.close()
    except DatabaseError:
        pass  # the socket was gone already; close() forgot it all the same


def wait_for_database(backoff: Backoff) -> bool:
    """Reconnect, pausing between attempts, until the database answers (True) or the
    backoff's budget is spent (False)."""
    while backoff.pause():
        drop_connection()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except DatabaseError as exc:
            if not is_transient(exc):
                raise
            logger.info("database still unavailable after %.1f s: %s", backoff.waited,
                        describe(exc))
    drop_connection()
    return False
