"""Owners from the repository (issue 38): the owner a document's repository names for it
(CODEOWNERS, front matter, git history, the scope's tech lead), where that came from, and the
front matter's own word. Filled by the next ingest or sync of each source."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contexts', '0033_document_origins'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='sourcedocument',
            name='declared_owner',
            field=models.CharField(blank=True, default='', help_text="the front matter's owner: as written", max_length=150),
        ),
        migrations.AddField(
            model_name='sourcedocument',
            name='owner',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='sourcedocument',
            name='owner_source',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
    ]
