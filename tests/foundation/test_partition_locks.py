"""Creating an organization while another one ingests, or while a model upgrade switches
generations: its embedding partition waits for them instead of deadlocking with them (migration
0039, ``reembed.activate``)."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection

from accounts.models import Organization
from contexts.governance import reembed
from contexts.models import EmbeddingGeneration
from contexts.models.embeddings import GenerationState

WAITING = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation IN (%s)"


def _creating_in_a_thread(created: list, failed: list) -> threading.Thread:
    """Creates the organization ``newcomer`` (its signal creates its partition) in a thread
    of its own, with its own connection."""
    def create() -> None:
        try:
            created.append(Organization.objects.create(slug="newcomer", name="Newcomer"))
        except BaseException as exc:  # noqa: BLE001 - reported by the test's assertions
            failed.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=create)
    thread.start()
    return thread


def _until_waiting(url: str, tables: str) -> bool:
    """Whether a session came to wait for a lock on one of ``tables`` within 10 s."""
    with psycopg.connect(url, autocommit=True) as watcher:
        for _ in range(200):
            if watcher.execute(WAITING % tables).fetchone()[0]:
                return True
            threading.Event().wait(0.05)
    return False


@pytest.mark.django_db(transaction=True)
def test_a_new_organization_waits_for_an_ingestion_instead_of_deadlocking(services):
    # The ingestion, as it writes: fragments first (held until it commits), embeddings next.
    ingestion = psycopg.connect(services.test_database_owner_url)
    ingestion.execute("SET lock_timeout = '20s'")  # far past the 1 s deadlock check
    ingestion.execute("LOCK TABLE contexts_fragment IN ROW EXCLUSIVE MODE")
    created: list[Organization] = []
    failed: list[BaseException] = []
    creator = _creating_in_a_thread(created, failed)
    try:
        # The new partition waits for the fragments' table before it holds anything the
        # ingestion needs ...
        assert _until_waiting(services.test_database_owner_url,
                              "'contexts_fragment'::regclass"), "it never waited"
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


@pytest.mark.django_db(transaction=True)
def test_a_new_organization_waits_for_a_generation_switch_instead_of_deadlocking(
        services, monkeypatch):
    EmbeddingGeneration.objects.create(namespace="code", model_name="old",
                                       state=GenerationState.ACTIVE)
    target = EmbeddingGeneration.objects.create(namespace="code", model_name="new",
                                                state=GenerationState.BUILDING)
    created: list[Organization] = []
    failed: list[BaseException] = []
    creators: list[threading.Thread] = []
    missing = reembed.missing

    class ReadThenWait:
        """``missing()``, whose read of the embeddings (in ``activate``'s transaction) lets
        an organization be created before ``activate`` goes on to update the generations."""

        def __init__(self, generation: EmbeddingGeneration) -> None:
            self.rows = missing(generation)

        def __getattr__(self, name: str):  # the rest of the queryset, as it is
            return getattr(self.rows, name)

        def exists(self) -> bool:
            found = self.rows.exists()
            if creators:  # once: the switch's own read
                return found
            creators.append(_creating_in_a_thread(created, failed))
            assert _until_waiting(services.test_database_owner_url,
                                  "'contexts_embeddinggeneration'::regclass, "
                                  "'contexts_embedding'::regclass"), "it never waited"
            return found

    monkeypatch.setattr(reembed, "missing", ReadThenWait)
    try:
        # Without the generations' table locked first, this switch's update of the rows it
        # had read was refused: "deadlock detected".
        assert reembed.activate(target)
    finally:
        for creator in creators:
            creator.join(timeout=60)
    assert not failed and len(created) == 1
    created[0].delete()
