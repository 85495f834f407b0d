"""Fragment.packed_tokens: the token count of the text a bundle carries, stored on save so that
retrieval does not count it per request; existing rows are counted here."""

from django.db import migrations, models

from contexts.kernel.compression import packed_tokens

BATCH = 1000


def count_existing(apps, schema_editor) -> None:
    Fragment = apps.get_model("contexts", "Fragment")
    rows = Fragment.objects.filter(packed_tokens__isnull=True).only("id", "body", "heading_path")
    batch = []
    for fragment in rows.iterator(chunk_size=BATCH):
        fragment.packed_tokens = packed_tokens(fragment.body, fragment.heading_path)
        batch.append(fragment)
        if len(batch) >= BATCH:
            Fragment.objects.bulk_update(batch, ["packed_tokens"])
            batch = []
    Fragment.objects.bulk_update(batch, ["packed_tokens"])


class Migration(migrations.Migration):

    dependencies = [
        ("contexts", "0013_rls_sources_and_pins"),
    ]

    operations = [
        migrations.AddField(
            model_name="fragment",
            name="packed_tokens",
            field=models.PositiveIntegerField(
                blank=True, editable=False, null=True,
                help_text="tokens of the text a bundle carries (contexts.kernel.compression); set on save"),
        ),
        migrations.RunPython(count_existing, migrations.RunPython.noop),
    ]
