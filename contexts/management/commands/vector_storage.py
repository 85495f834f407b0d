"""``manage.py vector_storage [--to vector|halfvec] [--drop-other]``: which HNSW graphs the
embeddings are searched through — float32 (``vector``, the column as it is) or float16
(``halfvec``, an expression index on ``embedding::halfvec(384)``) — to match
``settings.EMBEDDING_STORAGE`` (``CONTEXTS_EMBEDDING_STORAGE``).

Why an expression index and not ``ALTER COLUMN TYPE halfvec``: the column stays float32, so
- the switch is index DDL only, both ways: no table rewrite, no model or migration change,
  writes unchanged, and the other storage's graph can be kept while both are compared or while
  the processes restart with the new setting;
- the dense leg orders by the float16 graph but computes the similarities it returns on the
  float32 column (``dense.distance_order``): fusion sees the same numbers as before;
- what a halfvec HNSW saves is the graph, which is what must stay in memory for a fast search;
  the heap (read for the ~200 rows a search returns) keeps its size.

The halfvec index is a partitioned index on ``contexts_embedding`` with one attached index per
organization's partition, so a partition created later (a new organization) gets its own
automatically. A switch without downtime:

    manage.py vector_storage --to halfvec                # build the float16 graphs beside
    CONTEXTS_EMBEDDING_STORAGE=halfvec, restart           # the processes now search them
    manage.py vector_storage --to halfvec --drop-other   # free the float32 graphs

and back with ``--to vector`` the same way. DDL needs the schema's owner: the command connects
as the owner (``contexts.stack.owner_db``), as ``migrate`` does.
"""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from contexts.models.embeddings import EMBEDDING_DIM
from contexts.stack.owner_db import as_owner

STORAGES = ("vector", "halfvec")
HALFVEC_INDEX = "contexts_embedding_halfvec_hnsw"
HALFVEC_EXPRESSION = f"(embedding::halfvec({EMBEDDING_DIM})) halfvec_cosine_ops"
# An HNSW build is several times faster when its graph fits in maintenance_work_mem (64 MB by
# default; a 60,000-vector partition's float32 graph is ~110 MB).
BUILD_MEMORY = "512MB"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                       "WHERE i.inhparent = 'contexts_embedding'::regclass ORDER BY c.relname")
        return [row[0] for row in cursor.fetchall()]


def hnsw_indexes() -> dict[str, dict[str, tuple[str, bool, int]]]:
    """partition → storage → (index name, valid, bytes) of its HNSW indexes."""
    found: dict[str, dict[str, tuple[str, bool, int]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.relname, i.relname, x.indisvalid, pg_relation_size(i.oid), "
            "pg_get_indexdef(i.oid) FROM pg_inherits h JOIN pg_class t ON t.oid = h.inhrelid "
            "JOIN pg_index x ON x.indrelid = t.oid JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_am am ON am.oid = i.relam "
            "WHERE h.inhparent = 'contexts_embedding'::regclass AND am.amname = 'hnsw'")
        for table, index, valid, size, definition in cursor.fetchall():
            storage = "halfvec" if "halfvec" in definition else "vector"
            found.setdefault(table, {})[storage] = (index, valid, size)
    return found


def _parent_index_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [HALFVEC_INDEX])
        return cursor.fetchone()[0]


def build(storage: str, write=lambda line: None) -> int:
    """Give every partition its HNSW index of ``storage``; returns how many were built. Runs
    outside a transaction (``CREATE INDEX CONCURRENTLY``: ingestion keeps writing meanwhile)."""
    built = 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [BUILD_MEMORY])
        if storage == "halfvec":
            # ON ONLY: the parent's index is created invalid and becomes valid once every
            # partition has one attached; from then on a new partition gets one on creation.
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {_q(HALFVEC_INDEX)} ON ONLY "
                           f"contexts_embedding USING hnsw ({HALFVEC_EXPRESSION})")
        present = hnsw_indexes()
        for table in partitions():
            index = present.get(table, {}).get(storage)
            if index is not None and not index[1]:  # a concurrent build that was interrupted
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_q(index[0])}")
                index = None
            if index is None:
                name = f"{table}_hnsw" if storage == "vector" else f"{table}_hnsw_half"
                opclass = ("embedding vector_cosine_ops" if storage == "vector"
                           else HALFVEC_EXPRESSION)
                write(f"  building {name} …")
                cursor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {_q(name)} ON "
                               f"{_q(table)} USING hnsw ({opclass})")
                index = (name, True, 0)
                built += 1
            if storage == "halfvec":
                cursor.execute("SELECT 1 FROM pg_inherits WHERE inhrelid = %s::regclass",
                               [index[0]])
                if cursor.fetchone() is None:
                    cursor.execute(f"ALTER INDEX {_q(HALFVEC_INDEX)} ATTACH PARTITION "
                                   f"{_q(index[0])}")
    return built


def drop(storage: str, write=lambda line: None) -> int:
    """Drop every partition's HNSW index of ``storage``; returns how many were dropped."""
    dropped = 0
    with connection.cursor() as cursor:
        if storage == "halfvec":
            count = sum("halfvec" in kinds for kinds in hnsw_indexes().values())
            if _parent_index_exists():
                # The partitioned index takes its attached partitions' indexes with it.
                cursor.execute(f"DROP INDEX IF EXISTS {_q(HALFVEC_INDEX)}")
            for kinds in hnsw_indexes().values():  # any not attached
                if "halfvec" in kinds:
                    cursor.execute(f"DROP INDEX IF EXISTS {_q(kinds['halfvec'][0])}")
            write(f"  dropped {count} halfvec HNSW indexes")
            return count
        for kinds in hnsw_indexes().values():
            if "vector" in kinds:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {_q(kinds['vector'][0])}")
                dropped += 1
        write(f"  dropped {dropped} float32 HNSW indexes")
    return dropped


class Command(BaseCommand):
    help = ("Build (--to) or report the HNSW indexes of the embedding storage, vector (float32) "
            "or halfvec (float16); see settings.EMBEDDING_STORAGE.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--to", choices=STORAGES,
                            help="give every partition this storage's HNSW index")
        parser.add_argument("--drop-other", action="store_true",
                            help="with --to: then drop the other storage's HNSW indexes")
        parser.add_argument("--force", action="store_true",
                            help="with --drop-other: even if the setting still names the other")

    def handle(self, *args, to: str | None, drop_other: bool, force: bool, **options) -> None:
        if drop_other and to is None:
            raise CommandError("--drop-other needs --to")
        current = settings.EMBEDDING_STORAGE
        with as_owner():
            if to is not None:
                built = build(to, self.stdout.write)
                self.stdout.write(f"{to}: {built} HNSW indexes built")
                if drop_other:
                    other = "vector" if to == "halfvec" else "halfvec"
                    if current == other and not force:
                        raise CommandError(
                            f"EMBEDDING_STORAGE is {other!r} here: the processes still search "
                            f"its indexes. Set CONTEXTS_EMBEDDING_STORAGE={to}, restart them, "
                            "then drop (or pass --force).")
                    drop(other, self.stdout.write)
            self._status(current)
        connection.close()

    def _status(self, current: str) -> None:
        tables = partitions()
        present = hnsw_indexes()
        self.stdout.write(f"EMBEDDING_STORAGE = {current!r}; {len(tables)} partitions")
        for storage in STORAGES:
            have = [present[t][storage] for t in tables if storage in present.get(t, {})]
            size = sum(index[2] for index in have)
            self.stdout.write(f"  {storage:<8} HNSW on {len(have)}/{len(tables)} partitions, "
                              f"{size / 2**20:.1f} MB")
        missing = [t for t in tables if current not in present.get(t, {})]
        if missing:
            self.stdout.write(self.style.WARNING(
                f"{len(missing)} partitions have no {current} HNSW index: their searches scan "
                f"every row; run `manage.py vector_storage --to {current}`"))
