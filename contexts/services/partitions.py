"""One embedding partition (with its own HNSW graph) per organization.

Creating and dropping one is DDL, which the application's role may not do: two functions of
migration 0019 do it as the schema's owner (SECURITY DEFINER), for exactly this table.
"""

from __future__ import annotations

from django.db import connection


def partition_name(org_id: int) -> str:
    return f"contexts_embedding_p{int(org_id)}"


def ensure_partition(org_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT contexts_create_embedding_partition(%s)", [int(org_id)])


def drop_partition(org_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT contexts_drop_embedding_partition(%s)", [int(org_id)])


def prepared_organization_id() -> int | None:
    """The id of an organization about to be created in a long transaction (an import), its
    embedding partition already created and committed. Made inside that transaction, the
    partition would hold the embeddings' table (ACCESS EXCLUSIVE) until it committed: every
    retrieval of every organization would wait for the import. None inside a caller's
    transaction, where nothing can be committed apart (a test's): the organization's signal
    makes the partition then, as for any organization. A failed import drops it
    (:func:`drop_partition`); a crash between leaves an empty partition no organization has."""
    if connection.in_atomic_block:
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence('accounts_organization', 'id'))")
        org_id = int(cursor.fetchone()[0])
    ensure_partition(org_id)
    return org_id
