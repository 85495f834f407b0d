"""Secret findings (issue 22, item 2; ADR 0016; ``contexts.services.secrets``).

A tenant table: ``org_id`` NOT NULL, its public id unique with the organization, and its
references to other tenant tables (the job, the source document, the fragment) composite,
``(org_id, x_id) → (org_id, id)``, like every other (migration 0024). The job table gains the
``UNIQUE (org_id, id)`` such a key refers to. Like the change feed, the table is read outside
retrieval's row-level-security block only: no grant to ``contexts_retrieval``.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

COMPOSITE_FKS = [
    ("contexts_secretfinding", "job_id", "contexts_ingestionjob"),
    ("contexts_secretfinding", "document_id", "contexts_sourcedocument"),
    ("contexts_secretfinding", "fragment_id", "contexts_fragment"),
]


def fk_name(table: str, column: str) -> str:
    return f"{table}_{column.removesuffix('_id')}_org_fk"


ADD_FKS = "".join(
    f"ALTER TABLE {table} ADD CONSTRAINT {fk_name(table, column)} FOREIGN KEY (org_id, {column})"
    f" REFERENCES {ref} (org_id, id) DEFERRABLE INITIALLY DEFERRED;\n"
    for table, column, ref in COMPOSITE_FKS)
DROP_FKS = "".join(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {fk_name(table, column)};\n"
                   for table, column, _ in COMPOSITE_FKS)


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_tenant_org_everywhere"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contexts", "0026_ingestion_policy"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="ingestionjob",
            constraint=models.UniqueConstraint(fields=("org", "id"),
                                               name="ingestionjob_org_key"),
        ),
        migrations.CreateModel(
            name="SecretFinding",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("public_id", models.CharField(db_index=True, editable=False, max_length=32)),
                ("kind", models.CharField(help_text="the detector's name for it, e.g. 'AWS "
                                          "Access Key'", max_length=80)),
                ("action", models.CharField(choices=[
                    ("redacted", "stored with the secret replaced by a placeholder"),
                    ("refused", "not stored")], max_length=10)),
                ("origin", models.CharField(choices=[
                    ("ingestion", "ingested from a path"), ("upload", "uploaded"),
                    ("write", "written (API, MCP)"),
                    ("edit", "edited (console, nudge, admin)")], max_length=10)),
                ("path", models.CharField(blank=True, help_text="the file, for ingested and "
                                          "uploaded text", max_length=1000)),
                ("line", models.PositiveIntegerField(help_text="1-based, in the file (or in "
                                                     "the body written)")),
                ("fragment_version", models.PositiveIntegerField(blank=True, null=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("actor", models.ForeignKey(blank=True, null=True,
                                            on_delete=django.db.models.deletion.SET_NULL,
                                            related_name="+", to=settings.AUTH_USER_MODEL)),
                ("document", models.ForeignKey(blank=True, db_constraint=False, null=True,
                                               on_delete=django.db.models.deletion.SET_NULL,
                                               related_name="secret_findings",
                                               to="contexts.sourcedocument")),
                ("fragment", models.ForeignKey(blank=True, db_constraint=False, null=True,
                                               on_delete=django.db.models.deletion.SET_NULL,
                                               related_name="secret_findings",
                                               to="contexts.fragment")),
                ("job", models.ForeignKey(blank=True, db_constraint=False, null=True,
                                          on_delete=django.db.models.deletion.SET_NULL,
                                          related_name="secret_findings",
                                          to="contexts.ingestionjob")),
                ("org", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="+", to="accounts.organization")),
            ],
            options={
                "ordering": ["-created_at", "path", "line"],
                "indexes": [models.Index(fields=["org", "created_at"],
                                         name="secretfinding_org_time")],
                "constraints": [models.UniqueConstraint(fields=("org", "public_id"),
                                                        name="secretfinding_public_id")],
            },
        ),
        migrations.RunSQL(ADD_FKS, DROP_FKS),
    ]
