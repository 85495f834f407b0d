"""Traces explorer: recent retrievals filtered by token, scope and query; one trace's
candidates with every stage's rank and score."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from accounts.models import ApiToken, Scope
from contexts.console.filters import TraceFilter
from contexts.console.querysets import visible
from contexts.console.rendering import render_page
from contexts.console.scores import with_bars
from contexts.console.views.common import get_org, org_context, paginate
from contexts.retrieval import degraded as degraded_legs


@login_required
@require_GET
def traces(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    seen = visible(request)
    scopes = list(seen.scopes().filter(org=org).order_by("kind", "label"))
    queryset = seen.traces().filter(org=org).select_related("token", "user")
    # Only tokens whose traces this user may read: the organization's token list is for its
    # administrators (the tokens page), not for a viewer of one repository.
    tokens = list(ApiToken.objects.filter(pk__in=queryset.values("token_id")).order_by("name"))
    filters = TraceFilter(request.GET, queryset, tokens=tokens, scopes=scopes)
    context = {**org_context(request, org, "traces"), "form": filters.form,
               "page": paginate(request, filters.qs)}
    return render_page(request, "console/traces.html", "htmx/traces_table.html", context,
                       target="traces-table")


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = get_object_or_404(visible(request).traces().select_related("org", "token", "user"),
                              public_id=trace_id)
    scopes = Scope.objects.filter(id__in=trace.scope_ids).order_by("kind", "label")
    returned = {item["id"] for item in trace.returned}
    candidates = with_bars(trace.candidates)
    links = set(visible(request).fragments().filter(
        public_id__in=[c["id"] for c in candidates]).values_list("public_id", flat=True))
    for candidate in candidates:
        candidate["linkable"] = candidate["id"] in links
        candidate["was_returned"] = candidate["id"] in returned
    adaptive = trace.parameters.get("adaptive") or None
    parameters = [(key, json.dumps(value, sort_keys=True, default=str))
                  for key, value in sorted(trace.parameters.items()) if key != "adaptive"]
    return render(request, "console/trace_detail.html", {
        **org_context(request, trace.org, "traces"), "trace": trace, "scopes": scopes,
        "candidates": candidates, "parameters": parameters, "adaptive": adaptive,
        "degraded": degraded_legs.public(trace.degraded),
        "lexical_index": (trace.versions or {}).get("lexical_index")})
