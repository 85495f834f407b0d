"""The public ids of the fragments an ingestion job created and updated (at most 200 of each),
so that the job page links them (issue 40, item 8). Older jobs keep an empty map."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contexts', '0037_retrieval_reads_fragment_origins'),
    ]

    operations = [
        migrations.AddField(
            model_name='ingestionjob',
            name='fragment_ids',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
