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
