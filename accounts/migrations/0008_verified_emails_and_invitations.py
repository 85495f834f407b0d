"""Verified e-mail addresses and invitations (security issue 37).

Existing accounts start unverified — an address typed by an administrator proves nothing, and
nothing recorded says who typed the others — with one exception: an account linked to the
identity provider whose provider stated ``email_verified`` for the account's present address
(that is what a sign-in records from now on too). Staff and superuser accounts are never
linked by e-mail whatever this says (``contexts.governance.identity``).
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def provider_verified(apps, schema_editor):
    ExternalIdentity = apps.get_model("accounts", "ExternalIdentity")
    VerifiedEmail = apps.get_model("accounts", "VerifiedEmail")
    seen: set[int] = set()
    for identity in (ExternalIdentity.objects.filter(email_verified=True)
                     .exclude(email="").select_related("user").order_by("pk")):
        user = identity.user
        if user.pk in seen or user.email.lower() != identity.email.lower():
            continue
        seen.add(user.pk)
        VerifiedEmail.objects.create(user=user, email=user.email, how="identity provider",
                                     verified_at=identity.last_login_at or identity.created_at)


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0007_hand_roles_of_existing_memberships'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='VerifiedEmail',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('email', models.EmailField(max_length=254)),
                ('how', models.CharField(help_text='how the owner proved it: the e-mailed set-password link, the identity provider, the operator', max_length=40)),
                ('verified_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='verified_email', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Invitation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('public_id', models.CharField(db_index=True, editable=False, max_length=32)),
                ('identifier', models.CharField(max_length=254)),
                ('role', models.CharField(choices=[('viewer', 'viewer'), ('curator', 'curator'), ('tech_lead', 'tech lead'), ('admin', 'admin')], default='viewer', max_length=16)),
                ('state', models.CharField(choices=[('pending', 'pending'), ('accepted', 'accepted'), ('declined', 'declined'), ('withdrawn', 'withdrawn')], default='pending', max_length=12)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('answered_at', models.DateTimeField(blank=True, null=True)),
                ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='accounts.organization')),
                ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
                'indexes': [models.Index(fields=['user', 'state'], name='accounts_in_user_id_c7ff05_idx')],
                'constraints': [models.UniqueConstraint(fields=('org', 'public_id'), name='invitation_public_id')],
            },
        ),
        migrations.RunPython(provider_verified, migrations.RunPython.noop),
    ]
