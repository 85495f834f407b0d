"""Issue 22, git-aware walking: a path job may opt into untracked files
(``include_untracked``), and test code is ingested as its own kind, ``test``. The kind is a
choice only (no database constraint), so the second operation changes no table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("contexts", "0025_change_feed")]

    operations = [
        migrations.AddField(
            model_name="ingestionjob",
            name="include_untracked",
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name="fragment",
            name="kind",
            field=models.CharField(
                choices=[("prose", "prose"), ("code", "code"), ("adr", "ADR"),
                         ("runbook", "runbook"), ("policy", "policy"),
                         ("negative", "negative context"),
                         ("session-summary", "session summary"), ("test", "test code")],
                default="prose", max_length=20),
        ),
    ]
