"""Every tenant table carries the organization, in its keys and in the foreign keys between
tenant tables (issue 21, item 5; docs/scale-out.md, ``contexts/models/tenancy.py``).

- ``org_id`` (NOT NULL) is added to the tables that lacked it — fragment versions, pins, links,
  source pointers, nudges, subscriptions and the two many-to-many tables (``Fragment.contexts``
  and ``Context.owners``, now explicit through models on the tables Django made, rows kept) —
  and filled from the row each hangs off; the audit log's ``org_id`` becomes NOT NULL (rows
  without one are attributed through the object they name). The immutability triggers of
  versions and audit events are off for the fill only.
- Unique keys hold ``org_id``; a public id or a fragment's uid is unique per organization and
  indexed alone.
- Foreign keys between tenant tables are composite, ``(org_id, x_id) → (org_id, id)``, against
  a ``UNIQUE (org_id, id)`` of the referenced table, deferred like Django's; Django's own
  single-column constraints on those fields are dropped (``db_constraint=False``) and Django
  keeps doing ``on_delete`` itself. The embedding table's foreign key to its fragment (SQL of
  migration 0002, ``ON DELETE CASCADE``) becomes composite too.
- One reference crosses organizations on purpose: a subscription's context may be another
  organization's. It has no database constraint (a distributed database cannot check one).
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

COMPOSITE_FKS = [
    ("contexts_fragment", "scope_id", "accounts_scope"),
    ("contexts_fragment", "superseded_by_id", "contexts_fragment"),
    ("contexts_fragment_contexts", "fragment_id", "contexts_fragment"),
    ("contexts_fragment_contexts", "context_id", "contexts_context"),
    ("contexts_fragmentversion", "fragment_id", "contexts_fragment"),
    ("contexts_pin", "fragment_id", "contexts_fragment"),
    ("contexts_pin", "scope_id", "accounts_scope"),
    ("contexts_link", "source_id", "contexts_fragment"),
    ("contexts_link", "target_id", "contexts_fragment"),
    ("contexts_context", "scope_id", "accounts_scope"),
    ("contexts_context", "home_id", "accounts_scope"),
    ("contexts_context_owners", "context_id", "contexts_context"),
    ("contexts_contextsubscription", "subscriber_id", "accounts_scope"),
    ("contexts_dedupcandidate", "fragment_a_id", "contexts_fragment"),
    ("contexts_dedupcandidate", "fragment_b_id", "contexts_fragment"),
    ("contexts_dedupcandidate", "kept_id", "contexts_fragment"),
    ("contexts_ingestionjob", "scope_id", "accounts_scope"),
    ("contexts_ingestionjob", "context_id", "contexts_context"),
    ("contexts_sourcedocument", "repository_id", "accounts_repository"),
    ("contexts_sourcepointer", "fragment_id", "contexts_fragment"),
    ("contexts_sourcepointer", "document_id", "contexts_sourcedocument"),
    ("contexts_retrievaltrace", "token_id", "accounts_apitoken"),
    ("contexts_auditevent", "actor_token_id", "accounts_apitoken"),
    ("contexts_nudge", "fragment_id", "contexts_fragment"),
]


def fk_name(table: str, column: str) -> str:
    return f"{table}_{column.removesuffix('_id')}_org_fk"


ADD_FKS = "".join(
    f"ALTER TABLE {table} ADD CONSTRAINT {fk_name(table, column)} FOREIGN KEY (org_id, {column})"
    f" REFERENCES {ref} (org_id, id) DEFERRABLE INITIALLY DEFERRED;\n"
    for table, column, ref in COMPOSITE_FKS) + """
ALTER TABLE contexts_embedding DROP CONSTRAINT IF EXISTS contexts_embedding_fragment_id_fkey;
ALTER TABLE contexts_embedding ADD CONSTRAINT contexts_embedding_fragment_org_fk
    FOREIGN KEY (org_id, fragment_id) REFERENCES contexts_fragment (org_id, id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
"""
DROP_FKS = "".join(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {fk_name(table, column)};\n"
                   for table, column, _ in COMPOSITE_FKS) + """
ALTER TABLE contexts_embedding DROP CONSTRAINT IF EXISTS contexts_embedding_fragment_org_fk;
ALTER TABLE contexts_embedding ADD CONSTRAINT contexts_embedding_fragment_id_fkey
    FOREIGN KEY (fragment_id) REFERENCES contexts_fragment (id)
    ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
"""

# table → (parent table, the column naming the parent): where a new org_id comes from.
FILL_FROM = {
    "contexts_fragmentversion": ("contexts_fragment", "fragment_id"),
    "contexts_pin": ("contexts_fragment", "fragment_id"),
    "contexts_link": ("contexts_fragment", "source_id"),
    "contexts_nudge": ("contexts_fragment", "fragment_id"),
    "contexts_sourcepointer": ("contexts_sourcedocument", "document_id"),
    "contexts_contextsubscription": ("accounts_scope", "subscriber_id"),
    "contexts_fragment_contexts": ("contexts_fragment", "fragment_id"),
    "contexts_context_owners": ("contexts_context", "context_id"),
}
# An audit event names its object by public id; events without an organization (none are
# written so, but the column allowed it) take the one of the object they name.
AUDIT_OBJECTS = {
    "fragment": "contexts_fragment",
    "scope": "accounts_scope",
    "ingestionjob": "contexts_ingestionjob",
    "apitoken": "accounts_apitoken",
}

FILL = (
    "ALTER TABLE contexts_fragmentversion DISABLE TRIGGER fragmentversion_immutable;\n"
    "ALTER TABLE contexts_auditevent DISABLE TRIGGER auditevent_immutable;\n"
    + "".join(f"UPDATE {table} x SET org_id = p.org_id FROM {parent} p WHERE p.id = x.{column};\n"
              for table, (parent, column) in FILL_FROM.items())
    + "".join(f"UPDATE contexts_auditevent e SET org_id = o.org_id FROM {table} o"
              f" WHERE e.org_id IS NULL AND e.object_type = '{kind}'"
              f" AND o.public_id = e.object_id;\n"
              for kind, table in AUDIT_OBJECTS.items())
    # The updates queue deferred foreign-key checks: fire them now, or the ALTER TABLEs that
    # follow in this transaction fail with "pending trigger events".
    + "SET CONSTRAINTS ALL IMMEDIATE; SET CONSTRAINTS ALL DEFERRED;\n"
    "ALTER TABLE contexts_fragmentversion ENABLE TRIGGER fragmentversion_immutable;\n"
    "ALTER TABLE contexts_auditevent ENABLE TRIGGER auditevent_immutable;\n"
    """DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM contexts_auditevent WHERE org_id IS NULL) THEN
        RAISE EXCEPTION 'contexts_auditevent has rows whose organization cannot be told from '
            'the object they name (SELECT * FROM contexts_auditevent WHERE org_id IS NULL): '
            'set their org_id, or delete them, and migrate again';
    END IF;
END $$;
"""
)


def org_field(null=False, db_index=False):
    return models.ForeignKey(db_index=db_index, editable=False, null=null,
                             on_delete=django.db.models.deletion.CASCADE, related_name='+',
                             to='accounts.organization')


def fragment_fk(related_name, on_delete=django.db.models.deletion.CASCADE, **kwargs):
    return models.ForeignKey(db_constraint=False, on_delete=on_delete, related_name=related_name,
                             to='contexts.fragment', **kwargs)


def public_id():
    return models.CharField(db_index=True, editable=False, max_length=32)


NEW_ORG = ("contextsubscription", "fragmentversion", "link", "nudge", "pin", "sourcepointer",
           "fragmentcontext", "contextowner")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_tenant_org_everywhere'),
        ('contexts', '0023_legacy_uploads_into_storage'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # --- the two many-to-many tables Django made, as explicit models, rows kept
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='FragmentContext',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('fragment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='contexts.fragment')),
                        ('context', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='contexts.context')),
                    ],
                    options={
                        'db_table': 'contexts_fragment_contexts',
                        'unique_together': {('fragment', 'context')},
                    },
                ),
                migrations.AlterField(
                    model_name='fragment',
                    name='contexts',
                    field=models.ManyToManyField(blank=True, related_name='fragments', through='contexts.FragmentContext', to='contexts.context'),
                ),
                migrations.CreateModel(
                    name='ContextOwner',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('context', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='ownerships', to='contexts.context')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'contexts_context_owners',
                        'unique_together': {('context', 'user')},
                    },
                ),
                migrations.AlterField(
                    model_name='context',
                    name='owners',
                    field=models.ManyToManyField(blank=True, related_name='owned_contexts', through='contexts.ContextOwner', to=settings.AUTH_USER_MODEL),
                ),
            ],
        ),
        migrations.AlterUniqueTogether(name='fragmentcontext', unique_together=set()),
        migrations.AlterUniqueTogether(name='contextowner', unique_together=set()),
        # --- the old keys go first (they would be checked against every filled row)
        migrations.RemoveConstraint(model_name='contextsubscription', name='one_subscription'),
        migrations.RemoveConstraint(model_name='dedupcandidate', name='one_dedup_pair'),
        migrations.RemoveConstraint(model_name='fragmentversion', name='one_version_number'),
        migrations.RemoveConstraint(model_name='link', name='one_link'),
        migrations.RemoveConstraint(model_name='nudge', name='one_open_nudge_per_fragment'),
        migrations.RemoveConstraint(model_name='pin', name='one_pin'),
        migrations.RemoveConstraint(model_name='sourcepointer', name='one_pointer_per_anchor'),
        # --- org_id where it was missing, filled from the parent row, then NOT NULL
        *[migrations.AddField(model_name=name, name='org',
                              field=org_field(null=True, db_index=name == 'nudge'))
          for name in NEW_ORG],
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        *[migrations.AlterField(model_name=name, name='org',
                                field=org_field(db_index=name == 'nudge'))
          for name in NEW_ORG],
        migrations.AlterField(
            model_name='auditevent',
            name='org',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='audit_events', to='accounts.organization'),
        ),
        # --- Django's single-column foreign keys between tenant tables go (composite below)
        migrations.AlterField(
            model_name='fragmentcontext',
            name='fragment',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='contexts.fragment'),
        ),
        migrations.AlterField(
            model_name='fragmentcontext',
            name='context',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='contexts.context'),
        ),
        migrations.AlterField(
            model_name='contextowner',
            name='context',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='ownerships', to='contexts.context'),
        ),
        migrations.AlterField(
            model_name='auditevent',
            name='actor_token',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='accounts.apitoken'),
        ),
        migrations.AlterField(
            model_name='context',
            name='home',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='defined_contexts', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='context',
            name='scope',
            field=models.ForeignKey(db_constraint=False, editable=False, on_delete=django.db.models.deletion.RESTRICT, related_name='+', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='contextsubscription',
            name='context',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='subscriptions', to='contexts.context'),
        ),
        migrations.AlterField(
            model_name='contextsubscription',
            name='subscriber',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='subscriptions', to='accounts.scope'),
        ),
        migrations.AlterField(model_name='dedupcandidate', name='fragment_a', field=fragment_fk('+')),
        migrations.AlterField(model_name='dedupcandidate', name='fragment_b', field=fragment_fk('+')),
        migrations.AlterField(
            model_name='dedupcandidate',
            name='kept',
            field=fragment_fk('+', on_delete=django.db.models.deletion.SET_NULL, blank=True, null=True, help_text='the canonical fragment, once merged'),
        ),
        migrations.AlterField(
            model_name='fragment',
            name='scope',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.RESTRICT, related_name='fragments', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='fragment',
            name='superseded_by',
            field=fragment_fk('supersedes', on_delete=django.db.models.deletion.SET_NULL, blank=True, null=True),
        ),
        migrations.AlterField(model_name='fragmentversion', name='fragment', field=fragment_fk('versions')),
        migrations.AlterField(
            model_name='ingestionjob',
            name='context',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='contexts.context'),
        ),
        migrations.AlterField(
            model_name='ingestionjob',
            name='scope',
            field=models.ForeignKey(db_constraint=False, help_text='home scope of the fragments this job writes', on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='accounts.scope'),
        ),
        migrations.AlterField(model_name='link', name='source', field=fragment_fk('links_out')),
        migrations.AlterField(model_name='link', name='target', field=fragment_fk('links_in')),
        migrations.AlterField(model_name='nudge', name='fragment', field=fragment_fk('nudges')),
        migrations.AlterField(model_name='pin', name='fragment', field=fragment_fk('pins')),
        migrations.AlterField(
            model_name='pin',
            name='scope',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='pins', to='accounts.scope'),
        ),
        migrations.AlterField(
            model_name='retrievaltrace',
            name='token',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='traces', to='accounts.apitoken'),
        ),
        migrations.AlterField(
            model_name='sourcedocument',
            name='repository',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='documents', to='accounts.repository'),
        ),
        migrations.AlterField(
            model_name='sourcepointer',
            name='document',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='pointers', to='contexts.sourcedocument'),
        ),
        migrations.AlterField(model_name='sourcepointer', name='fragment', field=fragment_fk('sources')),
        # --- public ids and uids unique per organization, indexed alone
        migrations.AlterField(model_name='context', name='public_id', field=public_id()),
        migrations.AlterField(model_name='fragment', name='public_id', field=public_id()),
        migrations.AlterField(model_name='ingestionjob', name='public_id', field=public_id()),
        migrations.AlterField(model_name='retrievaltrace', name='public_id', field=public_id()),
        migrations.AlterField(
            model_name='fragment',
            name='uid',
            field=models.UUIDField(db_index=True, default=uuid.uuid4, editable=False, help_text='UUID5 of source + anchor for ingested fragments'),
        ),
        # --- the keys, with the organization
        migrations.AddConstraint(
            model_name='contextsubscription',
            constraint=models.UniqueConstraint(fields=('org', 'context', 'subscriber'), name='one_subscription'),
        ),
        migrations.AddConstraint(
            model_name='dedupcandidate',
            constraint=models.UniqueConstraint(fields=('org', 'fragment_a', 'fragment_b'), name='one_dedup_pair'),
        ),
        migrations.AddConstraint(
            model_name='fragmentversion',
            constraint=models.UniqueConstraint(fields=('org', 'fragment', 'number'), name='one_version_number'),
        ),
        migrations.AddConstraint(
            model_name='link',
            constraint=models.UniqueConstraint(fields=('org', 'source', 'target', 'kind'), name='one_link'),
        ),
        migrations.AddConstraint(
            model_name='nudge',
            constraint=models.UniqueConstraint(condition=models.Q(('state', 'answered'), _negated=True), fields=('org', 'fragment'), name='one_open_nudge_per_fragment'),
        ),
        migrations.AddConstraint(
            model_name='pin',
            constraint=models.UniqueConstraint(fields=('org', 'fragment', 'scope'), name='one_pin'),
        ),
        migrations.AddConstraint(
            model_name='sourcepointer',
            constraint=models.UniqueConstraint(fields=('org', 'document', 'anchor'), name='one_pointer_per_anchor'),
        ),
        migrations.AddConstraint(
            model_name='fragmentcontext',
            constraint=models.UniqueConstraint(fields=('org', 'fragment', 'context'), name='one_fragment_context'),
        ),
        migrations.AddConstraint(
            model_name='contextowner',
            constraint=models.UniqueConstraint(fields=('org', 'context', 'user'), name='one_context_owner'),
        ),
        migrations.AddConstraint(
            model_name='fragment',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='fragment_org_key'),
        ),
        migrations.AddConstraint(
            model_name='fragment',
            constraint=models.UniqueConstraint(fields=('org', 'uid'), name='fragment_uid'),
        ),
        migrations.AddConstraint(
            model_name='fragment',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='fragment_public_id'),
        ),
        migrations.AddConstraint(
            model_name='context',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='context_org_key'),
        ),
        migrations.AddConstraint(
            model_name='context',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='context_public_id'),
        ),
        migrations.AddConstraint(
            model_name='context',
            constraint=models.UniqueConstraint(fields=('org', 'scope'), name='context_scope'),
        ),
        migrations.AddConstraint(
            model_name='sourcedocument',
            constraint=models.UniqueConstraint(fields=('org', 'id'), name='sourcedocument_org_key'),
        ),
        migrations.AddConstraint(
            model_name='ingestionjob',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='ingestionjob_public_id'),
        ),
        migrations.AddConstraint(
            model_name='retrievaltrace',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='retrievaltrace_public_id'),
        ),
        # --- foreign keys between tenant tables, with the organization
        migrations.RunSQL(ADD_FKS, DROP_FKS),
    ]
