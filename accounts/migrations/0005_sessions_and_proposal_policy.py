"""Issue 23, items 4 and 5: agents open sessions (``Session.opened_by``, a composite foreign
key ``(org_id, opened_by_id) → accounts_apitoken (org_id, id)`` like every reference between
tenant tables), tokens may propose and be trusted (``may_propose``, ``auto_accept``), and each
organization and repository has a proposal policy (docs/adr/0017)."""

import django.db.models.deletion
from django.db import migrations, models


FK = ("ALTER TABLE accounts_session ADD CONSTRAINT accounts_session_opened_by_org_fk "
      "FOREIGN KEY (org_id, opened_by_id) REFERENCES accounts_apitoken (org_id, id) "
      "DEFERRABLE INITIALLY DEFERRED;")
DROP_FK = "ALTER TABLE accounts_session DROP CONSTRAINT IF EXISTS accounts_session_opened_by_org_fk;"


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_session_closed_at'),
    ]

    operations = [
        migrations.AddField(
            model_name='apitoken',
            name='auto_accept',
            field=models.BooleanField(default=False, help_text="trusted: its proposals are accepted at once where the scope's policy is auto-accept"),
        ),
        migrations.AddField(
            model_name='apitoken',
            name='may_propose',
            field=models.BooleanField(default=False, help_text='may propose new repository fragments directly'),
        ),
        migrations.AddField(
            model_name='organization',
            name='proposal_policy',
            field=models.CharField(choices=[('review', 'review'), ('auto-accept', 'auto-accept (trusted tokens)')], default='review', max_length=12),
        ),
        migrations.AddField(
            model_name='repository',
            name='proposal_policy',
            field=models.CharField(choices=[('review', 'review'), ('auto-accept', 'auto-accept (trusted tokens)')], default='review', max_length=12),
        ),
        migrations.AddField(
            model_name='session',
            name='opened_by',
            field=models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='opened_sessions', to='accounts.apitoken'),
        ),
        migrations.RunSQL(FK, DROP_FK),
    ]
