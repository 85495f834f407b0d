"""Git sources (issue 24; docs/sources.md): the ``contexts_source`` table and the commit a
source document was last read at.

A tenant table like every other: ``org_id`` NOT NULL, its keys with the organization, its
repository a composite foreign key ``(org_id, repository_id) → (org_id, id)`` (migration
0024). Retrieval reads three of its columns — to put a permalink in a citation, in the same
statement that reads the citations (``contexts/retrieval/returned.py``) — so the retrieval role
gets those, under row-level security like the documents it is joined to (0013): a source is
visible when its repository's scope is among the allowed ones, or when a document of its
repository is (a fragment shared through a context). The application role sees every row
(``application_rows``, as in 0019).
"""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from contexts.stack.db_roles import APPLICATION_GROUP

ROLE = "contexts_retrieval"
APP = APPLICATION_GROUP
ALLOWED = "NULLIF(current_setting('app.allowed_scopes', true), '')::int[]"

FORWARD = f"""
ALTER TABLE contexts_source ADD CONSTRAINT contexts_source_repository_org_fk
    FOREIGN KEY (org_id, repository_id) REFERENCES accounts_repository (org_id, id)
    DEFERRABLE INITIALLY DEFERRED;
CREATE OR REPLACE FUNCTION contexts_source_readable(repository bigint) RETURNS boolean
    LANGUAGE plpgsql STABLE AS
    $$ BEGIN RETURN EXISTS (SELECT 1 FROM accounts_repository
                            WHERE id = repository AND scope_id = ANY({ALLOWED}))
                    OR EXISTS (SELECT 1 FROM contexts_sourcedocument
                               WHERE repository_id = repository);
    END $$;
GRANT SELECT (org_id, repository_id, web_url_template) ON contexts_source TO {ROLE};
ALTER TABLE contexts_source ENABLE ROW LEVEL SECURITY;
CREATE POLICY retrieval_scopes ON contexts_source FOR SELECT TO {ROLE}
    USING (contexts_source_readable(repository_id));
CREATE POLICY application_rows ON contexts_source FOR ALL TO {APP}
    USING (true) WITH CHECK (true);
"""
BACKWARD = f"""
DROP POLICY IF EXISTS application_rows ON contexts_source;
DROP POLICY IF EXISTS retrieval_scopes ON contexts_source;
ALTER TABLE contexts_source DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON contexts_source FROM {ROLE};
DROP FUNCTION IF EXISTS contexts_source_readable(bigint);
ALTER TABLE contexts_source DROP CONSTRAINT IF EXISTS contexts_source_repository_org_fk;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_sessions_and_proposal_policy'),
        ('contexts', '0030_proposals'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='sourcedocument',
            name='source_commit',
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.CreateModel(
            name='Source',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.CharField(db_index=True, editable=False, max_length=32)),
                ('kind', models.CharField(choices=[('git', 'git repository')], default='git', max_length=8)),
                ('url', models.CharField(help_text='a local path or any URL git can clone', max_length=1000)),
                ('branch', models.CharField(default='main', max_length=255)),
                ('include', models.JSONField(blank=True, default=list, help_text='gitignore-style patterns; empty: every file')),
                ('exclude', models.JSONField(blank=True, default=list, help_text='gitignore-style patterns left out')),
                ('interval_seconds', models.PositiveIntegerField(default=900, validators=[django.core.validators.MinValueValidator(60)])),
                ('web_url_template', models.CharField(blank=True, help_text='a permalink per citation, e.g. https://github.com/o/r/blob/{commit}/{path}#L{start_line}-L{end_line}', max_length=1000)),
                ('last_commit', models.CharField(blank=True, help_text='the commit applied completely, last', max_length=64)),
                ('last_synced_at', models.DateTimeField(blank=True, null=True)),
                ('next_sync_at', models.DateTimeField(blank=True, default=django.utils.timezone.now, null=True)),
                ('state', models.CharField(choices=[('idle', 'idle'), ('syncing', 'syncing'), ('failing', 'failing')], default='idle', max_length=8)),
                ('last_error', models.TextField(blank=True)),
                ('last_summary', models.JSONField(blank=True, default=dict)),
                ('files_count', models.PositiveIntegerField(default=0)),
                ('fragments_count', models.PositiveIntegerField(default=0)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sources', to='accounts.organization')),
                ('repository', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='sources', to='accounts.repository')),
            ],
            options={
                'ordering': ['created_at', 'id'],
                'indexes': [models.Index(fields=['next_sync_at'], name='source_next_sync')],
                'constraints': [models.UniqueConstraint(fields=('org', 'public_id'), name='source_public_id'), models.UniqueConstraint(fields=('org', 'id'), name='source_org_key'), models.UniqueConstraint(fields=('org', 'repository'), name='one_source_per_repository')],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
