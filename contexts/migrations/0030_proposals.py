"""Agents' proposals (issue 23, item 5; docs/adr/0017). A tenant table: ``org_id`` NOT NULL,
its public id unique with the organization, its references to other tenant tables (the
target scope, the source and result fragments, the proposing token) composite,
``(org_id, x_id) → (org_id, id)``, like every other (migration 0024). Not read by retrieval:
no grant to ``contexts_retrieval``."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


COMPOSITE_FKS = [
    ("contexts_proposal", "target_scope_id", "accounts_scope"),
    ("contexts_proposal", "source_fragment_id", "contexts_fragment"),
    ("contexts_proposal", "result_fragment_id", "contexts_fragment"),
    ("contexts_proposal", "proposed_by_id", "accounts_apitoken"),
]


def fk_name(table: str, column: str) -> str:
    return f"{table}_{column.removesuffix('_id')}_org_fk"


ADD_FKS = "".join(
    f"ALTER TABLE {table} ADD CONSTRAINT {fk_name(table, column)} FOREIGN KEY (org_id, {column})"
    f" REFERENCES {ref} (org_id, id) DEFERRABLE INITIALLY DEFERRED;\n"
    for table, column, ref in COMPOSITE_FKS)
DROP_FKS = "".join(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {fk_name(table, column)};\n"
                   for table, column, _ in COMPOSITE_FKS)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_sessions_and_proposal_policy'),
        ('contexts', '0029_fragment_tags'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Proposal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.CharField(db_index=True, editable=False, max_length=32)),
                ('kind', models.CharField(choices=[('promote', 'promote a session fragment'), ('new', 'a new fragment')], max_length=8)),
                ('target', models.CharField(choices=[('repository', 'repository'), ('organization', 'organization')], max_length=12)),
                ('title', models.CharField(blank=True, max_length=300)),
                ('body', models.TextField()),
                ('fragment_kind', models.CharField(max_length=32)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('state', models.CharField(choices=[('open', 'open'), ('approved', 'approved'), ('merged', 'merged'), ('rejected', 'rejected')], default='open', max_length=10)),
                ('decided_at', models.DateTimeField(blank=True, null=True)),
                ('auto_accepted', models.BooleanField(default=False)),
                ('reason', models.TextField(blank=True, help_text='why it was rejected')),
                ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.organization')),
                ('proposed_by', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='accounts.apitoken')),
                ('proposed_by_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('result_fragment', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='contexts.fragment')),
                ('source_fragment', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='contexts.fragment')),
                ('target_scope', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.scope')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['org', 'state', 'created_at'], name='proposal_org_state')],
                'constraints': [models.UniqueConstraint(fields=('org', 'public_id'), name='proposal_public_id'), models.UniqueConstraint(fields=('org', 'id'), name='proposal_org_key')],
            },
        ),
        migrations.RunSQL(ADD_FKS, DROP_FKS),
    ]
