"""Members of an organization, for its administrators: invite an existing account (its owner
accepts on their home page) or create one (a set-password link shown once), set roles for the
organization and per repository, deactivate and reactivate. The rules are the use cases'
(``contexts.usecases.members``, ``contexts.usecases.invitations``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.http import require_GET, require_POST

from accounts import emails
from accounts.models import Organization, Role
from contexts.console.forms_people import (
    AddMemberForm,
    CreateMemberForm,
    RepositoryRoleForm,
    RoleForm,
)
from contexts.console.querysets import visible
from contexts.console.views.common import get_org, org_context
from contexts.services.errors import InvalidOperation
from contexts.usecases import invitations, sso
from contexts.usecases import members as usecase
from contexts.usecases.errors import NotVisible, Refused


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """A use case, its refusals as the console answers them: 404 (never says whether it
    exists) and 403."""
    try:
        return fn(*args, **kwargs)
    except NotVisible:
        raise Http404 from None
    except Refused as exc:
        raise PermissionDenied(str(exc)) from None


def _admin_org(request: HttpRequest, slug: str) -> Organization:
    org = get_org(request, slug)  # 404 for strangers
    call(usecase.require_admin, request.user, org)  # 403 for the others
    return org


def _page(request: HttpRequest, org: Organization, *, status: int = 200,
          **forms: Any) -> HttpResponse:
    repositories = list(visible(request).repositories(org).order_by("slug"))
    rows = call(usecase.list_members, request.user, org)
    for row in rows:
        row.repo_roles = [(repo, Role(row.repository_roles[repo.pk]).label)
                          for repo in repositories
                          if repo.pk in row.repository_roles]
        row.mapped_repo_roles = [(repo, Role(row.mapped_repository_roles[repo.pk]).label)
                                 for repo in repositories
                                 if repo.pk in row.mapped_repository_roles]
    context = {
        **org_context(request, org, "members"),
        "rows": rows, "repositories": repositories,
        "admins": usecase.active_admins(org),
        "add_form": forms.get("add_form") or AddMemberForm(),
        "create_form": forms.get("create_form") or CreateMemberForm(),
        "role_choices": RoleForm.base_fields["role"].choices,
        "created": forms.get("created"), "set_password_url": forms.get("set_password_url"),
        "error": forms.get("error"),
        "events": call(usecase.access_events, request.user, org),
        "invitations": call(invitations.pending_of_org, request.user, org),
    }
    response = render(request, "console/members.html", context, status=status)
    response["Cache-Control"] = "no-store"  # a set-password link is shown once
    return response


def _refused(form, exc: InvalidOperation) -> None:
    field = exc.field if exc.field in form.fields else None
    form.add_error(field, str(exc))


@login_required
@require_GET
def members(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, _admin_org(request, slug))


@login_required
@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    """Invite an existing account. The answer is the same whether an account matched or
    not (``contexts.usecases.invitations``)."""
    org = _admin_org(request, slug)
    form = AddMemberForm(request.POST)
    if form.is_valid():
        try:
            invitation = call(invitations.invite, request.user, invitations.Invite(
                org, form.cleaned_data["identifier"], form.cleaned_data["role"]))
        except InvalidOperation as exc:
            _refused(form, exc)
        else:
            messages.success(request, invitations.SENT.format(identifier=invitation.identifier))
            return redirect("console:members", slug=org.slug)
    return _page(request, org, add_form=form, status=400)


@login_required
@require_POST
def invitation_withdraw(request: HttpRequest, slug: str, invitation_id: str) -> HttpResponse:
    org = _admin_org(request, slug)
    invitation = call(invitations.withdraw, request.user, org, invitation_id)
    messages.success(request, f"The invitation of “{invitation.identifier}” is withdrawn.")
    return redirect("console:members", slug=org.slug)


@login_required
@require_POST
def invitation_answer(request: HttpRequest, invitation_id: str) -> HttpResponse:
    """The invited person accepts or declines (their home page lists the invitations)."""
    answer = request.POST.get("answer")
    if answer not in ("accept", "decline"):
        return HttpResponseBadRequest("answer: accept or decline")
    if answer == "accept":
        membership = call(invitations.accept, request.user, invitation_id)
        messages.success(request, f"You joined {membership.org.name} as "
                                  f"{membership.get_role_display()}.")
        return redirect("console:org", slug=membership.org.slug)
    invitation = call(invitations.decline, request.user, invitation_id)
    messages.success(request, f"You declined the invitation to {invitation.org.name}.")
    return redirect("console:home")


@login_required
@require_POST
def member_create(request: HttpRequest, slug: str) -> HttpResponse:
    org = _admin_org(request, slug)
    form = CreateMemberForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = call(usecase.create_member, request.user, usecase.CreateMember(
                org, data["username"], data["email"], data["role"]))
        except InvalidOperation as exc:
            _refused(form, exc)
        else:
            return _page(request, org, created=created, status=201,
                         set_password_url=request.build_absolute_uri(created.set_password_path))
    return _page(request, org, create_form=form, status=400)


@login_required
@require_POST
def member_role(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    org = _admin_org(request, slug)
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _page(request, org, error="choose a role", status=400)
    try:
        membership = call(usecase.set_role, request.user,
                          usecase.SetRole(org, username, form.cleaned_data["role"]))
    except InvalidOperation as exc:
        return _page(request, org, error=f"{username}: {exc}", status=400)
    messages.success(request, f"{username} is now {membership.get_role_display()}.")
    return redirect("console:members", slug=org.slug)


@login_required
@require_POST
def member_repository_role(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    org = _admin_org(request, slug)
    repositories = list(visible(request).repositories(org))
    form = RepositoryRoleForm(request.POST, repositories=repositories)
    if not form.is_valid():
        # The row's form is rendered per member, so the refusal is said above the table,
        # naming the field it is about.
        return _page(request, org, status=400,
                     error=f"{username}: repository role not set — {_named_errors(form)}")
    repository = next(r for r in repositories if r.public_id == form.cleaned_data["repository"])
    try:
        role = call(usecase.set_repository_role, request.user, usecase.SetRepositoryRole(
            org, username, repository, form.cleaned_data["role"]))
    except InvalidOperation as exc:
        return _page(request, org, error=f"{username}: {exc}", status=400)
    messages.success(request, f"{username} on {repository.slug}: "
                              f"{role.replace('_', ' ') if role else 'organization role only'}.")
    return redirect("console:members", slug=org.slug)


def _named_errors(form) -> str:
    """A form's errors in one sentence, each after the name of its field."""
    return "; ".join(
        f"{(form.fields[name].label or name).capitalize()}: {' '.join(errors)}"
        if name in form.fields else " ".join(errors) for name, errors in form.errors.items())


@login_required
@require_POST
def member_deactivate(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    org = _admin_org(request, slug)
    try:
        escalated = call(usecase.deactivate_member, request.user, org, username)
    except InvalidOperation as exc:
        return _page(request, org, error=f"{username}: {exc}", status=400)
    handed = (f" {len(escalated)} open nudge{'s' if len(escalated) != 1 else ''} went to the "
              "tech leads." if escalated else "")
    messages.success(request, f"{username} is deactivated.{handed}")
    return redirect("console:members", slug=org.slug)


@login_required
@require_POST
def member_reactivate(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    org = _admin_org(request, slug)
    try:
        call(usecase.reactivate_member, request.user, org, username)
    except InvalidOperation as exc:
        return _page(request, org, error=f"{username}: {exc}", status=400)
    messages.success(request, f"{username} is active again.")
    return redirect("console:members", slug=org.slug)


@login_required
@require_POST
def member_revoke_tokens(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    """Revoke, in one action, every live agent token ``username`` minted here (a person who
    left keeps no working credential behind)."""
    org = _admin_org(request, slug)
    revoked = call(sso.revoke_tokens_minted_by, request.user, org, username)
    messages.success(request, f"Revoked {revoked} agent token{'s' if revoked != 1 else ''} "
                              f"minted by {username}.")
    return redirect("console:members", slug=org.slug)


class SetPasswordView(auth_views.PasswordResetConfirmView):
    """A new member's set-password link (``contexts.usecases.members.set_password_path``):
    Django's reset confirmation — the token works once and expires after
    ``PASSWORD_RESET_TIMEOUT``.

    The copy e-mailed to the person carries a signed proof that it went to the account's
    address (``accounts.emails``); setting the password through it records the address as
    verified by its owner. The copy shown to the administrator has none, so an administrator
    who uses it verifies nothing."""

    template_name = "console/password_set.html"
    success_url = reverse_lazy("console:password-set-done")
    PROOF_SESSION_KEY = "_contexts_email_proof"

    def dispatch(self, *args: Any, **kwargs: Any) -> HttpResponse:
        if kwargs.get("token") != self.reset_url_token:
            # The first visit (the link itself): Django moves the token into the session and
            # redirects to a URL without it; the proof goes the same way, or is dropped.
            proof = self.request.GET.get(usecase.EMAIL_PROOF_PARAM, "")
            self.request.session[self.PROOF_SESSION_KEY] = proof[:1000]
        return super().dispatch(*args, **kwargs)

    def form_valid(self, form) -> HttpResponse:
        proof = self.request.session.pop(self.PROOF_SESSION_KEY, "")
        response = super().form_valid(form)
        if emails.proof_holds(self.user, proof):
            emails.mark_verified(self.user, emails.BY_LINK)
        return response


@require_GET
def password_set_done(request: HttpRequest) -> HttpResponse:
    return render(request, "console/password_set.html", {"done": True})
