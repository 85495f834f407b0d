"""Creating an organization while another one ingests: its embedding partition waits for the
ingestion instead of deadlocking with it (migration 0039)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from accounts.models import Organization


@pytest.mark.django_db(transaction=True)
def test_a_new_organization_waits_for_an_ingestion_instead_of_deadlocking(services):
    # The ingestion, as it writes: fragments first (held until it commits), embeddings next.
    ingestion = psycopg.connect(services.test_database_owner_url)
    ingestion.execute("SET lock_timeout = '20s'")  # far past the 1 s deadlock check
    ingestion.execute("LOCK TABLE contexts_fragment IN ROW EXCLUSIVE MODE")
    created: list[Organization] = []
    failed: list[BaseException] = []

    def create() -> None:
        try:  # the organization's signal creates its partition, in this thread's connection
            created.append(Organization.objects.create(slug="newcomer", name="Newcomer"))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertions below
            failed.append(exc)
        finally:
            connection.close()

    creator = threading.Thread(target=create)
    creator.start()
    try:
        # The new partition waits for the fragments' table before it holds anything the
        # ingestion needs ...
        with psycopg.connect(services.test_database_owner_url, autocommit=True) as watcher:
            for _ in range(200):
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
                    "'contexts_fragment'::regclass").fetchone()[0]
                if waiting:
                    break
                threading.Event().wait(0.05)
            assert waiting, "the partition's creation never waited for the ingestion"
        # ... so the ingestion writes its embeddings and commits (before migration 0039 this
        # lock was refused: "deadlock detected").
        ingestion.execute("LOCK TABLE contexts_embedding IN ROW EXCLUSIVE MODE")
        ingestion.commit()
    finally:
        ingestion.close()
        creator.join(timeout=60)
    assert not failed and len(created) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL",
                       [f"contexts_embedding_p{created[0].pk}"])
        assert cursor.fetchone()[0]
    created[0].delete()
