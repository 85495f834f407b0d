"""Traces explorer: recent retrievals filtered by token, scope and query; one trace's
candidates with every stage's rank and score."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from accounts.models import ApiToken, Scope
from contexts.console import identity
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
    queryset = (seen.traces().filter(org=org).select_related("token", "user")
                .order_by("-created_at", "-pk"))  # a total order: pages never overlap
    # Only tokens whose traces this user may read: the organization's token list is for its
    # administrators (the tokens page), not for a viewer of one repository.
    tokens = list(ApiToken.objects.filter(pk__in=queryset.values("token_id")).order_by("name"))
    filters = TraceFilter(request.GET, queryset, tokens=tokens, scopes=scopes)
    context = {**org_context(request, org, "traces"), "form": filters.form,
               "page": paginate(request, filters.qs)}
    return render_page(request, "console/traces.html", "htmx/traces_table.html", context,
                       target="traces-table")


# The candidates a trace page lists at once besides the returned ones; the others are a page
# (or "show all") away — a trace holds ~200 candidates, and all of them made a 258 KB page.
DROPPED_PER_PAGE = 20

# Why a candidate was not returned, in words (the trace stores compose's short codes).
_DROPPED = {
    "below min_score": "its final score {final} is below the request's min_score ({min_score})",
    "over budget": "it did not fit in the {budget_tokens}-token budget after the better ones",
    "over max_fragments": "the answer already held max_fragments ({max_fragments}) fragments",
    "not visible or not retrievable": "it is not retrievable in this request (retired, "
                                      "superseded or out of scope)",
}


def drop_reason(candidate: dict, parameters: dict) -> str:
    """Why ``candidate`` was not returned, in plain words (an older trace may not say)."""
    code = candidate.get("dropped") or ""
    if not code:
        return "not returned (this trace does not record why)"
    template = _DROPPED.get(code)
    if template is None:
        return code
    final = candidate.get("final")
    return template.format(final=f"{final:.3f}" if isinstance(final, float) else final,
                           min_score=parameters.get("min_score"),
                           budget_tokens=parameters.get("budget_tokens"),
                           max_fragments=parameters.get("max_fragments"))


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    seen = visible(request)
    trace = get_object_or_404(seen.traces().select_related("org", "token", "user"),
                              public_id=trace_id)
    scopes = Scope.objects.filter(id__in=trace.scope_ids).order_by("kind", "label")
    returned = {item["id"]: item for item in trace.returned}
    everyone = trace.candidates
    kept = [c for c in everyone if c["id"] in returned]
    dropped = [c for c in everyone if c["id"] not in returned]
    show_all = request.GET.get("all") == "1"
    page = Paginator(dropped, max(len(dropped), 1) if show_all else DROPPED_PER_PAGE).get_page(
        request.GET.get("page"))
    shown = kept + list(page.object_list)
    # Bars are scaled over every candidate, so a page's bars compare with the others'.
    bars = {c["id"]: c["bars"] for c in with_bars(everyone)}
    # The fragments this user may read, named as every list names them (console.identity).
    known = {f.public_id: f for f in identity.attach(
        seen.fragments().filter(public_id__in=[c["id"] for c in shown]))}
    for candidate in shown:
        candidate["bars"] = bars[candidate["id"]]
        candidate["fragment"] = known.get(candidate["id"])
        candidate["was_returned"] = candidate["id"] in returned
        candidate["tokens"] = returned.get(candidate["id"], {}).get("tokens")
        if not candidate["was_returned"]:
            candidate["why"] = drop_reason(candidate, trace.parameters)
    adaptive = trace.parameters.get("adaptive") or None
    parameters = [(key, json.dumps(value, sort_keys=True, default=str))
                  for key, value in sorted(trace.parameters.items()) if key != "adaptive"]
    return render(request, "console/trace_detail.html", {
        **org_context(request, trace.org, "traces"), "trace": trace, "scopes": scopes,
        "returned": kept, "dropped": page, "show_all": show_all, "per_page": DROPPED_PER_PAGE,
        "candidate_count": len(everyone), "dropped_count": len(dropped),
        "not_retrievable": trace.parameters.get("not_retrievable") or {},
        "columns": bars[shown[0]["id"]] if shown else [],
        "parameters": parameters, "adaptive": adaptive,
        "degraded": degraded_legs.public(trace.degraded),
        "lexical_index": (trace.versions or {}).get("lexical_index")})
