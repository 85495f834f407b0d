"""Row-level security for the rest of what the retrieval role may read about fragments.

Source pointers and pins name a fragment; source documents are named by pointers. A row is
visible exactly when the fragment behind it is: a query under the retrieval role that forgot
its scope filter sees no other team's file paths, anchors or pin reasons either.

The checks are PL/pgSQL functions run per row rather than ``IN (SELECT ...)`` subqueries: the
planner turned those into a hash of every visible fragment (5 ms on 10,000 fragments, on every
retrieval's citation query), while a function is evaluated only for the rows the query's own
filter keeps — an index probe each. The functions run as the caller, so the fragment table's
own policy applies inside them.
"""

from django.db import migrations

ROLE = "contexts_retrieval"

FUNCTIONS = """
CREATE OR REPLACE FUNCTION contexts_fragment_readable(fragment bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE AS
    $$ BEGIN RETURN EXISTS (SELECT 1 FROM contexts_fragment WHERE id = fragment); END $$;
CREATE OR REPLACE FUNCTION contexts_document_readable(document bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE AS
    $$ BEGIN RETURN EXISTS (SELECT 1 FROM contexts_sourcepointer WHERE document_id = document);
    END $$;
"""

POLICIES = {
    "contexts_sourcepointer": "contexts_fragment_readable(fragment_id)",
    "contexts_pin": "contexts_fragment_readable(fragment_id)",
    "contexts_sourcedocument": "contexts_document_readable(id)",
}

# As for fragments (0002): the tables' owner, the application's role, is not subject to them.
FORWARD = FUNCTIONS + "\n".join(
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY retrieval_scopes ON {table} FOR SELECT TO {ROLE} USING ({using});"
    for table, using in POLICIES.items()
)
BACKWARD = "\n".join(
    f"DROP POLICY IF EXISTS retrieval_scopes ON {table};\n"
    f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
    for table in POLICIES
) + """
DROP FUNCTION IF EXISTS contexts_document_readable(bigint);
DROP FUNCTION IF EXISTS contexts_fragment_readable(bigint);
"""


class Migration(migrations.Migration):
    dependencies = [("contexts", "0012_trace_degraded")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
