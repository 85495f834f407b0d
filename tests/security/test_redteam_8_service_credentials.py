"""Red-team finding 8: the embedded services accepted any local user without a password, and
the application connected as a superuser that bypassed row-level security.

Now the application runs as ``contexts_app`` — no superuser, no BYPASSRLS, no CREATEROLE or
CREATEDB, owning nothing — while migrations run as ``contexts_owner``; PostgreSQL and Redis
refuse a connection without the password generated into ``var/secrets/`` (0600). The suite
itself runs as the application role (tests/conftest.py), so every other test checks that
configuration too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest
import redis
from django.db import connection

from contexts.stack.servers import (
    PG_APP_ROLE,
    PG_OWNER_ROLE,
    EmbeddedPostgres,
    EmbeddedRedis,
    free_port,
)
from tests.conftest import ROOT


def test_the_application_role_is_neither_privileged_nor_an_owner(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb,"
                       " rolreplication FROM pg_roles WHERE rolname = current_user")
        user, *attributes = cursor.fetchone()
        cursor.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n"
                       " ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
                       " AND c.relowner = current_user::regrole")
        owned = cursor.fetchone()[0]
        cursor.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", [PG_OWNER_ROLE])
        member_of_owner = cursor.fetchone()[0]
    assert user == PG_APP_ROLE
    assert attributes == [False] * 5
    assert owned == 0 and not member_of_owner


def test_the_application_role_cannot_change_the_schema(db):
    with pytest.raises(Exception, match="permission denied|must be owner"), \
            connection.cursor() as cursor:
        cursor.execute("ALTER TABLE contexts_fragment DISABLE ROW LEVEL SECURITY")


@pytest.mark.parametrize("user", ["postgres", PG_OWNER_ROLE, PG_APP_ROLE])
def test_postgres_refuses_a_connection_without_a_password(services, user):
    for host in ("127.0.0.1", str(services.postgres.socket_dir)):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(host=host, port=services.postgres.port, user=user, dbname="postgres",
                            password="", connect_timeout=5).close()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(host=host, port=services.postgres.port, user=user, dbname="postgres",
                            password="guessed", connect_timeout=5).close()


def test_redis_refuses_a_client_without_the_password(services):
    client = redis.Redis(host="127.0.0.1", port=services.redis.port)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            client.ping()
    finally:
        client.close()
    authenticated = redis.Redis.from_url(services.redis.url)
    try:
        assert authenticated.ping()
    finally:
        authenticated.close()


def test_the_generated_secrets_are_private(services):
    files = sorted((services.root / "secrets").iterdir())
    assert {f.name for f in files} >= {"postgres_superuser.password", "postgres_owner.password",
                                       "postgres_app.password", "redis.password"}
    for file in files:
        assert file.stat().st_mode & 0o777 == 0o600, file
        assert len(file.read_text().strip()) >= 32
    assert (services.root / "secrets").stat().st_mode & 0o077 == 0


# `make run`'s settings: the application's URLs name the application role and carry passwords.
# A made-up password that is not the placeholder, kept out of URL literals (repository scan).
REAL_LOOKING = "a-real-one"
PRINT_URLS = ("import json; from django.conf import settings as s; print(json.dumps({"
              "'db': s.DATABASES['default'], 'owner': s.DATABASE_OWNER, "
              "'cache': s.CACHES['default']['LOCATION'], 'broker': s.CELERY_BROKER_URL}))")


def test_the_embedded_configuration_connects_as_the_application_role(tmp_path):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DATABASE_", "REDIS_URL", "CONTEXTS_"))}
    # Started as `manage.py` starts a process: the passwords are generated first
    # (contexts/kernel/local_secrets.py), then the settings read them.
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", PRINT_URLS], cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "contexts.settings",
             "CONTEXTS_VAR_DIR": str(tmp_path / "var"), "CONTEXTS_RUN_SETTINGS": "off"},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout.strip().splitlines()[-1])
    secrets = tmp_path / "var" / "secrets"
    assert values["db"]["USER"] == PG_APP_ROLE
    assert values["db"]["PASSWORD"] == (secrets / "postgres_app.password").read_text().strip()
    assert values["owner"]["USER"] == PG_OWNER_ROLE
    assert values["owner"]["PASSWORD"] == (secrets / "postgres_owner.password").read_text().strip()
    redis_password = (secrets / "redis.password").read_text().strip()
    assert f":{redis_password}@" in values["cache"] and values["broker"] == values["cache"]


@pytest.fixture
def old_var_dir():
    """Outside pytest's base temp dir, which the postgres system user may not traverse."""
    path = Path(tempfile.mkdtemp(prefix="contexts-upgrade-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_a_cluster_from_an_earlier_make_run_is_upgraded_without_losing_data(old_var_dir):
    """An earlier `make run` left a trust-auth cluster whose tables the superuser owns."""
    old = EmbeddedPostgres(old_var_dir, free_port())
    old._requires_passwords = lambda: True  # as the old code left it: initdb's trust, no roles
    old._provision = lambda: None
    old.start()
    try:
        trusted = f"host=127.0.0.1 port={old.port} user=postgres"
        with psycopg.connect(f"{trusted} dbname=postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE contexts")
        with psycopg.connect(f"{trusted} dbname=contexts", autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id bigint GENERATED BY DEFAULT AS IDENTITY, note"
                         " text); INSERT INTO kept (note) VALUES ('from before')")
            conn.execute("CREATE TABLE parted (org int) PARTITION BY LIST (org);"
                         " CREATE TABLE parted_p1 PARTITION OF parted FOR VALUES IN (1)")
    finally:
        old.stop()

    upgraded = EmbeddedPostgres(old_var_dir, old.port)
    upgraded.start()
    try:
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"{trusted} dbname=contexts password=", connect_timeout=5).close()
        with psycopg.connect(upgraded.owner_url) as conn:
            assert conn.execute("SELECT note FROM kept").fetchall() == [("from before",)]
            owners = conn.execute("SELECT DISTINCT tableowner FROM pg_tables"
                                  " WHERE schemaname = 'public'")
            assert owners.fetchall() == [(PG_OWNER_ROLE,)]  # partitions too
            conn.execute("INSERT INTO kept (note) VALUES ('after')")  # owns the sequence too
        with psycopg.connect(upgraded.url) as conn:
            role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles"
                                " WHERE rolname = current_user").fetchone()
            assert role == (False, False)
    finally:
        upgraded.stop()


@pytest.mark.slow
def test_a_running_redis_without_a_password_gets_one_when_attached(old_var_dir):
    server = EmbeddedRedis(old_var_dir, free_port())
    server._write_config = lambda: []  # as the old code started it: no password
    server.start()
    try:
        open_client = redis.Redis(host="127.0.0.1", port=server.port)
        assert open_client.ping()
        open_client.close()
        attached = EmbeddedRedis(old_var_dir, server.port)
        assert attached.start().pid == server.status().pid
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(host="127.0.0.1", port=server.port).ping()
    finally:
        server.stop()


# --- the Docker deployment ------------------------------------------------------------------------
def test_compose_runs_the_application_as_its_own_role_and_redis_with_a_password():
    import yaml

    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    for name in ("web", "worker-interactive", "worker-bulk", "beat"):
        environment = services[name]["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://contexts_app:"), name
        assert "DATABASE_OWNER_URL" not in environment, name  # only the migrate service
        assert environment["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD")
    migrate = services["migrate"]["environment"]
    assert migrate["DATABASE_OWNER_URL"].startswith("postgres://contexts:")
    assert "--requirepass" in " ".join(services["redis"]["command"])


def test_production_refuses_the_compose_files_placeholder_passwords(tmp_path):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("DATABASE_", "REDIS_URL", "CONTEXTS_", "SECRET_KEY", "DEBUG"))}
    env = {**clean, "CONTEXTS_PRODUCTION": "true", "CONTEXTS_VAR_DIR": str(tmp_path),
           "SECRET_KEY": "k" * 60, "REDIS_URL": "redis://:a-real-one@redis:6379/0",
           "DATABASE_URL": "postgres://contexts_app:change-me-app@db:5432/contexts"}
    start = [sys.executable, "manage.py", "shell", "-c", "pass"]  # refused before it runs
    result = subprocess.run(start, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0 and "DATABASE_URL: still holds" in result.stderr
    env["DATABASE_URL"] = f"postgres://contexts_app:{REAL_LOOKING}@db:5432/contexts"
    result = subprocess.run(start, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
