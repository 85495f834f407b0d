"""Trace candidate tables are stored out of line without compression (``STORAGE EXTERNAL``).

Every retrieval writes one table (~170 candidates, ~23 KB as JSON text); PostgreSQL's default
(``EXTENDED``) compresses it with pglz first, which cost ~0.8 ms of database CPU per retrieval
(measured: 3.4 → 2.6 ms per insert), on the two cores the next request needs. The price is
disk: ~30 KB (jsonb's binary form) instead of ~9 KB per trace, bounded by trace retention.
Existing rows keep their compressed values; only new writes change. See docs/performance.md.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("contexts", "0015_trace_stage_table")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE contexts_retrievaltrace ALTER COLUMN candidates SET STORAGE EXTERNAL",
            "ALTER TABLE contexts_retrievaltrace ALTER COLUMN candidates SET STORAGE EXTENDED",
        ),
    ]
