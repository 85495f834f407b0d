"""Uploads live in PostgreSQL (``contexts_upload``), not on the web node's disk (issue 21): a
worker that shares no disk with the web node reads them by key. Tenant data: the organization
is in every row and in the unique key. The application role gets DML on it through the default
privileges of migration 0019; the retrieval role gets nothing."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_scope_restrict'),
        ('contexts', '0021_retrieval_role_reads_persona_weights'),
    ]

    operations = [
        migrations.CreateModel(
            name='UploadBlob',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=512)),
                ('content', models.BinaryField()),
                ('size', models.PositiveIntegerField()),
                ('sha256', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('org', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.organization')),
            ],
            options={
                'db_table': 'contexts_upload',
                'constraints': [models.UniqueConstraint(fields=('org', 'key'), name='one_upload_per_key')],
            },
        ),
        migrations.AlterField(
            model_name='ingestionjob',
            name='source',
            field=models.CharField(help_text="directory path, or the key prefix of the job's files in the uploads storage", max_length=1000),
        ),
    ]
