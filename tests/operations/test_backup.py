"""Backup and restore end to end: dump the live database, restore it into a new one with
``manage.py restore`` (which rebuilds the lexical index), and retrieve the same answer there."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest
from django.core.management import call_command

from contexts.stack.servers import PG_APP_ROLE, PG_OWNER_ROLE, PG_SUPERUSER
from tests.api.conftest import as_token
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

QUERY = {"query": "RateLimiter.acquire ERR_RATE burst", "scope": {"org_id": "acme",
                                                                  "repo_id": "web"}}

# Runs in the restored database: the same request through the API, answered as JSON.
ASK = """
import json, sys, django
django.setup()
from rest_framework.test import APIClient
client = APIClient()
client.credentials(HTTP_AUTHORIZATION="Bearer " + sys.argv[1])
response = client.post("/api/contexts/retrieve", json.loads(sys.argv[2]), format="json")
print(json.dumps({"status": response.status_code, "body": response.json()}))
"""


def test_a_restored_backup_answers_like_the_original(services, transactional_db, api, cast,
                                                    world, tmp_path):
    as_token(api, cast.raw_token)
    original = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert original["fragments"] and original["degraded"] == {}

    dump = tmp_path / "contexts.dump"
    call_command("backup", str(dump))
    assert dump.stat().st_size > 0

    postgres = services.postgres
    admin = postgres.url_for(PG_SUPERUSER, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS restored")
    postgres.ensure_database("restored")  # as `make run` creates one: pgvector, the owner's
    # The restore runs as the owner; the application, answering below, as its own role.
    env = {**services.env(),
           "DATABASE_URL": postgres.url_for(PG_APP_ROLE, "restored"),
           "DATABASE_OWNER_URL": postgres.url_for(PG_OWNER_ROLE, "restored"),
           "CONTEXTS_INDEX_DIR": str(tmp_path / "restored-index")}
    try:
        restored = subprocess.run([sys.executable, "manage.py", "restore", str(dump)], env=env,
                                  cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert restored.returncode == 0, restored.stderr[-2000:]
        assert "indexed 5 fragments of acme" in restored.stdout  # the lexical index is back

        # Restoring over a database that already holds data is refused, not merged.
        again = subprocess.run([sys.executable, "manage.py", "restore", str(dump)], env=env,
                               cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert again.returncode != 0 and "not empty" in again.stderr

        asked = subprocess.run([sys.executable, "-c", ASK, cast.raw_token, json.dumps(QUERY)],
                               env={**env, "CONTEXTS_QUERY_ENCODER": "thread"}, cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
        assert asked.returncode == 0, asked.stderr[-2000:]
        answer = json.loads(asked.stdout.strip().splitlines()[-1])
        assert answer["status"] == 200
        assert answer["body"]["degraded"] == {}
        assert [f["id"] for f in answer["body"]["fragments"]] == \
            [f["id"] for f in original["fragments"]]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS restored WITH (FORCE)")
