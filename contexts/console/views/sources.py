"""An organization's Sources page (``/o/<slug>/sources/``): the git repositories it follows —
state, last commit, last and next sync, files, fragments, the last error — and "sync now",
which queues a sync for a worker (``contexts.usecases.sources``; docs/sources.md). Below them,
each sync that applied changes, newest first (``?source=`` one source's): its commit range,
the files it added, modified, deleted and renamed, and the fragments it created, updated,
merged, conflicted and retired, each linked.

For tech leads and administrators: a stranger gets 404 (the organization is not theirs to see),
any other member 403."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from contexts.console.views.common import get_org, org_context, paginate
from contexts.console.views.members import call
from contexts.models import AuditEvent, Source
from contexts.services.errors import InvalidOperation
from contexts.usecases import sources as usecase

SYNCS_PER_PAGE = 20
FILE_KINDS = ("added", "modified", "deleted", "renamed")
FRAGMENT_KINDS = ("created", "updated", "merged", "conflicted", "retired")


@dataclass
class Listed:
    """One kind of change in a sync: how many, and the first of them (paths or fragment ids)."""

    kind: str
    count: int
    items: list
    more: int


@dataclass
class SyncRow:
    event: AuditEvent
    source: Source | None
    start: str
    end: str
    full: bool
    error: str
    files: list[Listed]
    fragments: list[Listed]


def _listed(after: dict, part: str, kinds: tuple[str, ...]) -> list[Listed]:
    lists, counts = after.get(part) or {}, (after.get("counts") or {}).get(part) or {}
    rows = []
    for kind in kinds:
        items = list(lists.get(kind) or [])
        count = int(counts.get(kind, len(items)))
        rows.append(Listed(kind, count, items, max(count - len(items), 0)))
    return rows


def _sync_row(event: AuditEvent, sources: dict[str, Source]) -> SyncRow:
    after = event.after or {}
    return SyncRow(event=event, source=sources.get(event.object_id),
                   start=str(after.get("from") or ""), end=str(after.get("to") or ""),
                   full=bool(after.get("full")), error=str(after.get("error") or ""),
                   files=_listed(after, "files", FILE_KINDS),
                   fragments=_listed(after, "fragments", FRAGMENT_KINDS))


@login_required
@require_GET
def sources(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)  # 404 for strangers
    rows = call(usecase.list_sources, request.user, usecase.ListSources(org=org.slug))
    chosen = request.GET.get("source", "")
    try:
        events = call(usecase.list_syncs, request.user,
                      usecase.ListSyncs(org=org.slug, source=chosen))
        problem = ""
    except InvalidOperation as exc:  # a source filter that is not one of this organization's
        events, problem = [], f"{exc.field}: {exc}"
    page = paginate(request, events, per_page=SYNCS_PER_PAGE)
    by_id = {source.public_id: source for source in rows}
    return render(request, "console/sources.html", {
        **org_context(request, org, "sources"), "sources": rows, "now": timezone.now(),
        "syncs": [_sync_row(event, by_id) for event in page], "page": page,
        "chosen": by_id.get(chosen), "problem": problem}, status=400 if problem else 200)


@login_required
@require_POST
def sync_now(request: HttpRequest, slug: str, source_id: str) -> HttpResponse:
    org = get_org(request, slug)
    call(usecase.sync_source, request.user, usecase.SyncSource(source=source_id, org=org.slug))
    messages.success(request, f"Sync of {source_id} queued: this page shows its state.")
    return redirect("console:sources", slug=org.slug)
