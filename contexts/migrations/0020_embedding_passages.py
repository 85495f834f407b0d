"""A fragment longer than the model's window gets one vector per passage (`passage` 0 is the
head, as before); the dense leg scores a fragment with its best passage (ADR 0014).

The table is created by SQL in migration 0002 (LIST-partitioned by organization), so the column
is added by SQL too; existing rows are heads (`DEFAULT 0`), and `manage.py reembed` (a new
generation) adds the passages of long fragments.
"""

from django.db import migrations, models

SQL = "ALTER TABLE contexts_embedding ADD COLUMN passage smallint NOT NULL DEFAULT 0"
REVERSE = "ALTER TABLE contexts_embedding DROP COLUMN passage"


class Migration(migrations.Migration):
    dependencies = [("contexts", "0019_application_role")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(SQL, REVERSE)],
            state_operations=[
                migrations.AddField(
                    model_name="embedding",
                    name="passage",
                    field=models.PositiveSmallIntegerField(default=0),
                ),
            ],
        ),
    ]
