"""Trace candidates stored column-wise (``RetrievalTrace.stage_table``, same database column)."""

from django.db import migrations, models


def _table_of(rows):
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return {"columns": columns, "rows": [[row.get(column) for column in columns] for row in rows]}


def _expand(table):
    columns = table.get("columns", [])
    return [dict(zip(columns, row, strict=True)) for row in table.get("rows", [])]


def _convert(apps, want_table: bool) -> None:
    trace = apps.get_model("contexts", "RetrievalTrace")
    batch = []
    for row in trace.objects.only("id", "stage_table").iterator(chunk_size=500):
        value = row.stage_table
        if want_table and isinstance(value, list):
            row.stage_table = _table_of(value)
        elif not want_table and isinstance(value, dict):
            row.stage_table = _expand(value)
        else:
            continue
        batch.append(row)
        if len(batch) >= 500:
            trace.objects.bulk_update(batch, ["stage_table"])
            batch = []
    if batch:
        trace.objects.bulk_update(batch, ["stage_table"])


def to_tables(apps, schema_editor) -> None:
    _convert(apps, want_table=True)


def to_lists(apps, schema_editor) -> None:
    _convert(apps, want_table=False)


class Migration(migrations.Migration):
    dependencies = [("contexts", "0014_fragment_packed_tokens")]

    operations = [
        # The column keeps its name: only the model's view of it changes.
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RenameField("retrievaltrace", "candidates", "stage_table"),
            migrations.AlterField("retrievaltrace", "stage_table",
                                  models.JSONField(default=dict, db_column="candidates")),
        ]),
        migrations.RunPython(to_tables, to_lists),
    ]
