"""Personas of an organization: their weights and half-lives, created and edited by its
administrators (``contexts.usecases.personas``), and a live preview — one query retrieved under
two personas side by side, through the retrieval use case the search preview calls (a real
retrieval over the viewer's own readable scopes)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from accounts.models import Organization, Persona
from contexts.console.forms_people import CompareForm, PersonaForm
from contexts.console.querysets import visible
from contexts.console.views.common import get_org, org_context
from contexts.console.views.members import call
from contexts.services.errors import InvalidOperation
from contexts.usecases import personas as usecase
from contexts.usecases import retrieval
from contexts.usecases.errors import Refused
from contexts.usecases.retrieval import Retrieve, ScopeRef

# The search preview's defaults (contexts.console.forms.SearchForm).
K_LEXICAL = K_DENSE = 100
RERANK_TOP = 50


@login_required
@require_GET
def personas(request: HttpRequest, slug: str) -> HttpResponse:
    org = get_org(request, slug)
    seen = visible(request)
    found = list(seen.personas(org).order_by("slug"))
    repos = list(seen.repositories(org).order_by("slug"))
    form = CompareForm(request.GET if "query" in request.GET else None, personas=found,
                       repos=repos, initial=_initial_pair(found))
    sides = None
    if form.is_bound and form.is_valid():
        sides = _compare(request, org, form, {p.public_id: p for p in found})
    return render(request, "console/personas.html", {
        **org_context(request, org, "personas"), "personas": found, "form": form,
        "sides": sides, "can_manage": usecase.may_manage(request.user, org),
    })


def _initial_pair(found: list[Persona]) -> dict:
    return {"a": found[0].public_id if found else None,
            "b": found[1].public_id if len(found) > 1 else None, "repo": "*"}


def _compare(request: HttpRequest, org: Organization, form: CompareForm,
             by_id: dict[str, Persona]) -> list[dict] | None:
    data = form.cleaned_data
    sides = []
    for key in ("a", "b"):
        persona = by_id[data[key]]
        command = Retrieve(
            query=data["query"],
            scope=ScopeRef(org_id=org.public_id, repo_id=data["repo"] or "*",
                           persona_id=persona.public_id),
            budget_tokens=data["budget_tokens"] or 3200, k_lexical=K_LEXICAL,
            k_dense=K_DENSE, rerank_top=RERANK_TOP)
        try:
            result = retrieval.run(request.user, retrieval.plan(request.user, command))
        except Refused:
            form.add_error(None, "scope not found or not readable")
            return None
        except InvalidOperation as exc:
            form.add_error(None, str(exc))
            return None
        sides.append({"persona": persona, "result": result, "weights": result.weights,
                      "items": [{"fragment": item.fragment, "tokens": item.tokens,
                                 "final": item.candidate.final,
                                 "relevance": item.candidate.relevance,
                                 "freshness": item.candidate.freshness,
                                 "authority": item.candidate.authority}
                                for item in result.fragments]})
    # Where each fragment stands on the other side: what the persona changed.
    for side, other in ((sides[0], sides[1]), (sides[1], sides[0])):
        ranks = {item["fragment"].pk: n for n, item in enumerate(other["items"], 1)}
        for n, item in enumerate(side["items"], 1):
            theirs = ranks.get(item["fragment"].pk)
            item["rank"], item["other_rank"] = n, theirs
            item["moved"] = f"not under {other['persona'].slug}" if theirs is None else (
                "" if theirs == n else f"#{theirs} under {other['persona'].slug}")
    return sides


def _manageable(request: HttpRequest, slug: str, persona_id: str | None
                ) -> tuple[Organization, Persona | None]:
    org = get_org(request, slug)
    persona = None
    if persona_id is not None:
        persona = get_object_or_404(visible(request).personas(org), public_id=persona_id)
    if not usecase.may_manage(request.user, org, persona):
        raise PermissionDenied("only administrators manage personas")
    return org, persona


@login_required
@require_http_methods(["GET", "POST"])
def persona_new(request: HttpRequest, slug: str) -> HttpResponse:
    return _edit(request, *_manageable(request, slug, None))


@login_required
@require_http_methods(["GET", "POST"])
def persona_edit(request: HttpRequest, slug: str, persona_id: str) -> HttpResponse:
    return _edit(request, *_manageable(request, slug, persona_id))


def _edit(request: HttpRequest, org: Organization, persona: Persona | None) -> HttpResponse:
    status = 200
    if request.method == "POST":
        form = PersonaForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                saved = call(usecase.save_persona, request.user, usecase.SavePersona(
                    org=org, slug=data["slug"], name=data["name"],
                    description=data["description"], weights=form.weights(),
                    halflife_days=form.halflives(), persona=persona))
            except InvalidOperation as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                messages.success(request, f"Persona “{saved.name}” saved.")
                return redirect("console:personas", slug=org.slug)
        status = 400
    elif persona is not None:
        form = PersonaForm(initial=PersonaForm.initial_for(persona))
    else:
        form = PersonaForm(initial={name: Persona._meta.get_field(name).default
                                    for name in usecase.WEIGHTS})
    return render(request, "console/persona_form.html", {
        **org_context(request, org, "personas"), "form": form, "persona": persona,
    }, status=status)
