"""Console forms. Choices that name scopes or people are built from the user's visible
querysets, so a form can never offer (or accept) something the user may not read."""

from __future__ import annotations

from django import forms
from django.conf import settings

from contexts.models.governance import NudgeAnswer
from contexts.usecases.fragments import MAX_BODY_CHARS


class ConsoleForm(forms.Form):
    """Labels without Django's trailing colon."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


NO_OWNER = "-"
# The fragment list's sort orders (contexts.console.filters), each with a tie-breaker.
SORTS = {
    "-last_edited_at": ("recently edited", ["-last_edited_at", "-pk"]),
    "last_edited_at": ("least recently edited", ["last_edited_at", "pk"]),
    "title": ("title", ["title", "pk"]),
    "-authority": ("authority", ["-authority", "-pk"]),
    "-retrieved_count": ("most retrieved", ["-retrieved_count", "-pk"]),
    "verified_at": ("least recently verified", ["verified_at", "pk"]),
}


class EditForm(ConsoleForm):
    title = forms.CharField(max_length=300, required=False)
    # The API's limit: a fragment is a small piece of knowledge, whichever surface wrote it.
    body = forms.CharField(max_length=MAX_BODY_CHARS,
                           widget=forms.Textarea(attrs={"rows": 16, "spellcheck": "false"}))
    reason = forms.CharField(label="Why (optional)", max_length=300, required=False)
    based_on_version = forms.IntegerField(widget=forms.HiddenInput, min_value=1)


class SupersedeForm(ConsoleForm):
    replacement = forms.CharField(label="Replacement fragment id", max_length=32,
                                  help_text="the public id of the fragment that replaces this "
                                            "one, e.g. frag_3f2a…")
    reason = forms.CharField(max_length=300, required=False)


class OwnerForm(ConsoleForm):
    owner = forms.ChoiceField(label="New owner")

    def __init__(self, *args, members: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["owner"].choices = [(NO_OWNER, "nobody"), *((m, m) for m in members)]


class DiffForm(ConsoleForm):
    a = forms.IntegerField(label="From version", min_value=1)
    b = forms.IntegerField(label="To version", min_value=1)


def _optional_float(label: str, **kwargs) -> forms.FloatField:
    return forms.FloatField(label=label, required=False, **kwargs)


class SearchForm(ConsoleForm):
    query = forms.CharField(max_length=settings.RETRIEVAL["max_query_chars"])
    repo = forms.ChoiceField(label="Repository", required=False, initial="*",
                             help_text="all: the organization-wide fragments and every "
                                       "repository you can read (the API's \"repo_id\": \"*\")")
    persona = forms.ChoiceField(required=False)
    session = forms.CharField(label="Session id", required=False, max_length=120,
                              help_text="public or external id")
    budget_tokens = forms.IntegerField(label="Budget (tokens)", initial=3200, min_value=1,
                                       max_value=settings.RETRIEVAL["max_budget_tokens"])
    freshness_halflife_days = _optional_float("Freshness half-life (days)", min_value=0.01,
                                              max_value=36500)
    w_r = _optional_float("w_r relevance", min_value=0, max_value=100)
    w_f = _optional_float("w_f freshness", min_value=0, max_value=100)
    w_c = _optional_float("w_c authority", min_value=0, max_value=100)
    w_p = _optional_float("w_p pinned", min_value=0, max_value=100)
    k_lexical = forms.IntegerField(label="k lexical", initial=100, min_value=0,
                                   max_value=settings.RETRIEVAL["max_k"])
    k_dense = forms.IntegerField(label="k dense", initial=100, min_value=0,
                                 max_value=settings.RETRIEVAL["max_k"])
    rerank_top = forms.IntegerField(label="Rerank top", initial=50, min_value=0,
                                    max_value=settings.RETRIEVAL["max_k"])
    min_score = forms.FloatField(label="Min score", initial=0.0, min_value=0, max_value=1)
    include_superseded = forms.BooleanField(required=False)
    reranker = forms.ChoiceField(choices=[("", "configured default"), ("none", "none"),
                                          ("cross-encoder", "cross-encoder")], required=False)

    def __init__(self, data, *, repos, personas) -> None:
        if data is not None:
            # Unset numbers take their defaults, so a bare ?query=… link works.
            data = data.copy()
            for name, field in self.base_fields.items():
                if name == "repo":
                    continue  # blank is a choice of its own ("organization-wide only")
                if field.initial is not None and not data.get(name):
                    data[name] = field.initial
            if "repo" not in data:
                data["repo"] = self.base_fields["repo"].initial
        super().__init__(data)
        self.fields["repo"].choices = [("*", "all repositories I can read"),
                                       ("", "none — organization-wide only"),
                                       *((r.public_id, r.slug) for r in repos)]
        self.fields["persona"].choices = [("", "— none —"),
                                          *((p.public_id, p.slug) for p in personas)]


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        # Django drops a file part it cannot name (``..``, ``.``): an empty list is "no file",
        # refused as required, not an empty job.
        if isinstance(data, list | tuple) and data:
            return [single(item, initial) for item in data]
        if isinstance(data, list | tuple):
            data = None
        return [single(data, initial)]


class ScopeChoiceForm(ConsoleForm):
    scope = forms.ChoiceField(label="Into scope")

    def __init__(self, *args, scopes, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scope"].choices = [(s.public_id, f"{s.get_kind_display()}: {s.label}")
                                        for s in scopes]


class UploadForm(ScopeChoiceForm):
    files = MultipleFileField(label="Files",
                              help_text="Markdown, text, Python, JavaScript, TypeScript, Go, "
                                        "Java or Rust; or a zip of documentation (a Confluence "
                                        "space or Notion export, or plain Markdown/HTML)")


class PathForm(ScopeChoiceForm):
    """Beside the upload form on the Ingest page (superusers): its element ids start with
    ``path_`` so that each label names its own input (both forms have a ``scope``)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_id", "path_%s")
        super().__init__(*args, **kwargs)

    path = forms.CharField(label="Server path", max_length=1000,
                           help_text="a directory or file readable by the server")
    include_untracked = forms.BooleanField(
        label="Include untracked files", required=False,
        help_text="in a git work tree, also files git does not track (only tracked files are "
                  "read otherwise)")


class TokenForm(ConsoleForm):
    name = forms.CharField(max_length=120)
    scopes = forms.MultipleChoiceField(help_text="the token reads these scopes and everything "
                                                 "under them")
    expires_in_days = forms.IntegerField(label="Expires in (days)", required=False,
                                         min_value=1, max_value=3650)
    may_propose = forms.BooleanField(label="May propose new repository fragments",
                                     required=False, help_text="reviewed on the Review page")
    auto_accept = forms.BooleanField(label="Trusted: auto-accept its proposals",
                                     required=False, help_text="only where a scope's proposal "
                                     "policy is auto-accept")

    def __init__(self, *args, scopes, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scopes"].choices = [(s.public_id, f"{s.get_kind_display()}: {s.label}")
                                         for s in scopes]
        self.fields["scopes"].widget.attrs["size"] = min(8, max(3, len(scopes)))


class PersonalTokenForm(ConsoleForm):
    """A personal token: it acts as you, with your roles, in this organization (scripts)."""

    name = forms.CharField(max_length=120)
    expires_in_days = forms.IntegerField(label="Expires in (days)", required=False,
                                         min_value=1, max_value=3650)


class PinExpiryForm(ConsoleForm):
    expires_at = forms.DateTimeField(label="Expires", required=False,
                                     widget=forms.DateTimeInput(attrs={"type": "datetime-local"},
                                                                format="%Y-%m-%dT%H:%M"))


class NudgeAnswerForm(ConsoleForm):
    answer = forms.ChoiceField(choices=NudgeAnswer.choices)
    new_owner = forms.CharField(required=False, max_length=150)

