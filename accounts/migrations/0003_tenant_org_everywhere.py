"""Every tenant table carries the organization, in its keys and in the foreign keys between
tenant tables (issue 21, item 5; docs/scale-out.md, ``contexts/models/tenancy.py``).

- An organization's own scope row gets its ``org_id`` (it was NULL: the scope was written
  before the organization row; ``ScopedObject.save`` now takes the organization's id first).
- ``ApiToken.scopes`` gets an explicit through model on the table Django made for it
  (``accounts_apitoken_scopes``, rows kept) with an ``org_id`` filled from the token.
- Unique keys hold ``org_id``: a public id, a token prefix and an object's scope are unique per
  organization (and indexed alone for lookups).
- Foreign keys between tenant tables are composite, ``(org_id, x_id) → (org_id, id)``, against a
  ``UNIQUE (org_id, id)`` of the referenced table; Django's single-column constraints on those
  fields are dropped (``db_constraint=False``), Django keeps doing ``on_delete`` itself.
- The organization is a reference table: its foreign key to its scope row (a tenant table)
  loses its database constraint; the scope's ``org_id`` foreign key points back.
"""

import django.db.models.deletion
from django.db import migrations, models

# (table, column, referenced table): each becomes FOREIGN KEY (org_id, column) REFERENCES
# referenced (org_id, id), deferred like Django's own.
COMPOSITE_FKS = [
    ("accounts_scope", "parent_id", "accounts_scope"),
    ("accounts_repository", "scope_id", "accounts_scope"),
    ("accounts_persona", "scope_id", "accounts_scope"),
    ("accounts_session", "scope_id", "accounts_scope"),
    ("accounts_session", "repository_id", "accounts_repository"),
    ("accounts_session", "persona_id", "accounts_persona"),
    ("accounts_apitoken_scopes", "apitoken_id", "accounts_apitoken"),
    ("accounts_apitoken_scopes", "scope_id", "accounts_scope"),
]


def fk_name(table: str, column: str) -> str:
    return f"{table}_{column.removesuffix('_id')}_org_fk"


ADD_FKS = "".join(
    f"ALTER TABLE {table} ADD CONSTRAINT {fk_name(table, column)} FOREIGN KEY (org_id, {column})"
    f" REFERENCES {ref} (org_id, id) DEFERRABLE INITIALLY DEFERRED;\n"
    for table, column, ref in COMPOSITE_FKS)
DROP_FKS = "".join(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {fk_name(table, column)};\n"
                   for table, column, _ in COMPOSITE_FKS)

# The updates queue deferred foreign-key checks; fire them now, or the ALTER TABLEs that follow
# in this transaction fail with "pending trigger events".
CHECK_NOW = "SET CONSTRAINTS ALL IMMEDIATE; SET CONSTRAINTS ALL DEFERRED;"

FILL_SCOPES = f"""
UPDATE accounts_scope s SET org_id = o.id
  FROM accounts_organization o WHERE o.scope_id = s.id AND s.org_id IS NULL;
UPDATE accounts_scope s SET org_id = p.org_id
  FROM accounts_scope p WHERE p.id = s.parent_id AND s.org_id IS NULL;
{CHECK_NOW}
"""
FILL_TOKEN_SCOPES = f"""
UPDATE accounts_apitoken_scopes x SET org_id = t.org_id
  FROM accounts_apitoken t WHERE t.id = x.apitoken_id;
{CHECK_NOW}
"""


def public_id(**kwargs):
    return models.CharField(db_index=True, **{"max_length": 32, "editable": False, **kwargs})


def scope_fk():
    return models.ForeignKey(db_constraint=False, editable=False,
                             on_delete=django.db.models.deletion.RESTRICT, related_name='+',
                             to='accounts.scope')


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_scope_restrict'),
    ]

    operations = [
        # --- the organization of every scope row
        migrations.RunSQL(FILL_SCOPES, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name='scope',
            name='org',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scopes', to='accounts.organization'),
        ),
        # --- ApiToken.scopes: the table Django made, as an explicit model, rows kept
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='TokenScope',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('apitoken', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='bindings', to='accounts.apitoken')),
                        ('scope', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.scope')),
                    ],
                    options={
                        'db_table': 'accounts_apitoken_scopes',
                        'unique_together': {('apitoken', 'scope')},
                    },
                ),
                migrations.AlterField(
                    model_name='apitoken',
                    name='scopes',
                    field=models.ManyToManyField(related_name='tokens', through='accounts.TokenScope', to='accounts.scope'),
                ),
            ],
        ),
        migrations.AddField(
            model_name='tokenscope',
            name='org',
            field=models.ForeignKey(db_index=False, editable=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.organization'),
        ),
        migrations.RunSQL(FILL_TOKEN_SCOPES, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name='tokenscope',
            name='org',
            field=models.ForeignKey(db_index=False, editable=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.organization'),
        ),
        migrations.AlterUniqueTogether(name='tokenscope', unique_together=set()),
        migrations.AlterField(
            model_name='tokenscope',
            name='apitoken',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='bindings', to='accounts.apitoken'),
        ),
        migrations.AlterField(
            model_name='tokenscope',
            name='scope',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.scope'),
        ),
        # --- keys hold the organization
        migrations.AlterField(model_name='scope', name='public_id',
                              field=models.CharField(db_index=True, max_length=40)),
        migrations.AlterField(model_name='repository', name='public_id', field=public_id()),
        migrations.AlterField(model_name='persona', name='public_id', field=public_id()),
        migrations.AlterField(model_name='session', name='public_id', field=public_id()),
        migrations.AlterField(model_name='apitoken', name='public_id', field=public_id()),
        migrations.AlterField(
            model_name='apitoken',
            name='prefix',
            field=models.CharField(db_index=True, help_text='visible part of the token', max_length=16),
        ),
        migrations.AlterField(model_name='repository', name='scope', field=scope_fk()),
        migrations.AlterField(model_name='persona', name='scope', field=scope_fk()),
        migrations.AlterField(model_name='session', name='scope', field=scope_fk()),
        migrations.AlterField(
            model_name='organization',
            name='scope',
            field=models.OneToOneField(db_constraint=False, editable=False, on_delete=django.db.models.deletion.RESTRICT, related_name='+', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='scope',
            name='parent',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='children', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='session',
            name='persona',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='sessions', to='accounts.persona'),
        ),
        migrations.AlterField(
            model_name='session',
            name='repository',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='sessions', to='accounts.repository'),
        ),
        migrations.AddConstraint(
            model_name='scope',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='scope_org_key'),
        ),
        migrations.AddConstraint(
            model_name='scope',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='scope_public_id_per_org'),
        ),
        migrations.AddConstraint(
            model_name='repository',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='repository_org_key'),
        ),
        migrations.AddConstraint(
            model_name='repository',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='repository_public_id'),
        ),
        migrations.AddConstraint(
            model_name='repository',
            constraint=models.UniqueConstraint(fields=('org', 'scope'), name='repository_scope'),
        ),
        migrations.AddConstraint(
            model_name='persona',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='persona_org_key'),
        ),
        migrations.AddConstraint(
            model_name='persona',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='persona_public_id'),
        ),
        migrations.AddConstraint(
            model_name='persona',
            constraint=models.UniqueConstraint(fields=('org', 'scope'), name='persona_scope'),
        ),
        migrations.AddConstraint(
            model_name='session',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='session_public_id'),
        ),
        migrations.AddConstraint(
            model_name='session',
            constraint=models.UniqueConstraint(fields=('org', 'scope'), name='session_scope'),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='apitoken_org_key'),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='apitoken_public_id'),
        ),
        migrations.AddConstraint(
            model_name='apitoken',
            constraint=models.UniqueConstraint(fields=('org', 'prefix'), name='apitoken_prefix'),
        ),
        migrations.AddConstraint(
            model_name='tokenscope',
            constraint=models.UniqueConstraint(fields=('org', 'apitoken', 'scope'), name='one_token_scope'),
        ),
        # --- foreign keys between tenant tables, with the organization
        migrations.RunSQL(ADD_FKS, DROP_FKS),
    ]
