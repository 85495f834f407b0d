"""Row-level security for the rest of what the retrieval role may read about fragments.

Source pointers and pins name a fragment; source documents are named by pointers. Each policy
reads through the table it points at — whose own policy applies inside it — so a row is
visible exactly when the fragment behind it is: a query under the retrieval role that forgot
its scope filter sees no other team's file paths, anchors or pin reasons either.
"""

from django.db import migrations

ROLE = "contexts_retrieval"

POLICIES = {
    "contexts_sourcepointer": "fragment_id IN (SELECT id FROM contexts_fragment)",
    "contexts_pin": "fragment_id IN (SELECT id FROM contexts_fragment)",
    "contexts_sourcedocument": ("EXISTS (SELECT 1 FROM contexts_sourcepointer p "
                                "WHERE p.document_id = contexts_sourcedocument.id)"),
}

# As for fragments (0002): the tables' owner, the application's role, is not subject to them.
FORWARD = "\n".join(
    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY retrieval_scopes ON {table} FOR SELECT TO {ROLE} USING ({using});"
    for table, using in POLICIES.items()
)
BACKWARD = "\n".join(
    f"DROP POLICY IF EXISTS retrieval_scopes ON {table};\n"
    f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
    for table in POLICIES
)


class Migration(migrations.Migration):
    dependencies = [("contexts", "0012_trace_degraded")]

    operations = [migrations.RunSQL(FORWARD, reverse_sql=BACKWARD)]
