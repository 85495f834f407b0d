"""Turning what people and agents type (public ids, slugs, ``kind:ref``) into objects.

Lookups never decide visibility: callers pass the result to ``accounts.scopes``.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Q

from accounts.models import Organization, Persona, Repository, Scope, Session
from accounts.sql import prepared_cursor


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


class Found(NamedTuple):
    pk: int
    scope_id: int


# The organization, then each named object inside it; the same precedence as _by_id_or_slug
# (a public id match wins). One plain statement: it runs on every retrieval.
_CHAIN_SQL = """
    WITH org AS (
        SELECT id, scope_id FROM accounts_organization
        WHERE public_id = %(org)s OR slug = %(org)s
        ORDER BY public_id = %(org)s DESC LIMIT 1
    )
    SELECT 'org', id, scope_id FROM org
    UNION ALL (SELECT 'repo', r.id, r.scope_id
               FROM accounts_repository r JOIN org ON r.org_id = org.id
               WHERE r.public_id = %(repo)s OR r.slug = %(repo)s
               ORDER BY r.public_id = %(repo)s DESC LIMIT 1)
    UNION ALL (SELECT 'persona', p.id, p.scope_id
               FROM accounts_persona p JOIN org ON p.org_id = org.id
               WHERE p.public_id = %(persona)s OR p.slug = %(persona)s
               ORDER BY p.public_id = %(persona)s DESC LIMIT 1)
    UNION ALL (SELECT 'session', s.id, s.scope_id
               FROM accounts_session s JOIN org ON s.org_id = org.id
               WHERE s.public_id = %(session)s OR s.external_id = %(session)s
               ORDER BY s.public_id = %(session)s DESC LIMIT 1)
"""


def find_chain(org: str, *, repo: str | None = None, persona: str | None = None,
               session: str | None = None) -> dict[str, Found]:
    """The organization ``org`` and the ``repo`` / ``persona`` / ``session`` named in it (public
    id, or slug / external id), in one query: kind → what was found. A kind given but not in the
    answer does not exist (in that organization); nothing is found in a missing organization."""
    params = {"org": org, "repo": repo or None, "persona": persona or None,
              "session": session or None}
    with prepared_cursor() as cursor:
        cursor.execute(_CHAIN_SQL, params)
        return {kind: Found(pk, scope_id) for kind, pk, scope_id in cursor.fetchall()}


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
