"""An organization's Sources page (``/o/<slug>/sources/``): the git repositories it follows —
state, last commit, last and next sync, files, fragments, the last error — and "sync now",
which queues a sync for a worker (``contexts.usecases.sources``; docs/sources.md).

For tech leads and administrators: a stranger gets 404 (the organization is not theirs to see),
any other member 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from contexts.console.views.common import get_org, org_context
from contexts.console.views.members import call
from contexts.usecases import sources as usecase


@login_required
@require_GET
def sources(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)  # 404 for strangers
    rows = call(usecase.list_sources, request.user, usecase.ListSources(org=org.slug))
    return render(request, "console/sources.html", {
        **org_context(request, org, "sources"), "sources": rows, "now": timezone.now()})


@login_required
@require_POST
def sync_now(request: HttpRequest, slug: str, source_id: str) -> HttpResponse:
    org = get_org(request, slug)
    call(usecase.sync_source, request.user, usecase.SyncSource(source=source_id, org=org.slug))
    messages.success(request, f"Sync of {source_id} queued: this page shows its state.")
    return redirect("console:sources", slug=org.slug)
