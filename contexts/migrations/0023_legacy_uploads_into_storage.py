"""Upload jobs still queued or running when this release is installed name a folder on the
disk of the node that took the upload (``MEDIA_ROOT/uploads/<job>/``). Copy those files, when
this node has them, into the uploads storage and point the job at their keys, so that the job
runs on any worker after the upgrade. A job whose folder is elsewhere keeps its path and fails
when it runs, saying to upload the files again (``contexts.ingestion.jobs``). The folders are
left in place: delete ``MEDIA_ROOT/uploads/`` once the jobs are done (docs/operations.md)."""

from django.db import migrations

UNFINISHED = ("queued", "running")


def adopt(apps, schema_editor) -> None:
    from contexts.services.uploads import adopt_legacy_folder

    job_model = apps.get_model("contexts", "IngestionJob")
    legacy = job_model.objects.filter(source_kind="upload", state__in=UNFINISHED,
                                      source__startswith="/")
    for job in legacy.only("org_id", "public_id", "source"):
        source = adopt_legacy_folder(job.org_id, job.public_id, job.source)
        if source is not None:
            job_model.objects.filter(pk=job.pk).update(source=source)


class Migration(migrations.Migration):
    dependencies = [("contexts", "0022_uploads_in_postgres")]

    operations = [migrations.RunPython(adopt, migrations.RunPython.noop)]
