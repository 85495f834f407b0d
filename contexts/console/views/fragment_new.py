"""Writing a fragment in the browser: the "New fragment" form of an organization.

Every kind can be written; a negative context is written as three parts — don't, do
instead, why — composed into one Markdown body (``contexts.console.markup``, documented in
docs/console.md). The preview (HTMX, or the form's Preview button without JavaScript) shows
the text as the fragment page will, its token count as an agent's budget counts it, the
secrets the door would redact or refuse, and near-duplicates by SimHash; saving warns about
those first and saves once the writer confirms. Saving is the use case
``contexts.usecases.fragments.write_new_fragment``: the one door's permission check, secret
screening, version, audit event and change feed.

A stranger to the organization gets a 404, a member who may write nowhere in it a 403.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from accounts.models import Organization, Scope
from contexts.console.forms import ConsoleForm
from contexts.console.markup import compose_negative, render_text
from contexts.console.querysets import Visible, visible
from contexts.console.views.common import get_org, org_context
from contexts.kernel.compression import packed_tokens
from contexts.kernel.tokens import count_tokens
from contexts.models import FragmentKind
from contexts.secret_scan import describe, redact, scan
from contexts.services.errors import InvalidOperation
from contexts.services.secrets import policy
from contexts.usecases.errors import NotVisible, Refused
from contexts.usecases.fragments import (
    MAX_BODY_CHARS,
    NewFragment,
    clean_tags,
    near_duplicates,
    write_new_fragment,
)

PREVIEW_TARGET = "fragment-preview"
NEGATIVE = FragmentKind.NEGATIVE
REQUIRED_FOR_NEGATIVE = "This field is required for a negative context."


def _text(label: str, rows: int, **kwargs) -> forms.CharField:
    return forms.CharField(label=label, required=False, max_length=MAX_BODY_CHARS,
                           widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "true"}),
                           **kwargs)


class NewFragmentForm(ConsoleForm):
    kind = forms.ChoiceField(choices=FragmentKind.choices, initial=FragmentKind.PROSE,
                             help_text="a negative context is a known trap: written as "
                                       "don't / do instead / why")
    scope = forms.ChoiceField(label="Scope", help_text="where it lives: the organization, a "
                                                       "repository or a persona you may write")
    title = forms.CharField(max_length=300)
    body = _text("Body", 14, help_text="Markdown (code: the code itself)")
    dont = _text("Don't", 3, help_text="the trap: what not to do")
    instead = _text("Do instead", 3, help_text="the safe way")
    why = _text("Why", 3, help_text="optional: what goes wrong otherwise")
    owner = forms.ChoiceField(help_text="answers its staleness questions")
    tags = forms.CharField(label="Tags (optional)", required=False, max_length=1200,
                           help_text="comma-separated, e.g. payments, retries")
    expires_at = forms.DateTimeField(
        label="Expires (optional)", required=False,
        help_text="retrieval stops returning it then",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"))
    save_anyway = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, scopes: list[Scope], members: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scope"].choices = [(s.public_id, f"{s.get_kind_display()}: {s.label}")
                                        for s in scopes]
        self.fields["owner"].choices = [(name, name) for name in members]

    def clean_tags(self) -> list[str]:
        try:
            return clean_tags(self.cleaned_data["tags"].split(","))
        except InvalidOperation as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self) -> dict:
        data = super().clean()
        if data.get("kind") == NEGATIVE:
            for name in ("dont", "instead"):
                if not (data.get(name) or "").strip() and name not in self.errors:
                    self.add_error(name, REQUIRED_FOR_NEGATIVE)
            if not self.errors:
                data["body"] = compose_negative(data["dont"], data["instead"], data["why"])
                if len(data["body"]) > MAX_BODY_CHARS:
                    self.add_error("dont", f"Don't, do instead and why together are longer "
                                           f"than {MAX_BODY_CHARS} characters.")
        elif not (data.get("body") or "").strip() and "body" not in self.errors:
            self.add_error("body", "This field is required.")
        return data


def writable_scopes(seen: Visible, org: Organization) -> list[Scope]:
    """The organization's own scope, its repositories and personas that the user may curate."""
    candidates = [org.scope, *(r.scope for r in seen.repositories(org)),
                  *(p.scope for p in seen.personas(org))]
    return [scope for scope in candidates
            if scope.id in seen.scope_ids and seen.may("curate", scope)]


def _setup(request: HttpRequest, slug: str) -> tuple[Organization, Visible, list[Scope],
                                                     list[str]]:
    org = get_org(request, slug)  # 404 outside the user's organizations
    seen = visible(request)
    scopes = writable_scopes(seen, org)
    if not scopes:
        raise PermissionDenied("you may not write fragments in this organization")
    members = list(seen.members(org).values_list("username", flat=True))
    if request.user.get_username() not in members:
        members.insert(0, request.user.get_username())  # e.g. a superuser who is no member
    return org, seen, scopes, members


def _form(request: HttpRequest, scopes: list[Scope], members: list[str]) -> NewFragmentForm:
    if request.method == "POST":
        return NewFragmentForm(request.POST, scopes=scopes, members=members)
    wanted = request.GET.get("scope", "")
    initial = {"owner": request.user.get_username(),
               "scope": wanted if wanted in {s.public_id for s in scopes}
               else scopes[0].public_id}
    if request.GET.get("kind") in FragmentKind.values:
        initial["kind"] = request.GET["kind"]
    return NewFragmentForm(initial=initial, scopes=scopes, members=members)


def preview_context(request: HttpRequest, org: Organization, form: NewFragmentForm) -> dict:
    """What the preview shows for a bound form: the rendered text, its tokens, the secrets
    in it, near-duplicates. Field errors are left to the save (a half-written form is
    previewed as far as it goes)."""
    form.is_valid()
    data = getattr(form, "cleaned_data", {})
    kind = data.get("kind") or request.POST.get("kind", "")
    body = data.get("body", "") if kind != NEGATIVE else (
        data.get("body") or compose_negative(data.get("dont", ""), data.get("instead", ""),
                                             data.get("why", "")))
    if not body.strip():
        return {"preview": None}
    in_body = scan(body)
    findings = in_body + scan(data.get("title", ""))
    # Shown as the door would store it: a secret found is a placeholder here too, never
    # rendered back (under ``refuse`` nothing is stored; the text still shows no secret).
    shown = redact(body, in_body)
    return {"preview": {
        "html": render_text(shown, kind=kind, negative=kind == NEGATIVE),
        "tokens": count_tokens(body),
        "packed_tokens": packed_tokens(body, []),
        "secrets": describe(findings) if findings else "",
        "secret_policy": policy(),
        "duplicates": near_duplicates(request.user, org.pk, body),
    }}


def _page(request: HttpRequest, org: Organization, form: NewFragmentForm, *,
          status: int = 200, **extra) -> HttpResponse:
    return render(request, "console/fragment_new.html", {
        **org_context(request, org, "new-fragment"), "form": form,
        "negative_kind": NEGATIVE, **extra}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def fragment_new(request: HttpRequest, slug: str) -> HttpResponse:
    org, _, scopes, members = _setup(request, slug)
    form = _form(request, scopes, members)
    if request.method == "GET":
        return _page(request, org, form)
    if request.POST.get("action") == "preview":  # the Preview button without JavaScript
        return _page(request, org, form, **preview_context(request, org, form))
    if not form.is_valid():
        return _page(request, org, form, status=400)
    data = form.cleaned_data
    duplicates = near_duplicates(request.user, org.pk, data["body"])
    if duplicates and not data["save_anyway"]:
        # Not saved yet: the writer looks at the near-duplicates first, then saves anyway.
        confirm = NewFragmentForm({**request.POST.dict(), "save_anyway": "1"}, scopes=scopes,
                                  members=members)
        return _page(request, org, confirm, duplicates=duplicates, confirm=True)
    command = NewFragment(scope_id=data["scope"], body=data["body"], title=data["title"],
                          kind=data["kind"], owner=data["owner"],
                          expires_at=data["expires_at"], tags=data["tags"])
    try:
        fragment = write_new_fragment(request.user, command)
    except (Refused, NotVisible):
        # The choices hold only scopes the user may write; one that changed meanwhile is a
        # choice no longer offered.
        form.add_error("scope", "Choose a scope you may write.")
        return _page(request, org, form, status=400)
    except InvalidOperation as exc:
        field = exc.field if exc.field in form.fields else None
        if field == "body" and data["kind"] == NEGATIVE:
            field = None
        form.add_error(field, str(exc) if field else f"{exc.field or 'form'}: {exc}")
        return _page(request, org, form, status=400)
    messages.success(request, f"Saved {fragment.public_id}.")
    redacted = fragment.secret_findings.count()
    if redacted:
        messages.warning(request, f"{redacted} secret{'s were' if redacted != 1 else ' was'} "
                                  "replaced by a placeholder before storage: rotate it, and "
                                  "keep it in a secret store.")
    return redirect("console:fragment", fragment_id=fragment.public_id)


@login_required
@require_POST
def fragment_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """The preview alone (HTMX), for the form as it is."""
    org, _, scopes, members = _setup(request, slug)
    form = NewFragmentForm(request.POST, scopes=scopes, members=members)
    return render(request, "htmx/fragment_preview.html", preview_context(request, org, form))
