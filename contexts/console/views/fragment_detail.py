"""One fragment: rendered text, metadata, sources, pins, links, history with diffs, audit; edit
with optimistic concurrency, supersede, reassign owner."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from contexts.console.forms import NO_OWNER, DiffForm, EditForm, OwnerForm, SupersedeForm
from contexts.console.markup import diff_lines, render_fragment_body
from contexts.console.querysets import OPEN_NUDGE_STATES, Visible, visible
from contexts.console.rendering import htmx_partial, navigate, render_page, safe_next
from contexts.console.views.common import get_fragment, org_context
from contexts.kernel.compression import split_header
from contexts.models import Fragment, FragmentVersion, Pin, Source
from contexts.models.governance import NudgeAnswer
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases import curation, nudges

# A fragment's pages (detail, editor, diff) are reached from search, lists, the inbox and
# review alike: no navigation item is theirs, so none is marked current.
FRAGMENT_PAGES = ""

CONTENT_TARGET = "fragment-content"


def _versions(fragment: Fragment):
    return fragment.versions.select_related("editor").order_by("-number")


def content_context(request: HttpRequest, fragment: Fragment) -> dict:
    seen = visible(request)
    return {
        "fragment": fragment,
        "body_html": render_fragment_body(fragment),
        "can_curate": seen.may("curate", fragment.scope),
        "can_pin": seen.may("pin", fragment.scope),
        "is_pinned": Pin.objects.filter(fragment=fragment, scope=fragment.scope).exists(),
        "scope": fragment.scope,
    }


def history_context(fragment: Fragment, a: int | None = None, b: int | None = None) -> dict:
    versions = list(_versions(fragment))
    _name_commits(fragment, versions)
    numbers = [v.number for v in versions]
    b = b if b in numbers else (numbers[0] if numbers else None)
    a = a if a in numbers else (numbers[1] if len(numbers) > 1 else b)
    return {"fragment": fragment, "versions": versions, "diff_a": a, "diff_b": b,
            **_diff(fragment, a, b)}


def _name_commits(fragment: Fragment, versions: list[FragmentVersion]) -> None:
    """Each version a git source's sync wrote names its commit (``metadata["commit"]``,
    recorded under ``versions_record``): ``v.commit``, and ``v.commit_url`` — the source's
    permalink of the fragment's file at that commit, when the source has a template."""
    pointer = None
    if any((v.metadata or {}).get("commit") for v in versions):
        pointer = (fragment.sources.select_related("document")
                   .filter(document__repository__isnull=False)
                   .order_by("document__path", "start_line").first())
    source = (Source.objects.filter(org_id=fragment.org_id,
                                    repository_id=pointer.document.repository_id).first()
              if pointer is not None else None)
    for version in versions:
        version.commit = str((version.metadata or {}).get("commit") or "")
        version.commit_url = (source.permalink(version.commit, pointer.document.path,
                                               pointer.start_line, pointer.end_line)
                              if version.commit and source is not None else None)


def _diff(fragment: Fragment, a: int | None, b: int | None) -> dict:
    if a is None or b is None:
        return {"diff": [], "title_change": None}
    old = FragmentVersion.objects.filter(fragment=fragment, number=a).first()
    new = FragmentVersion.objects.filter(fragment=fragment, number=b).first()
    if old is None or new is None:
        return {"diff": [], "title_change": None}
    title_change = (old.title, new.title) if old.title != new.title else None
    return {"diff": diff_lines(old.body, new.body), "title_change": title_change,
            "diff_from": old, "diff_to": new}


def panels_context(seen: Visible, fragment: Fragment) -> dict:
    """What the details and audit panels show (also swapped out of band after an edit)."""
    return {
        "superseded_by_visible": bool(fragment.superseded_by_id) and seen.fragments().filter(
            pk=fragment.superseded_by_id).exists(),
        "audit": seen.audit_events(fragment).select_related("actor", "actor_token")[:50],
        "contexts_in": fragment.contexts.filter(scope_id__in=seen.scope_ids),
    }


def _detail_context(request: HttpRequest, seen: Visible, fragment: Fragment) -> dict:
    visible_fragments = seen.fragments()
    return {
        **org_context(request, fragment.org, FRAGMENT_PAGES),
        **content_context(request, fragment),
        **history_context(fragment),
        **panels_context(seen, fragment),
        "sources": fragment.sources.select_related("document__repository"),
        "pins": seen.pins().filter(fragment=fragment).select_related("scope", "pinned_by"),
        "links_out": fragment.links_out.filter(target__in=visible_fragments)
                                       .select_related("target"),
        "links_in": fragment.links_in.filter(source__in=visible_fragments)
                                     .select_related("source"),
        "supersedes": visible_fragments.filter(superseded_by=fragment),
        "nudges": fragment.nudges.select_related("owner", "answered_by")[:10],
        "supersede_form": SupersedeForm(),
        "owner_source": _owner_source(fragment),
        "owner_form": OwnerForm(members=_member_names(seen, fragment),
                                initial={"owner": fragment.owner.username
                                         if fragment.owner_id else NO_OWNER}),
    }


def _owner_source(fragment: Fragment) -> str:
    """Where the repository's owner of the fragment's source came from (CODEOWNERS, …)."""
    source = (fragment.sources.exclude(document__owner_source="")
              .order_by("document__path").values_list("document__owner_source", flat=True)
              .first())
    return (source or "").replace("_", " ")


def _member_names(seen: Visible, fragment: Fragment) -> list[str]:
    return list(seen.members(fragment.org).values_list("username", flat=True))


@login_required
@require_GET
def fragment_detail(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    if htmx_partial(request, CONTENT_TARGET):  # "cancel" in the inline editor
        return render(request, "htmx/fragment_content.html", content_context(request, fragment))
    return render(request, "console/fragment_detail.html",
                  _detail_context(request, visible(request), fragment))


@login_required
@require_GET
def fragment_diff(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    form = DiffForm(request.GET)
    a = form.cleaned_data["a"] if form.is_valid() else None
    b = form.cleaned_data["b"] if form.is_valid() else None
    context = {**org_context(request, fragment.org, FRAGMENT_PAGES),
               **history_context(fragment, a, b)}
    return render_page(request, "console/fragment_diff.html", "htmx/diff.html", context)


def _edit_response(request: HttpRequest, fragment: Fragment, form: EditForm, *,
                   conflict: EditConflict | None = None, status: int = 200) -> HttpResponse:
    context = {**org_context(request, fragment.org, FRAGMENT_PAGES), "fragment": fragment,
               "form": form, "conflict": conflict,
               # Where saving returns to: ``next``, or from the editor's own page the
               # fragment's (the inline editor on the fragment's page swaps in place instead).
               "next": safe_next(request) or (
                   "" if htmx_partial(request)
                   else reverse("console:fragment", args=[fragment.public_id])),
               "conflict_diff": diff_lines(conflict.current_body, conflict.submitted_body)
               if conflict else None}
    if htmx_partial(request):
        # htmx swaps 2xx answers only; the conflict is shown in place of the editor, and the
        # page's history and details catch up with the version someone else saved.
        if conflict and not context["next"]:
            current = Fragment.objects.select_related("owner", "scope", "org",
                                                      "superseded_by").get(pk=fragment.pk)
            context.update({**history_context(current),
                            **panels_context(visible(request), current),
                            "fragment": current, "refresh": True})
        return render(request, "htmx/fragment_edit.html", context)
    return render(request, "console/fragment_edit.html", context, status=status)


def editable_body(fragment: Fragment) -> str:
    """What the editor holds: the body without the line an ingested fragment starts with
    (``docs/x.md > Heading``, ``# src/a.py · fn``), which says where it came from and is not
    the person's to edit."""
    return split_header(fragment.body, fragment.heading_path)[1]


def stored_body(fragment: Fragment, edited: str) -> str:
    """The edited text with the fragment's first line back in front of it (not twice)."""
    header, _ = split_header(fragment.body, fragment.heading_path)
    return edited if not header or edited.startswith(header.rstrip("\n")) else header + edited


@login_required
@require_http_methods(["GET", "POST"])
def fragment_edit(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    if not visible(request).may("curate", fragment.scope):
        raise PermissionDenied("you may not edit fragments in this scope")
    if request.method == "GET":
        form = EditForm(initial={"title": fragment.title, "body": editable_body(fragment),
                                 "based_on_version": fragment.version})
        return _edit_response(request, fragment, form)
    form = EditForm(request.POST)
    if not form.is_valid():
        return _edit_response(request, fragment, form, status=400)
    data = {**form.cleaned_data, "body": stored_body(fragment, form.cleaned_data["body"])}
    # The question asked before this edit is the one it settles; a nudge the edit opens itself
    # (a secret in it was redacted) stays open for the owner.
    open_nudge = fragment.nudges.filter(state__in=OPEN_NUDGE_STATES).first()
    try:
        fragment = curation.edit(request.user, fragment,
                                 based_on_version=data["based_on_version"], body=data["body"],
                                 title=data["title"], reason=data["reason"])
    except EditConflict as conflict:
        # Keep the user's text in the editor; the next save is based on the current version,
        # after they have seen (and merged) the other edit.
        retry = EditForm(initial={"title": conflict.submitted_title,
                                  "body": split_header(conflict.submitted_body,
                                                       fragment.heading_path)[1],
                                  "reason": data["reason"],
                                  "based_on_version": conflict.current_version})
        return _edit_response(request, fragment, retry, conflict=conflict, status=409)
    except InvalidOperation as exc:
        form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        return _edit_response(request, fragment, form, status=400)
    if open_nudge is not None:
        # The edit settles "is this still accurate?" (governance may already have closed it).
        try:
            nudges.answer(request.user, open_nudge, NudgeAnswer.EDITED)
        except (InvalidOperation, PermissionDenied):
            pass
    back = safe_next(request)
    if htmx_partial(request) and not back:
        fragment = get_fragment(request, fragment.public_id)
        context = {**content_context(request, fragment), **history_context(fragment),
                   **panels_context(visible(request), fragment), "saved": True}
        return render(request, "htmx/fragment_saved.html", context)
    messages.success(request, f"Saved version {fragment.version}"
                              + (f" of “{fragment.title or fragment.public_id}”." if back else "."))
    redacted = fragment.secret_findings.filter(fragment_version=fragment.version).count()
    if redacted:
        messages.warning(request, f"{redacted} secret{'s were' if redacted != 1 else ' was'} "
                                  "replaced by a placeholder before storage: rotate it, and "
                                  "keep it in a secret store.")
    if back:
        # Opened from elsewhere (the inbox's Edit): back there — for htmx a full navigation,
        # as the fragment page's panels its answer would swap are not on the editor's page.
        return navigate(request, back)
    return redirect("console:fragment", fragment_id=fragment.public_id)


@login_required
@require_POST
def fragment_supersede(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    form = SupersedeForm(request.POST)
    if form.is_valid():
        replacement = visible(request).fragments().filter(
            public_id=form.cleaned_data["replacement"].strip()).first()
        if replacement is None:
            messages.error(request, "Replacement: no fragment with that id that you can read.")
        else:
            try:
                curation.supersede(request.user, fragment, replacement,
                                   reason=form.cleaned_data["reason"])
                messages.success(request, f"Superseded by {replacement.public_id}.")
            except InvalidOperation as exc:
                messages.error(request, str(exc))
    else:
        messages.error(request, "Replacement: give the replacement's fragment id.")
    return navigate(request, reverse("console:fragment", args=[fragment.public_id]))


@login_required
@require_POST
def fragment_verify(request: HttpRequest, fragment_id: str) -> HttpResponse:
    """"Verified: still true as it stands" — who and when, the evidence re-resolved as current,
    its evidence and verify-by nudges answered (``contexts.usecases.curation.verify``).
    Curators of its scope; back to ``next`` (the inbox) or the fragment's page."""
    fragment = get_fragment(request, fragment_id)
    if not visible(request).may("curate", fragment.scope):
        raise PermissionDenied("you may not verify fragments in this scope")
    curation.verify(request.user, fragment)
    messages.success(request, "Verified: still true as it stands.")
    return redirect(safe_next(request) or reverse("console:fragment",
                                                  args=[fragment.public_id]))


@login_required
@require_POST
def fragment_owner(request: HttpRequest, fragment_id: str) -> HttpResponse:
    fragment = get_fragment(request, fragment_id)
    seen = visible(request)
    form = OwnerForm(request.POST, members=_member_names(seen, fragment))
    if not form.is_valid():
        messages.error(request, "Owner: choose a member of the organization.")
        return redirect("console:fragment", fragment_id=fragment.public_id)
    name = form.cleaned_data["owner"]
    new_owner = None if name == NO_OWNER else get_object_or_404(
        get_user_model(), username=name, memberships__org=fragment.org)
    try:
        curation.reassign_owner(request.user, fragment, new_owner)
        messages.success(request, f"Owner is now {name if new_owner else 'nobody'}.")
    except InvalidOperation as exc:
        messages.error(request, str(exc))
    return redirect("console:fragment", fragment_id=fragment.public_id)


@login_required
@require_POST
def fragment_owner_follow(request: HttpRequest, fragment_id: str) -> HttpResponse:
    """Clear a person's choice of owner: the repository's owners (CODEOWNERS, front matter,
    history, the tech lead) decide again, now and at every sync."""
    fragment = get_fragment(request, fragment_id)
    try:
        fragment = curation.follow_repository_owner(request.user, fragment)
        name = fragment.owner.get_username() if fragment.owner_id else "nobody"
        messages.success(request, f"The owner follows the repository again: {name}.")
    except InvalidOperation as exc:
        messages.error(request, str(exc))
    return redirect("console:fragment", fragment_id=fragment.public_id)
