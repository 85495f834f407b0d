"""A nudge's public id (``nud_…``): ``GET /api/fragments/{id}`` lists a fragment's open nudges and
the e-mailed answer links name one, and integer ids never leave the server (docs/data-model.md).

The column is added empty, every existing nudge is given its own id, then the column takes its
default for new rows and the ``(org, public_id)`` unique constraint (the tenant pattern of
``accounts.models.tenant_public_id``)."""

from django.db import migrations, models

import contexts.models.governance


def fill_public_ids(apps, schema_editor) -> None:
    nudge_model = apps.get_model("contexts", "Nudge")
    batch = []
    for nudge in nudge_model.objects.filter(public_id="").only("pk").iterator(chunk_size=2000):
        nudge.public_id = contexts.models.governance.nudge_public_id()
        batch.append(nudge)
        if len(batch) >= 2000:
            nudge_model.objects.bulk_update(batch, ["public_id"])
            batch = []
    if batch:
        nudge_model.objects.bulk_update(batch, ["public_id"])


class Migration(migrations.Migration):

    dependencies = [
        ('contexts', '0035_source_conflict_answers'),
    ]

    operations = [
        migrations.AddField(
            model_name='nudge',
            name='public_id',
            field=models.CharField(default='', editable=False, max_length=32),
            preserve_default=False,
        ),
        migrations.RunPython(fill_public_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='nudge',
            name='public_id',
            field=models.CharField(db_index=True, editable=False, max_length=32,
                                   default=contexts.models.governance.nudge_public_id),
        ),
        migrations.AddConstraint(
            model_name='nudge',
            constraint=models.UniqueConstraint(fields=('org', 'public_id'), name='nudge_public_id'),
        ),
    ]
