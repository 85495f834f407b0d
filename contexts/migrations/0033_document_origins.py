"""Which source brought each existing document (``SourceDocument.origin``, issue 38): a job or a
sync retires only documents of its own source, so the documents ingested before it must name one.

* A document of a repository that a git source follows, read at a commit (``source_commit``) —
  that source: ``git:<source public id>``.
* Otherwise the ingestion jobs into the document's scope are tried, the one whose run was under
  way when the document was last written first, then the others newest first:
  a path job whose walk would see the document now (its file exists under the job's root, on
  this node's disk) — ``path:<root>``; the upload job that wrote it — ``upload:<job source>``
  (a name no later upload uses: a new upload never retires it; uploading the same file again
  takes its path, as any later writer does).
* Else "" — which no job or sync ever prunes: such a document stays until a source brings its
  path again (and owns it from then on) or a person retires its fragments.

Guessing is never allowed to retire what was not the source's: a folder is named only when its
walk would see the file, so its next run does not prune it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from django.db import migrations
from django.utils import timezone


def _jobs_by_scope(job_model, repo_scopes: set[int]) -> dict:
    """Jobs newest first, by scope id — and, for the documents of no repository (the
    organization's and personas' scopes share them), by ``("org", org id)``."""
    jobs: dict = {}
    for job in job_model.objects.order_by("-created_at").only(
            "org_id", "scope_id", "source", "source_kind", "started_at", "finished_at",
            "created_at"):
        key = job.scope_id if job.scope_id in repo_scopes else ("org", job.org_id)
        jobs.setdefault(key, []).append(job)
    return jobs


def _running_at(job, when: datetime | None, now: datetime) -> bool:
    return (when is not None and job.started_at is not None
            and job.started_at <= when <= (job.finished_at or now))


def _seen_by(job, path: str) -> bool:
    """Whether the path job's walk would yield ``path`` (its file is under the job's root)."""
    root = Path(job.source)
    try:
        if root.is_file():
            return root.name == path
        return (root / path).is_file()
    except OSError:  # a root that is no longer readable sees nothing
        return False


def _job_origin(document, jobs: list, now: datetime) -> str:
    when = document.changed_at or document.ingested_at
    ordered = sorted(jobs, key=lambda job: not _running_at(job, when, now))  # stable: newest
    for job in ordered:
        if job.source_kind == "upload":
            if _running_at(job, when, now):
                return f"upload:{job.source}"
        elif _seen_by(job, document.path):
            return f"path:{Path(job.source).resolve()}"
    return ""


def attribute(apps, schema_editor) -> None:
    document_model = apps.get_model("contexts", "SourceDocument")
    source_model = apps.get_model("contexts", "Source")
    job_model = apps.get_model("contexts", "IngestionJob")
    repository_model = apps.get_model("accounts", "Repository")
    followed = dict(source_model.objects.values_list("repository_id", "public_id"))
    repo_scopes = dict(repository_model.objects.values_list("pk", "scope_id"))
    jobs = _jobs_by_scope(job_model, set(repo_scopes.values()))
    now = timezone.now()
    for document in document_model.objects.filter(origin="").only(
            "pk", "path", "repository_id", "source_commit", "changed_at", "ingested_at",
            "org_id").iterator(chunk_size=2000):
        origin = ""
        if document.source_commit and document.repository_id in followed:
            origin = f"git:{followed[document.repository_id]}"
        else:
            key = (repo_scopes.get(document.repository_id) if document.repository_id
                   else ("org", document.org_id))
            origin = _job_origin(document, jobs.get(key, []), now)
        if origin:
            document_model.objects.filter(pk=document.pk).update(origin=origin[:1100])


class Migration(migrations.Migration):
    dependencies = [("contexts", "0032_curation_on_a_living_codebase")]

    operations = [migrations.RunPython(attribute, migrations.RunPython.noop)]
