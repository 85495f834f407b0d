"""Curation on a living codebase (issue 38, ADR 0020): where a source fragment stands against its
file (`source_state`), the base of a three-way merge (`SourcePointer.base_text`), which source
brought a document (`origin`), what a fragment rests on (`evidence`), who verified it, and nudge
kinds (one open nudge per fragment and kind)."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


# Existing source fragments: the base of a later merge is the text the file last gave them (the
# newest version no person wrote), and they stand in sync with their file.
BASES = """
UPDATE contexts_sourcepointer p SET base_text = COALESCE(
    (SELECT v.body FROM contexts_fragmentversion v
      WHERE v.fragment_id = p.fragment_id AND v.editor_id IS NULL
      ORDER BY v.number DESC LIMIT 1), f.body)
  FROM contexts_fragment f WHERE f.id = p.fragment_id;
UPDATE contexts_fragment f SET source_state = 'in_sync'
 WHERE EXISTS (SELECT 1 FROM contexts_sourcepointer p WHERE p.fragment_id = f.id);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0007_hand_roles_of_existing_memberships'),
        ('contexts', '0031_git_sources'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='nudge',
            name='one_open_nudge_per_fragment',
        ),
        migrations.AddField(
            model_name='fragment',
            name='evidence',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='fragment',
            name='evidence_paths',
            field=django.contrib.postgres.fields.ArrayField(base_field=models.CharField(max_length=1000), blank=True, default=list, size=None),
        ),
        migrations.AddField(
            model_name='fragment',
            name='evidence_state',
            field=models.CharField(blank=True, choices=[('current', 'current'), ('changed', 'changed'), ('missing', 'missing')], default='', max_length=10),
        ),
        migrations.AddField(
            model_name='fragment',
            name='owner_set_by_person',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='fragment',
            name='source_state',
            field=models.CharField(blank=True, choices=[('in_sync', 'in sync'), ('merged', 'merged'), ('conflict', 'conflict'), ('gone', 'gone')], default='', max_length=10),
        ),
        migrations.AddField(
            model_name='fragment',
            name='verified_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='nudge',
            name='detail',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='nudge',
            name='kind',
            field=models.CharField(choices=[('stale', 'stale'), ('source_conflict', 'source conflict'), ('source_gone', 'source gone'), ('evidence_changed', 'evidence changed'), ('verify_due', 'verification due')], default='stale', max_length=20),
        ),
        migrations.AddField(
            model_name='sourcedocument',
            name='origin',
            field=models.CharField(blank=True, db_index=True, default='', max_length=1100),
        ),
        migrations.AddField(
            model_name='sourcepointer',
            name='base_commit',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='sourcepointer',
            name='base_text',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddIndex(
            model_name='fragment',
            index=django.contrib.postgres.indexes.GinIndex(fields=['evidence_paths'], name='fragment_evidence_paths_gin'),
        ),
        migrations.AddConstraint(
            model_name='nudge',
            constraint=models.UniqueConstraint(condition=models.Q(('state', 'answered'), _negated=True), fields=('org', 'fragment', 'kind'), name='one_open_nudge_per_fragment_kind'),
        ),
        migrations.RunSQL(BASES, migrations.RunSQL.noop),
    ]
