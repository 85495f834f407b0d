"""Governance → Secrets: the secrets found on the way in, per organization (ADR 0016).

Each row says what kind of secret, in which file and on which line, how it came in (an
ingestion, an upload, a write, an edit) and what became of it (redacted or refused) — never the
secret, which Contexts does not keep. Shown to those who curate an organization (its tech leads
and admins, and staff), like the dedup review: the visibility rule of every console page,
``contexts.console.querysets.visible``.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from contexts.console.querysets import visible
from contexts.console.views.governance import layout
from contexts.models import SecretFinding

SHOWN = 500  # rows per organization; the count says how many more there are


@login_required
@require_GET
def secret_findings(request: HttpRequest) -> HttpResponse:
    seen = visible(request)
    orgs = [org for org in seen.org_list if seen.may("curate", org.scope)]
    wanted = request.GET.get("org")
    if wanted:
        orgs = [org for org in orgs if wanted in (org.slug, org.public_id)]
    readable = seen.scope_ids
    sections = []
    for org in orgs:
        findings = (SecretFinding.objects.filter(org=org)
                    .select_related("job", "fragment", "actor")
                    .order_by("-created_at", "path", "line"))
        rows = list(findings[:SHOWN])
        for row in rows:
            # A fragment is linked only for a viewer who may read it.
            row.readable_fragment = (row.fragment if row.fragment is not None
                                     and set(row.fragment.scope_ids) & readable else None)
        sections.append({"org": org, "findings": rows, "total": findings.count()})
    return render(request, "governance/secrets.html",
                  layout(request, sections=sections, shown=SHOWN))
