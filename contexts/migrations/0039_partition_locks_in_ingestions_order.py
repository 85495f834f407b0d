"""An organization's embedding partition is created taking its locks in the order an ingestion
takes them: the tables the partition's foreign keys refer to first, the partitioned table last.

``CREATE TABLE … PARTITION OF contexts_embedding`` locks the partitioned table (ACCESS
EXCLUSIVE) and then, to copy its foreign keys, the fragments' and the generations' tables
(SHARE ROW EXCLUSIVE). An ingestion into another organization writes fragments, then their
embeddings, in one transaction. Creating an organization while another ingested could deadlock:
the new partition held the embeddings and waited for the fragments, the ingestion held the
fragments and waited for the embeddings, and PostgreSQL aborted one of them — reproduced by two
evaluations started together, and by ``tests/foundation/test_partition_locks.py``. Locking the
referenced tables first makes the new partition wait for the ingestion instead, holding nothing
it needs.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION contexts_create_embedding_partition(org bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    name text := 'contexts_embedding_p' || org;
BEGIN
{locks}    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF contexts_embedding'
                   ' FOR VALUES IN (%s)', name, org);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I'
                   ' USING hnsw (embedding vector_cosine_ops)', name || '_hnsw', name);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I USING gin (scope_ids)',
                   name || '_scopes', name);
END $$;
"""
LOCKS = """    IF to_regclass(name) IS NOT NULL THEN
        RETURN;  -- as every IF NOT EXISTS below: nothing to create, nothing to lock
    END IF;
    LOCK TABLE contexts_fragment, contexts_embeddinggeneration IN SHARE ROW EXCLUSIVE MODE;
"""
CREATE = FUNCTION.format(locks=LOCKS)
PREVIOUS = FUNCTION.format(locks="")  # as migration 0019 created it


class Migration(migrations.Migration):

    dependencies = [
        ('contexts', '0038_job_fragment_ids'),
    ]

    operations = [migrations.RunSQL(CREATE, PREVIOUS)]
