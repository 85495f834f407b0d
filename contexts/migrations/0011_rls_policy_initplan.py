"""Row-level security: read the allowed scopes once per query, not once per row.

A bare ``current_setting(...)::int[]`` in a policy is re-evaluated (and re-parsed) for every
row a scan visits; wrapped in a scalar subquery it becomes an InitPlan computed once. Same
rule, same fail-closed NULL when the setting is missing.
"""

from django.db import migrations

TABLES = ("contexts_fragment", "contexts_embedding")
PER_ROW = "NULLIF(current_setting('app.allowed_scopes', true), '')::int[]"
ONCE = f"(SELECT {PER_ROW})"


def alter(allowed: str) -> str:
    return "\n".join(f"ALTER POLICY retrieval_scopes ON {table} USING (scope_ids && {allowed});"
                     for table in TABLES)


class Migration(migrations.Migration):
    dependencies = [("contexts", "0010_governance")]

    operations = [migrations.RunSQL(alter(ONCE), reverse_sql=alter(PER_ROW))]
