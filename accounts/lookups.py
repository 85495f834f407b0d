"""Turning what people and agents type (public ids, slugs, ``kind:ref``) into objects.

Lookups never decide visibility: callers pass the result to ``accounts.scopes``.
"""

from __future__ import annotations

from django.db.models import Q

from accounts.models import Organization, Persona, Repository, Scope, Session


class LookupError_(LookupError):
    """Nothing matched; ``field`` names the input that did not resolve."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def _by_id_or_slug(queryset, ref: str, slug_field: str):
    """One query for both spellings (with the scope row, which callers always need); a public
    id match wins over a slug that happens to look like one."""
    rows = list(queryset.filter(Q(public_id=ref) | Q(**{slug_field: ref}))
                .select_related("scope")[:2])
    return next((row for row in rows if row.public_id == ref), rows[0] if rows else None)


def find_org(ref: str) -> Organization | None:
    return _by_id_or_slug(Organization.objects.all(), ref, "slug")


def find_in_org(model, org: Organization, ref: str, slug_field: str = "slug"):
    return _by_id_or_slug(model.objects.filter(org=org), ref, slug_field)


def parse_scope_ref(ref: str) -> Scope:
    """``org:SLUG``, ``repo:ORG/REPO``, ``persona:ORG/SLUG``, ``session:ORG/EXTERNAL_ID`` or a
    public id (``repo_…``) → the scope row."""
    if ":" not in ref:
        scope = Scope.objects.filter(public_id=ref).first()
        if scope is None:
            raise LookupError_(f"no scope with public id {ref!r}", "scope")
        return scope
    kind, _, rest = ref.partition(":")
    if kind == "org":
        org = find_org(rest)
        if org is None:
            raise LookupError_(f"no organization {rest!r}", "scope")
        return org.scope
    models = {"repo": Repository, "persona": Persona, "session": Session}
    if kind not in models:
        raise LookupError_(f"unknown scope kind {kind!r} (org, repo, persona, session)", "scope")
    org_ref, _, item = rest.partition("/")
    org = find_org(org_ref)
    if org is None or not item:
        raise LookupError_(f"expected {kind}:ORG/NAME, got {ref!r}", "scope")
    obj = find_in_org(models[kind], org, item,
                      "external_id" if kind == "session" else "slug")
    if obj is None:
        raise LookupError_(f"no {kind} {item!r} in {org.slug}", "scope")
    return obj.scope
