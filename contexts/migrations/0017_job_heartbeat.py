"""Ingestion jobs get a heartbeat: the lease that finds jobs whose worker or message is gone
(``contexts/services/job_leases.py``). Existing jobs keep NULL; the reaper falls back to
``started_at`` (running) or ``created_at`` (queued)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("contexts", "0016_trace_candidates_uncompressed")]

    operations = [
        migrations.AddField(
            model_name="ingestionjob",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
