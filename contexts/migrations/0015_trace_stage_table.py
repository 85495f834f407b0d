"""Trace candidates stored column-wise (``RetrievalTrace.stage_table``, the same database column).

State only: rows written before keep their list of dicts, which ``RetrievalTrace.candidates``
reads as it is — no rewrite of a table that grows with every retrieval.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("contexts", "0014_fragment_packed_tokens")]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RenameField("retrievaltrace", "candidates", "stage_table"),
            migrations.AlterField("retrievaltrace", "stage_table",
                                  models.JSONField(default=dict, db_column="candidates")),
        ]),
    ]
