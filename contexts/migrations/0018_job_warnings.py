"""Ingestion jobs record warnings: files ingested, but not quite as written (an owner named in
front matter who may not curate the scope is not honoured)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("contexts", "0017_job_heartbeat")]

    operations = [
        migrations.AddField(
            model_name="ingestionjob",
            name="warnings",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
