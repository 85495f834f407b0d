"""Ingestion: upload files or register a server path; jobs with live progress and errors."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.models import Organization, Scope, ScopeKind
from contexts.console.forms import PathForm, UploadForm
from contexts.console.querysets import visible
from contexts.console.rendering import htmx_partial
from contexts.console.views.common import get_org, org_context, paginate
from contexts.ingestion import server_paths
from contexts.ingestion.archives import looks_like_zip
from contexts.ingestion.sources import INGESTIBLE_SUFFIXES
from contexts.kernel.sizes import byte_size
from contexts.models import IngestionJob
from contexts.services.errors import InvalidOperation
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource

INGEST_KINDS = (ScopeKind.ORG, ScopeKind.REPO, ScopeKind.PERSONA)
# Django refuses more files than this before the view runs; say the same limit here.
MAX_UPLOAD_FILES = settings.DATA_UPLOAD_MAX_NUMBER_FILES or 200


def curatable_scopes(request: HttpRequest, org: Organization) -> list[Scope]:
    seen = visible(request)
    scopes = seen.scopes().filter(org=org, kind__in=INGEST_KINDS).order_by("kind", "label")
    order = {kind: i for i, kind in enumerate(INGEST_KINDS)}
    return sorted((s for s in scopes if seen.may("curate", s)),
                  key=lambda s: (order[s.kind], s.label))


def _page(request: HttpRequest, org: Organization, *, upload_form=None, path_form=None,
          status: int = 200) -> HttpResponse:
    seen = visible(request)
    scopes = curatable_scopes(request, org)
    may_register_paths = server_paths.may_register_paths(request.user)
    # A total order (jobs queued in one instant tie on created_at): each page a different slice.
    jobs = paginate(request, seen.jobs().filter(org=org).select_related("scope", "created_by")
                    .order_by("-created_at", "-pk"))
    return render(request, "console/ingest.html", {
        **org_context(request, org, "ingest"), "jobs": jobs, "scopes": scopes,
        "upload_form": upload_form or UploadForm(scopes=scopes),
        "path_form": path_form or (PathForm(scopes=scopes) if may_register_paths else None),
        "max_size": byte_size(settings.INGEST_MAX_FILE_BYTES),
        "archive_max_size": byte_size(settings.ARCHIVE_MAX_BYTES),
    }, status=status)


@login_required
@require_GET
def ingest(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, get_org(request, slug))


def _chosen_scope(request: HttpRequest, org: Organization, public_id: str) -> Scope:
    return get_object_or_404(visible(request).scopes().filter(org=org), public_id=public_id)


def _upload_errors(files) -> list[str]:
    errors = []
    if len(files) > MAX_UPLOAD_FILES:
        errors.append(f"at most {MAX_UPLOAD_FILES} files at once")
    seen: set[str] = set()
    for upload in files:
        name = Path(upload.name).name
        if name in seen:  # a job's files are keyed by name (contexts/services/uploads.py)
            errors.append(f"{name}: two files of this name")
        seen.add(name)
        archive = looks_like_zip(name)  # a documentation export: docs/ingestion.md
        limit = settings.ARCHIVE_MAX_BYTES if archive else settings.INGEST_MAX_FILE_BYTES
        if Path(name).suffix.lower() not in INGESTIBLE_SUFFIXES and not archive:
            errors.append(f"{name}: unsupported file type")
        elif upload.size > limit:
            errors.append(f"{name}: larger than {byte_size(limit)}")
    return errors


@login_required
@require_POST
def ingest_upload(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    form = UploadForm(request.POST, request.FILES, scopes=curatable_scopes(request, org))
    if not form.is_valid():
        return _page(request, org, upload_form=form, status=400)
    files = form.cleaned_data["files"]
    for error in _upload_errors(files):
        form.add_error("files", error)
    if form.errors:
        return _page(request, org, upload_form=form, status=400)
    scope = _chosen_scope(request, org, form.cleaned_data["scope"])
    # As POST /api/sources does: the job, then its files in the uploads storage, keyed by job.
    try:
        job = ingestion.submit(request.user, SubmitSource(scope=scope, files=files,
                                                          created_by=request.user))
    except InvalidOperation as exc:  # e.g. a refused archive: nothing was written
        form.add_error("files" if exc.field == "files" else None, str(exc))
        return _page(request, org, upload_form=form, status=400)
    messages.success(request, f"Job {job.public_id} queued with {len(files)} file(s).")
    return redirect("console:ingest", slug=org.slug)


@login_required
@require_POST
def ingest_path(request: HttpRequest, slug: str) -> HttpResponse:
    """A directory on the server: superusers only, under the operator's ingest roots, since
    it reads the server's disk (contexts.ingestion.server_paths)."""
    org = get_org(request, slug)
    server_paths.require_path_right(request.user)
    form = PathForm(request.POST, scopes=curatable_scopes(request, org))
    if not form.is_valid():
        return _page(request, org, path_form=form, status=400)
    scope = _chosen_scope(request, org, form.cleaned_data["scope"])
    try:
        job = ingestion.submit(request.user, SubmitSource(
            scope=scope, path=form.cleaned_data["path"].strip(), created_by=request.user,
            include_untracked=form.cleaned_data["include_untracked"]))
    except InvalidOperation as exc:
        form.add_error("path" if exc.field == "path" else None, str(exc))
        return _page(request, org, path_form=form, status=400)
    messages.success(request, f"Job {job.public_id} queued.")
    return redirect("console:ingest", slug=org.slug)


def _written(request: HttpRequest, job: IngestionJob) -> list[tuple[str, list, int]]:
    """(what happened, the fragments the user may read, how many in all) for what the job
    created and updated, in the order written (the job keeps the first ids of each)."""
    kept = job.fragment_ids or {}
    ids = [pid for kind in ("created", "updated") for pid in kept.get(kind, [])]
    found = {f.public_id: f for f in visible(request).fragments().filter(public_id__in=ids)
             .only("public_id", "title")}
    return [(kind, [found[pid] for pid in kept.get(kind, []) if pid in found], total)
            for kind, total in (("created", job.fragments_created),
                                ("updated", job.fragments_updated))]


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = get_object_or_404(visible(request).jobs().select_related("org", "scope", "created_by"),
                            public_id=job_id)
    context = {"job": job, "job_fragments": _written(request, job)}
    if htmx_partial(request, f"job-{job.public_id}"):
        return render(request, "htmx/job_row.html", context)
    if htmx_partial(request, "job-progress"):
        return render(request, "htmx/job_progress.html", context)
    return render(request, "console/job_detail.html",
                  {**org_context(request, job.org, "ingest"), **context})


