"""A source conflict's answers (issue 38, ADR 0020): keep the curated text, take the upstream
text, edit the merge — and the source settling it by itself. Choices only: no data changes."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('contexts', '0034_document_owners'),
    ]

    operations = [
        migrations.AlterField(
            model_name='nudge',
            name='answer',
            field=models.CharField(blank=True, choices=[('still_accurate', 'still accurate'), ('edited', 'edited'), ('retired', 'retired'), ('handed_over', 'handed over'), ('kept_mine', 'kept the curated text'), ('took_upstream', 'took the upstream text'), ('edited_merge', 'edited the merge'), ('source_settled', 'settled by the source')], max_length=16),
        ),
    ]
