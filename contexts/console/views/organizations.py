"""The instance's organizations, for superusers (``/organizations/``; docs/console.md
"Organizations"): create an organization with its first administrator (a new account's
set-password link shown once), create a repository in one. The rules are the use case's
(``contexts.usecases.organizations``), the same the operator's ``manage.py org`` and ``repo``
follow. Anyone else gets 404: the page is not there for them."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from contexts.console.forms_people import NewRepositoryForm, OrganizationForm
from contexts.console.views.common import org_context, remembered_org
from contexts.console.views.members import call
from contexts.services.errors import InvalidOperation
from contexts.usecases import organizations as usecase


def _operator(request: HttpRequest) -> None:
    if not usecase.is_operator(request.user):
        raise Http404


def _page(request: HttpRequest, *, status: int = 200, **extra: Any) -> HttpResponse:
    rows = call(usecase.list_organizations, request.user)
    context = {
        **org_context(request, remembered_org(request), "organizations"),
        "rows": rows,
        "org_form": extra.get("org_form") or OrganizationForm(),
        "repo_form": extra.get("repo_form") or NewRepositoryForm(orgs=[r.org for r in rows]),
        "created": extra.get("created"), "set_password_url": extra.get("set_password_url"),
    }
    response = render(request, "console/organizations.html", context, status=status)
    response["Cache-Control"] = "no-store"  # a set-password link is shown once
    return response


def _refused(form, exc: InvalidOperation) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, str(exc))


@login_required
@require_GET
def organizations(request: HttpRequest) -> HttpResponse:
    _operator(request)
    return _page(request)


@login_required
@require_POST
def organization_create(request: HttpRequest) -> HttpResponse:
    _operator(request)
    form = OrganizationForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = call(usecase.create_organization, request.user,
                           usecase.CreateOrganization(slug=data["slug"], name=data["name"],
                                                      admin=data["admin"],
                                                      email=data["email"]))
        except InvalidOperation as exc:
            _refused(form, exc)
        else:
            if not created.created_account:
                messages.success(request, f"Created {created.org.name}; "
                                          f"{created.admin.get_username()} administers it.")
                return redirect("console:organizations")
            return _page(request, status=201, created=created,
                         set_password_url=request.build_absolute_uri(
                             created.set_password_path))
    return _page(request, org_form=form, status=400)


@login_required
@require_POST
def repository_create(request: HttpRequest) -> HttpResponse:
    _operator(request)
    rows = call(usecase.list_organizations, request.user)
    form = NewRepositoryForm(request.POST, orgs=[r.org for r in rows])
    if form.is_valid():
        data = form.cleaned_data
        try:
            repository = call(usecase.create_repository, request.user,
                              usecase.CreateRepository(org=data["org"], slug=data["slug"],
                                                       name=data["name"]))
        except InvalidOperation as exc:
            _refused(form, exc)
        else:
            messages.success(request, f"Created repository {repository.org.slug}/"
                                      f"{repository.slug}.")
            return redirect("console:organizations")
    return _page(request, repo_form=form, status=400)
