"""The hot statements every retrieval runs are prepared once per connection
(``accounts.sql.prepared_cursor``), stay visible in Django's query log, and give the same
answers as the inlining cursor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext

from accounts.lookups import find_chain
from accounts.sql import prepared_cursor
from tests.factories import OrganizationFactory, RepositoryFactory

pytestmark = pytest.mark.django_db

_PROBE = "SELECT %s::int + 1 AS prepared_probe"
ROOT = Path(__file__).resolve().parents[2]


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_statement_is_prepared_on_first_use_and_reused():
    with prepared_cursor() as cursor:
        cursor.execute(_PROBE, [1])
        assert cursor.fetchone() == (2,)
    prepared = [s for s in _prepared_statements() if "prepared_probe" in s]
    assert len(prepared) == 1, prepared
    with prepared_cursor() as cursor:
        cursor.execute(_PROBE, [41])
        assert cursor.fetchone() == (42,)
    # The second run used the same server-side statement, not a new one.
    assert [s for s in _prepared_statements() if "prepared_probe" in s] == prepared


def test_prepared_statements_are_in_django_query_log():
    with CaptureQueriesContext(connection) as queries:
        with prepared_cursor() as cursor:
            cursor.execute(_PROBE, [1])
            cursor.execute(_PROBE, [2])
    logged = [q["sql"] for q in queries.captured_queries]
    assert len(logged) == 2
    assert all(sql and "prepared_probe" in sql for sql in logged), logged


def test_a_failed_prepared_statement_leaves_the_connection_usable():
    with pytest.raises(DataError), transaction.atomic(), prepared_cursor() as cursor:
        cursor.execute("SELECT 1 / %s::int AS prepared_probe_div", [0])
    with prepared_cursor() as cursor:
        cursor.execute("SELECT 1 / %s::int AS prepared_probe_div", [1])
        assert cursor.fetchone() == (1,)


def test_the_scope_lookup_answers_alike_when_prepared():
    """One of the converted statements: a name given as ``None`` (no repository asked) and
    a slug both bind without casts."""
    org = OrganizationFactory()
    repo = RepositoryFactory(org=org)
    for _ in range(7):  # past PostgreSQL's five custom plans: the generic plan answers too
        found = find_chain(org.slug, repo=repo.slug)
        assert found["org"].pk == org.pk and found["repo"].pk == repo.pk
        assert set(find_chain(org.public_id)) == {"org"}
        assert find_chain("no-such-org", repo=repo.slug) == {}


def test_prepared_statements_can_be_switched_off_for_an_old_pooler():
    """``CONTEXTS_DB_PREPARED_STATEMENTS=0``: psycopg prepares nothing (threshold None), and
    the cursor still binds on the server."""
    code = ("import django; django.setup(); from django.conf import settings; "
            "print(settings.DATABASES['default']['OPTIONS']['prepare_threshold'])")
    for value, expected in (("0", "None"), ("1", "0"), ("", "0")):
        result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, text=True,
                                capture_output=True, timeout=120,
                                env={**os.environ, "CONTEXTS_DB_PREPARED_STATEMENTS": value,
                                     "DJANGO_SETTINGS_MODULE": "contexts.settings"})
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().splitlines()[-1] == expected, (value, result.stdout)


def test_without_preparing_the_cursor_answers_alike():
    threshold = connection.connection.prepare_threshold
    connection.connection.prepare_threshold = None
    try:
        with prepared_cursor() as cursor:
            cursor.execute("SELECT %s::int * 2 AS unprepared_probe", [21])
            assert cursor.fetchone() == (42,)
        assert not [s for s in _prepared_statements() if "unprepared_probe" in s]
    finally:
        connection.connection.prepare_threshold = threshold
