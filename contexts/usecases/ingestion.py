"""Submitting a source for ingestion: a directory on the server or uploaded files, into a
scope, as a queued job. The worker runs it (``contexts.ingestion.jobs.run_job``, through the
``ingest`` task queued here).

REST (``POST /api/sources``) names the scope by public id or slug: :func:`submit_uploads`.
The console (a scope chosen among those it shows), ``manage.py ingest`` and ``bootstrap``
(the operator, :data:`~accounts.permissions.SYSTEM`) have the scope already: :func:`submit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from accounts.models import Scope
from accounts.permissions import SYSTEM, may, principal_user
from accounts.scopes import readable_scopes
from contexts.governance.authority import compute_authority
from contexts.ingestion import doc_exports, lanes, server_paths
from contexts.ingestion.archives import ArchiveRefused, looks_like_zip
from contexts.ingestion.jobs import run_job
from contexts.models import Context, IngestionJob
from contexts.services import uploads
from contexts.services.audit import record
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import require
from contexts.tasks import job_changed_fragments, publish_ingest
from contexts.usecases.errors import Refused
from contexts.usecases.retrieval import ScopeRef
from contexts.usecases.scoping import resolve_in_org, resolve_org

CURATE_REFUSED = ("you may not add knowledge to this scope (curators, tech leads and "
                  "administrators can; agent tokens write only into sessions)")


@dataclasses.dataclass(frozen=True)
class SubmitSource:
    """A source for a scope the caller has already chosen. ``files`` (uploaded files: a
    ``name`` and ``chunks()``) make it an upload; otherwise ``path`` is a directory or file on
    the server."""

    scope: Scope
    path: str = ""
    files: Sequence[Any] | None = None
    context: Context | None = None
    owner: Any = None        # who owns fragments without a front-matter owner
    created_by: Any = None   # the user shown as the job's author
    # A path in a git work tree: read untracked (not ignored) files too, not only tracked ones.
    include_untracked: bool = False


@dataclasses.dataclass(frozen=True)
class UploadSources:
    """Uploaded files for a scope named as agents name it (organization, then the
    repository or persona), optionally into a context (its slug)."""

    scope: ScopeRef
    files: Sequence[Any]
    context: str | None = None


def submit(principal: Any, command: SubmitSource, *, queue: bool = True) -> IngestionJob:
    """Create the job (checked: the right to curate the scope, a server path's rules, an
    uploaded archive's bounds and names), store its uploads, and queue it once the transaction
    commits. ``queue=False``: the caller runs it with :func:`run_inline` instead
    (``manage.py ingest --inline``)."""
    upload = command.files is not None
    # Before the transaction: a refused archive leaves no job, no audit event, no stored file.
    archives = check_archives(command.files) if upload else []
    with transaction.atomic():
        job = create_job(principal, command.scope, command.path,
                         source_kind="upload" if upload else "path", context=command.context,
                         owner=command.owner, created_by=command.created_by,
                         include_untracked=command.include_untracked and not upload,
                         archives=archives)
        if upload:
            save_uploads(job, command.files)
        if queue:
            enqueue(job)
    return job


def run_inline(job: IngestionJob) -> IngestionJob | None:
    """Run a submitted, unqueued job in this process, as a worker would (outside any
    transaction: the run takes its own locks and commits as it goes), and the organization's
    authority after it here too: ``--inline`` means no worker is counted on."""
    done = run_job(job.pk)
    if done is not None and job_changed_fragments(done):
        compute_authority(done.org)
    return done


def submit_uploads(principal: Any, command: UploadSources) -> IngestionJob:
    """``POST /api/sources``: uploads into the persona, else the repository, else the
    organization named. A scope the caller may read but not curate is :class:`Refused`; an
    invalid one is :class:`InvalidOperation` naming the field (``scope`` by default)."""
    org = resolve_org(principal, command.scope.org_id)
    target = (resolve_in_org(org, "persona", command.scope.persona_id)
              or resolve_in_org(org, "repo", command.scope.repo_id) or org)
    context = None
    if command.context:
        # Among the contexts the caller reads: one it may not read answers like a missing one
        # (it was 403 against 400, which told whether another team's context slug exists).
        context = Context.objects.filter(org=org, slug=command.context,
                                         scope_id__in=readable_scopes(principal)).first()
        if context is None:
            raise InvalidOperation("no such context in this organization", field="context")
    if not may(principal, "curate", target.scope):
        # The caller may name this scope (resolve_* refused it otherwise), so saying it exists
        # reveals nothing; what is missing is the right to write.
        raise Refused(CURATE_REFUSED)
    try:
        return submit(principal, SubmitSource(scope=target.scope, files=command.files,
                                              context=context,
                                              created_by=principal_user(principal)))
    except InvalidOperation as exc:
        raise InvalidOperation(str(exc), field=exc.field or "scope") from exc


def create_job(principal: Any, scope: Scope, source: str, *, source_kind: str = "path",
               context: Context | None = None, owner=None, created_by=None,
               include_untracked: bool = False,
               archives: list[dict] | None = None) -> IngestionJob:
    """A queued job. A ``path`` source is checked by :mod:`~contexts.ingestion.server_paths`:
    any path for the operator (``SYSTEM``), superusers under the ingest roots otherwise. In a
    git work tree it reads tracked files only, unless ``include_untracked``. ``archives``:
    the uploaded documentation exports and their layouts, for the audit trail."""
    operator = principal is SYSTEM
    if source_kind == "path" and not operator:
        server_paths.require_path_right(principal)
    require(principal, "curate", scope)
    if scope.kind not in ("org", "repo", "persona", "session"):
        raise InvalidOperation("fragments are ingested into an organization, repository, "
                               "persona or session", field="scope")
    if source_kind == "path":
        source = str(server_paths.check_server_path(source, operator=operator))
    if context is not None and context.org_id != scope.org_id:
        raise InvalidOperation("the context belongs to another organization", field="context")
    job = IngestionJob.objects.create(
        org_id=scope.org_id, scope=scope, context=context, source=str(source),
        source_kind=source_kind, owner=owner, created_by=created_by,
        include_untracked=include_untracked and source_kind == "path",
    )
    after = {"scope": scope.public_id, "source_kind": source_kind,
             "context": context.public_id if context is not None else None,
             "include_untracked": job.include_untracked}
    if archives:
        after["archives"] = archives
    record(principal, "job.create", job, org=job.org, after=after)
    return job


def check_archives(files: Iterable[Any]) -> list[dict]:
    """Each uploaded zip (a documentation export) checked as the worker will read it
    (:func:`contexts.ingestion.doc_exports.check`): its name, layout and page count. A refused
    one is :class:`InvalidOperation` naming ``files`` and the reason."""
    found = []
    for upload in files:
        name = uploads.file_name(upload.name)
        if not looks_like_zip(name):
            continue
        upload.seek(0)
        raw = upload.read()
        upload.seek(0)
        try:
            plan = doc_exports.check(raw, max_bytes=settings.INGEST_MAX_FILE_BYTES)
        except ArchiveRefused as exc:
            raise InvalidOperation(f"{name}: archive refused: {exc}", field="files") from exc
        found.append({"name": name, "layout": plan.layout, "pages": len(plan.pages),
                      "skipped": len(plan.skipped)})
    return found


def save_uploads(job: IngestionJob, files: Iterable[Any]) -> None:
    """Put uploaded files in the uploads storage (PostgreSQL unless configured otherwise), in
    the job's transaction, and make their key prefix the job's source: any worker reads them
    by key, whichever node this is."""
    job.source = uploads.store(job, files)
    job.save(update_fields=["source"])


def enqueue(job: IngestionJob) -> str:
    """Queue the job's run once the transaction that created it commits, in its lane
    (``contexts.ingestion.lanes``: uploads and small path jobs interactive, large ones bulk);
    returns the lane."""
    queue = lanes.for_job(job.source_kind, job.source)
    transaction.on_commit(partial(publish_ingest, job.pk, queue))
    return queue
