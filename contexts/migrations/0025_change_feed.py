"""The change feed and the followers' positions (issue 21, ADR 0015; ``contexts/indexes/follower.py``).

Tenant tables: each row carries its organization, and the feed's key is (organization,
sequence). The application's login role reaches them through ``contexts_application`` (default
privileges); retrieval never reads them inside its row-level-security block (the lag is read
before it, like the caller's token and scopes), so ``contexts_retrieval`` gets no grant and
no policy, and RLS stays off for them.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_tenant_org_everywhere"),
        ("contexts", "0024_tenant_org_everywhere"),
    ]

    operations = [
        migrations.CreateModel(
            name="ChangeHead",
            fields=[
                ("org", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                             primary_key=True, related_name="+",
                                             serialize=False, to="accounts.organization")),
                ("seq", models.BigIntegerField(default=0)),
            ],
            options={"db_table": "contexts_change_head"},
        ),
        migrations.CreateModel(
            name="Change",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("seq", models.BigIntegerField()),
                ("fragment_id", models.BigIntegerField()),
                ("public_id", models.CharField(max_length=40)),
                ("kind", models.CharField(choices=[
                    ("create", "Create"), ("version", "Version"), ("retire", "Retire"),
                    ("restore", "Restore"), ("supersede", "Supersede"), ("merge", "Merge"),
                    ("scope", "Scope"), ("metadata", "Metadata"), ("delete", "Delete"),
                    ("reembed", "Reembed"), ("reindex", "Reindex")], max_length=16)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("org", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="+", to="accounts.organization")),
            ],
            options={
                "db_table": "contexts_change",
                "constraints": [models.UniqueConstraint(fields=("org", "seq"),
                                                        name="one_change_per_seq")],
            },
        ),
        migrations.CreateModel(
            name="Follower",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("node", models.CharField(max_length=200)),
                ("seq", models.BigIntegerField(default=0)),
                ("seen_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("org", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="+", to="accounts.organization")),
            ],
            options={
                "db_table": "contexts_follower",
                "constraints": [models.UniqueConstraint(fields=("org", "node"),
                                                        name="one_position_per_node")],
            },
        ),
    ]
