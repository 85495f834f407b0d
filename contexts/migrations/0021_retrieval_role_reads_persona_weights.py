"""Retrieval reads a persona's compose weights and half-lives inside the row-level-security
block (issue 20): let the retrieval role read those columns — and only those, not the persona's
name or description."""

from django.db import migrations

COLUMNS = "id, w_r, w_f, w_c, w_p, halflife_days"


class Migration(migrations.Migration):
    dependencies = [("contexts", "0020_embedding_passages"), ("accounts", "0002_scope_restrict")]

    operations = [
        migrations.RunSQL(f"GRANT SELECT ({COLUMNS}) ON accounts_persona TO contexts_retrieval",
                          f"REVOKE SELECT ({COLUMNS}) ON accounts_persona FROM contexts_retrieval"),
    ]
