from django.db import migrations


class Migration(migrations.Migration):
    """Retrieval cites sources with their repository; let the retrieval role read it."""

    dependencies = [("contexts", "0005_retrieval_traces")]

    operations = [
        migrations.RunSQL("GRANT SELECT ON accounts_repository TO contexts_retrieval",
                          "REVOKE SELECT ON accounts_repository FROM contexts_retrieval"),
    ]
