"""Agent tokens of an organization, for its administrators: create (raw shown once), revoke."""

from __future__ import annotations

import json
import shlex

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import ApiToken, Membership, Organization, Repository, ScopeKind
from accounts.tokens import create_personal_token, create_token, revoke_token
from contexts.console.forms import PersonalTokenForm, TokenForm
from contexts.console.querysets import visible
from contexts.console.rendering import htmx_partial
from contexts.console.views.common import get_org, org_context

TOKEN_SCOPE_KINDS = (ScopeKind.ORG, ScopeKind.REPO, ScopeKind.PERSONA, ScopeKind.SESSION,
                     ScopeKind.CONTEXT)
# Where the agents' endpoints answer (contexts/urls.py, contexts.mcp.server.MCP_PATH; the
# console does not import the MCP adapter, tests/console/test_small_things.py compares).
RETRIEVE_PATH = "/api/contexts/retrieve"
MCP_PATH = "/mcp"
TOKEN_PLACEHOLDER = "<your token>"


def connect_examples(request: HttpRequest, org: Organization, token: ApiToken | None,
                     raw: str | None) -> dict[str, str]:
    """How an agent uses a token: a ``curl`` of the retrieval and an MCP client's
    configuration, with the token just created (else a placeholder) and this server's URL."""
    secret = raw or TOKEN_PLACEHOLDER
    scope = {"org_id": org.slug}
    repo = (Repository.objects.filter(org=org, scope__in=token.scopes.all()).order_by("slug")
            .first() if token else None)
    if repo is not None:
        scope["repo_id"] = repo.slug
    body = json.dumps({"query": "how do we retry failed requests?", "scope": scope})
    curl = " \\\n  ".join([
        f"curl -sS {shlex.quote(request.build_absolute_uri(RETRIEVE_PATH))}",
        "-H " + shlex.quote(f"Authorization: Bearer {secret}"),
        "-H 'Content-Type: application/json'",
        "-d " + shlex.quote(body)])
    mcp = json.dumps({"mcpServers": {"contexts": {
        "type": "http", "url": request.build_absolute_uri(MCP_PATH),
        "headers": {"Authorization": f"Bearer {secret}"}}}}, indent=2)
    return {"curl": curl, "mcp_config": mcp}


def _administered_org(request: HttpRequest, slug: str) -> Organization:
    org = get_org(request, slug)  # 404 for strangers
    if not visible(request).may("administer", org.scope):
        raise PermissionDenied("only administrators manage tokens")
    return org


def _scopes(request: HttpRequest, org: Organization):
    order = {kind: i for i, kind in enumerate(TOKEN_SCOPE_KINDS)}
    return sorted(visible(request).scopes().filter(org=org),
                  key=lambda s: (order.get(s.kind, 9), s.label))


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest, slug: str) -> HttpResponse:
    org = _administered_org(request, slug)
    scopes = _scopes(request, org)
    created = raw = None
    status = 200
    if request.method == "POST":
        form = TokenForm(request.POST, scopes=scopes)
        if form.is_valid():
            chosen = [s for s in scopes if s.public_id in form.cleaned_data["scopes"]]
            created, raw = create_token(org, form.cleaned_data["name"], chosen,
                                        created_by=request.user,
                                        expires_in_days=form.cleaned_data["expires_in_days"],
                                        may_propose=form.cleaned_data["may_propose"],
                                        auto_accept=form.cleaned_data["auto_accept"])
            form = TokenForm(scopes=scopes)
            status = 201
        else:
            status = 400
    else:
        form = TokenForm(scopes=scopes)
    response = render(request, "console/tokens.html", {
        **org_context(request, org, "tokens"), "form": form, "created": created, "raw": raw,
        "tokens": visible(request).tokens(org).select_related("created_by"),
        **connect_examples(request, org, created, raw),
    }, status=status)
    # The raw secret is in this one response only: never cache it.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, slug: str, token_id: str) -> HttpResponse:
    org = _administered_org(request, slug)
    token = get_object_or_404(visible(request).tokens(org), public_id=token_id)
    revoke_token(token, actor=request.user)
    if htmx_partial(request):
        return render(request, "htmx/token_row.html", {"org": org, "token": token})
    return redirect("console:tokens", slug=org.slug)


def _member_org(request: HttpRequest, slug: str) -> Organization:
    org = get_org(request, slug)  # 404 for strangers
    if not Membership.objects.filter(user=request.user, org=org).exists():
        raise PermissionDenied("personal tokens are for members of the organization")
    return org


@login_required
@require_http_methods(["GET", "POST"])
def personal_tokens(request: HttpRequest, slug: str) -> HttpResponse:
    """Your personal tokens in this organization: they act as you, with your roles (a team's
    scripts: ``GET``/``PATCH /api/fragments/{id}``, ``POST /api/fragments``)."""
    org = _member_org(request, slug)
    created = raw = None
    status = 200
    form = PersonalTokenForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if form.is_valid():
            created, raw = create_personal_token(
                org, request.user, form.cleaned_data["name"], created_by=request.user,
                expires_in_days=form.cleaned_data["expires_in_days"])
            form = PersonalTokenForm()
            status = 201
        else:
            status = 400
    response = render(request, "console/personal_tokens.html", {
        **org_context(request, org, "tokens"), "form": form, "created": created, "raw": raw,
        "tokens": ApiToken.objects.filter(org=org, user=request.user),
    }, status=status)
    response["Cache-Control"] = "no-store"  # the raw secret is in this one response only
    return response


@login_required
@require_POST
def personal_token_revoke(request: HttpRequest, slug: str, token_id: str) -> HttpResponse:
    org = _member_org(request, slug)
    token = get_object_or_404(ApiToken, org=org, user=request.user, public_id=token_id)
    revoke_token(token, actor=request.user)
    return redirect("console:personal-tokens", slug=org.slug)
