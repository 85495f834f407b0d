"""One embedding partition (with its own HNSW graph) per organization."""

from __future__ import annotations

from django.db import connection


def partition_name(org_id: int) -> str:
    return f"contexts_embedding_p{int(org_id)}"


def ensure_partition(org_id: int) -> None:
    name = partition_name(org_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF contexts_embedding "
            f"FOR VALUES IN ({int(org_id)})"
        )
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {name}_hnsw ON {name} "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {name}_scopes ON {name} USING gin (scope_ids)"
        )


def drop_partition(org_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {partition_name(org_id)}")
