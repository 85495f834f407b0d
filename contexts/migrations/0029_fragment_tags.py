"""Fragments get ``tags``: labels people give a fragment when they write it in the console
("New fragment"), listed on its page and filterable in the fragment list. An empty array for
every existing row; no index (the list filters one scope's fragments)."""

import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("contexts", "0028_secret_origin_rescan"),
    ]

    operations = [
        migrations.AddField(
            model_name="fragment",
            name="tags",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=50), blank=True, default=list,
                help_text="labels people give it (the console's New fragment form)", size=None),
        ),
    ]
