"""The application's rights as a role of their own, so that it need not own the schema.

Until now the application connected as the tables' owner (a superuser when embedded), and an
owner is exempt from row-level security. From here the owner runs migrations and the
application's login role is a member of ``contexts_application`` (``contexts/stack/db_roles.py``):

- DML on every table and sequence; default privileges give it the same on what later
  migrations create (they run as the same owner);
- an ``application_rows`` policy on each table with row-level security: outside a retrieval
  the application's own visibility rules apply, so it sees every row. Inside
  ``retrieval_scope`` the connection is ``contexts_retrieval``, which is not a member of
  ``contexts_application``: only the scope policies apply there, as before;
- creating and dropping an organization's embedding partition (DDL) through two SECURITY
  DEFINER functions that run as the owner, instead of a right to create tables.
"""

from django.db import migrations

from contexts.stack.db_roles import APPLICATION_GROUP, CREATE_GROUP_ROLES

APP = APPLICATION_GROUP
RLS_TABLES = ("contexts_fragment", "contexts_embedding", "contexts_sourcepointer",
              "contexts_pin", "contexts_sourcedocument")
FUNCTIONS = ("contexts_create_embedding_partition(bigint)",
             "contexts_drop_embedding_partition(bigint)")

FORWARD = CREATE_GROUP_ROLES + f"""
GRANT USAGE ON SCHEMA public TO {APP};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP};
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {APP};
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {APP};
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {APP};
""" + "".join(
    f"CREATE POLICY application_rows ON {table} FOR ALL TO {APP} USING (true) WITH CHECK (true);\n"
    for table in RLS_TABLES
) + """
CREATE FUNCTION contexts_create_embedding_partition(org bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    name text := 'contexts_embedding_p' || org;
BEGIN
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF contexts_embedding'
                   ' FOR VALUES IN (%s)', name, org);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I'
                   ' USING hnsw (embedding vector_cosine_ops)', name || '_hnsw', name);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON %I USING gin (scope_ids)',
                   name || '_scopes', name);
END $$;
CREATE FUNCTION contexts_drop_embedding_partition(org bigint) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', 'contexts_embedding_p' || org);
END $$;
""" + "".join(
    f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC;\n"
    f"GRANT EXECUTE ON FUNCTION {function} TO {APP};\n"
    for function in FUNCTIONS
)

BACKWARD = "".join(f"DROP FUNCTION IF EXISTS {function};\n" for function in FUNCTIONS) + "".join(
    f"DROP POLICY IF EXISTS application_rows ON {table};\n" for table in RLS_TABLES
) + f"""
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM {APP};
ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {APP};
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {APP};
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP};
REVOKE USAGE ON SCHEMA public FROM {APP};
"""


class Migration(migrations.Migration):
    dependencies = [("contexts", "0018_job_warnings"), ("accounts", "0002_scope_restrict")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
