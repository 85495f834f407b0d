"""List filters of the console, as django-filter ``FilterSet``s.

The filters only narrow a queryset the view has already restricted to what the user may read
(``Visible``); their choices (owners, languages) come from the same restricted querysets. A
value that is not one of a filter's choices is ignored, as django-filter does for any field
that does not validate: a hand-edited or stale URL narrows less, it never fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q, QuerySet

from accounts.models import ApiToken, Scope
from contexts.console.forms import NO_OWNER, SORTS, ConsoleForm
from contexts.models import Fragment, FragmentKind, RetrievalTrace, SourcePointer

YES_NO = [("yes", "yes"), ("no", "no")]
STATUSES = [("active", "active"), ("retired", "retired"), ("superseded", "superseded"),
            ("all", "all")]
DEFAULT_STATUS = "active"
DEFAULT_SORT = "-last_edited_at"
CONSOLE_USERS = "-"  # traces without a token: retrievals made in the console


def _yes_no(label: str, field_name: str, **attrs: str) -> django_filters.ChoiceFilter:
    return django_filters.ChoiceFilter(
        label=label, field_name=field_name, choices=YES_NO, empty_label="any",
        method="filter_yes_no", widget=forms.Select(attrs=attrs) if attrs else None)


class FragmentFilter(django_filters.FilterSet):
    """The fragment list of a scope: text (in title, body or source path), tag, kind, status,
    owner, stale, pinned, negative, language, and the sort order.

    ``status`` and ``sort`` have defaults (active fragments, most recently edited first) that
    apply when they are absent or invalid, so they are applied in :meth:`filter_queryset`
    rather than by the filters themselves (django-filter skips empty values).
    """

    q = django_filters.CharFilter(label="Text contains", method="filter_text", max_length=200,
                                  help_text="in the title, the body or a source path")
    tag = django_filters.CharFilter(label="Tag", method="filter_tag", max_length=50)
    kind = django_filters.ChoiceFilter(label="Kind", choices=FragmentKind.choices,
                                       empty_label="any")
    status = django_filters.ChoiceFilter(label="Status", choices=STATUSES, empty_label=None,
                                         method="filter_nothing")
    owner = django_filters.ChoiceFilter(label="Owner", empty_label="anyone",
                                        method="filter_owner")
    stale = _yes_no("Stale", "is_stale", title="has an open nudge")
    pinned = _yes_no("Pinned here", "is_pinned")
    negative = _yes_no("Negative", "negative")
    language = django_filters.ChoiceFilter(label="Language", empty_label="any")
    sort = django_filters.ChoiceFilter(
        label="Sort", empty_label=None, method="filter_nothing",
        choices=[(key, label) for key, (label, _) in SORTS.items()])

    class Meta:
        model = Fragment
        fields: list[str] = []  # every filter is declared above
        form = ConsoleForm

    def __init__(self, data: Any, queryset: QuerySet[Fragment], *, owners: list[str],
                 languages: list[str]) -> None:
        # Always bound: an empty query string means "the defaults", not "no filtering".
        super().__init__(data if data is not None else {}, queryset)
        self.filters["owner"].extra["choices"] = [(NO_OWNER, "nobody"),
                                                  *((name, name) for name in owners)]
        self.filters["language"].extra["choices"] = [(lang, lang) for lang in languages]

    def filter_yes_no(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(**{name: True}) if value == "yes" else queryset.exclude(
            **{name: True})

    def filter_text(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        in_path = SourcePointer.objects.filter(fragment=OuterRef("pk"),
                                               document__path__icontains=value)
        return queryset.filter(Q(title__icontains=value) | Q(body__icontains=value)
                               | Q(Exists(in_path)))

    def filter_tag(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip().lower()
        return queryset.filter(tags__contains=[value]) if value else queryset

    def filter_owner(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == NO_OWNER:
            return queryset.filter(owner__isnull=True)
        return queryset.filter(owner__username=value)

    def filter_nothing(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset  # status and sort: see filter_queryset

    def filter_queryset(self, queryset: QuerySet[Fragment]) -> QuerySet[Fragment]:
        queryset = super().filter_queryset(queryset)
        status = self.form.cleaned_data.get("status") or DEFAULT_STATUS
        if status != "all":
            queryset = queryset.filter(status=status)
        sort = self.form.cleaned_data.get("sort") or DEFAULT_SORT
        return queryset.order_by(*SORTS[sort][1])


class TraceFilter(django_filters.FilterSet):
    """The traces explorer: query text, the token (or console users) and a searched scope.
    The token and scope choices are only those the viewer may read."""

    q = django_filters.CharFilter(label="Query contains", field_name="query",
                                  lookup_expr="icontains", max_length=200)
    token = django_filters.ChoiceFilter(label="Token", empty_label="any",
                                        method="filter_token")
    scope = django_filters.ChoiceFilter(label="Scope", empty_label="any",
                                        method="filter_scope")

    class Meta:
        model = RetrievalTrace
        fields: list[str] = []
        form = ConsoleForm

    def __init__(self, data: Any, queryset: QuerySet[RetrievalTrace], *,
                 tokens: Iterable[ApiToken], scopes: Iterable[Scope]) -> None:
        super().__init__(data if data is not None else {}, queryset)
        self._scopes = {scope.public_id: scope for scope in scopes}
        self.filters["token"].extra["choices"] = [
            (CONSOLE_USERS, "console users"), *((t.public_id, t.name) for t in tokens)]
        self.filters["scope"].extra["choices"] = [
            (public_id, scope.label) for public_id, scope in self._scopes.items()]

    def filter_token(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        if value == CONSOLE_USERS:
            return queryset.filter(token__isnull=True)
        return queryset.filter(token__public_id=value)

    def filter_scope(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(scope_ids__contains=[self._scopes[value].pk])
