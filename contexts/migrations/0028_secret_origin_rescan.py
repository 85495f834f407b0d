"""A secret finding may come from re-screening stored text (``manage.py scan_secrets
--stored``, ``contexts.usecases.stored_secrets``): origin ``rescan``. Only the field's choices
change — no DDL; the table keeps its ``org_id`` and composite keys (migration 0027)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("contexts", "0027_secret_findings"),
    ]

    operations = [
        migrations.AlterField(
            model_name="secretfinding",
            name="origin",
            field=models.CharField(choices=[
                ("ingestion", "ingested from a path"), ("upload", "uploaded"),
                ("write", "written (API, MCP)"), ("edit", "edited (console, nudge, admin)"),
                ("rescan", "stored before the scan (rescan)")], max_length=10),
        ),
    ]
