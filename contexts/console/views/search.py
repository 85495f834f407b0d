"""Search preview: the retrieval use case the API calls, with every signal shown as a bar."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from accounts.models import Scope
from contexts.console.forms import SearchForm
from contexts.console.identity import identities
from contexts.console.querysets import visible
from contexts.console.rendering import render_page
from contexts.console.scores import with_bars
from contexts.console.views.common import get_org, org_context
from contexts.models import Pin
from contexts.usecases import retrieval
from contexts.usecases.errors import Refused
from contexts.usecases.org_scope import Plan, Wording, is_wide
from contexts.usecases.retrieval import WEIGHT_FIELDS, Retrieve, ScopeRef

CONSOLE_WORDING = Wording(
    all_repositories='choose "all repositories I can read" as the repository',
    persona_or_session="choose a persona or enter a session id")


def _command(org, data: dict) -> Retrieve:
    """The console form as the retrieval use case's command (weights left blank keep the
    persona's, or the defaults)."""
    return Retrieve(
        query=data["query"],
        scope=ScopeRef(org_id=org.public_id, repo_id=data["repo"] or None,
                       persona_id=data["persona"] or None,
                       session_id=data["session"].strip() or None),
        budget_tokens=data["budget_tokens"], k_lexical=data["k_lexical"],
        k_dense=data["k_dense"], rerank_top=data["rerank_top"],
        freshness_halflife_days=data["freshness_halflife_days"],
        min_score=data["min_score"], include_superseded=data["include_superseded"],
        as_of=None, reranker=data["reranker"] or None,
        weights={name: data[name] for name in WEIGHT_FIELDS},
    )


@login_required
@require_GET
def search(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    seen = visible(request)
    form = SearchForm(request.GET if "query" in request.GET else None,
                      repos=seen.repositories(org), personas=seen.personas(org))
    context = {**org_context(request, org, "search"), "form": form, "result": None}
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            plan = retrieval.plan(request.user, _command(org, data))
        except Refused:
            form.add_error(None, "scope not found or not readable")
        else:
            try:
                result = retrieval.run(request.user, plan)
            except ValueError as exc:  # e.g. a cross-encoder asked for but not configured
                form.add_error("reranker", str(exc))
            else:
                if not result.fragments:  # as the API answers: where the readable ones are
                    result.hint = retrieval.hint(_in_words(plan, org, form), CONSOLE_WORDING,
                                                  result)
                context.update(_result_context(seen, plan, result))
    return render_page(request, "console/search.html", "htmx/search_results.html", context,
                       target="search-results")


def _in_words(plan: Plan, org, form: SearchForm) -> Plan:
    """The plan with the scope as the form shows it (slugs rather than public ids)."""
    labels = dict(form.fields["repo"].choices) | dict(form.fields["persona"].choices)
    words = {name: labels.get(value, value) if value and value != "*" else value
             for name, value in plan.scope.items()}
    return plan._replace(scope={**words, "org_id": org.slug})


def _pin_scope_id(plan: Plan) -> int:
    """The most specific scope named; for "all repositories" (no persona or session named)
    the organization's, not whichever repository happens to come first."""
    named = plan.scope.get("persona_id") or plan.scope.get("session_id")
    if plan.request.chain and (named or not is_wide(plan.scope)):
        return plan.request.chain[0]
    return plan.org_scope_id


def _result_context(seen, plan: Plan, result) -> dict:
    pin_scope = Scope.objects.get(pk=_pin_scope_id(plan))
    ids = [item.fragment.pk for item in result.fragments]
    pinned_here = set(Pin.objects.filter(scope=pin_scope, fragment_id__in=ids)
                      .values_list("fragment_id", flat=True))
    # Bars are scaled over every candidate, not only the returned ones.
    scaled = {row["id"]: row for row in with_bars(
        candidate.as_trace(str(pk)) for pk, candidate in result.candidates.items())}
    found = identities(item.fragment for item in result.fragments)
    items = [{"item": item, "fragment": item.fragment, "identity": found.get(item.fragment.pk),
              "trace": scaled.get(str(item.fragment.pk))
              or with_bars([item.candidate.as_trace(str(item.fragment.pk))])[0],
              "is_pinned": item.fragment.pk in pinned_here}
             for item in result.fragments]
    return {
        "result": result, "items": items, "pin_scope": pin_scope,
        "can_pin": seen.may("pin", pin_scope),
        "weights": result.weights, "candidate_count": len(result.candidates),
        "tokens_used": sum(item.tokens for item in result.fragments),
    }
