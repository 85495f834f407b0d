"""Resolving the scope fields of a command (public id or slug) — never deciding visibility.

Unknown and unreadable scopes are refused alike (a 403 over the API) so that existence is not
revealed.
"""

from __future__ import annotations

from typing import Any

from accounts.lookups import Found, find_chain, find_in_org, find_org
from accounts.models import Organization, Persona, Repository, Session
from accounts.scopes import Readable, readable_scopes
from contexts.usecases.errors import Refused

SCOPE_REFUSED = "scope not found or not readable"


def refuse() -> Refused:
    return Refused(SCOPE_REFUSED)


def resolve_org(principal: Any, ref: str, readable: Readable | None = None) -> Organization:
    """The organization, if the principal may name it (:func:`_may_name`)."""
    org = find_org(ref)
    if org is None:
        raise refuse()
    readable = readable if readable is not None else readable_scopes(principal)
    if not _may_name(org.pk, org.scope_id, readable):
        raise refuse()
    return org


def _may_name(org_id: int, org_scope_id: int, readable: Readable) -> bool:
    """Whether a request may name this organization: its principal reads it or anything in
    it (a token bound to one repository still names the organization as its namespace)."""
    return org_scope_id in readable or org_id in readable.orgs


def resolve_in_org(org: Organization, kind: str, ref: str | None):
    """The repository / persona / session named by public id or slug, or None if not given."""
    if not ref:
        return None
    model, slug_field = {
        "repo": (Repository, "slug"),
        "persona": (Persona, "slug"),
        "session": (Session, "external_id"),
    }[kind]
    obj = find_in_org(model, org, ref, slug_field)
    if obj is None:
        raise refuse()
    return obj


def resolve_chain(scope: dict, readable: Readable) -> dict[str, Found]:
    """The scope fields of a request (``org_id``, optional ``repo_id`` / ``persona_id`` /
    ``session_id``) in one query: kind → what was found, for the kinds given. Refused like
    :func:`resolve_org` and :func:`resolve_in_org`; the caller still asks ``accounts.scopes``
    whether each requested scope may be read."""
    refs = {kind: scope.get(f"{kind}_id") for kind in ("repo", "persona", "session")}
    found = find_chain(scope["org_id"], **refs)
    org = found.get("org")
    if org is None or not _may_name(org.pk, org.scope_id, readable):
        raise refuse()
    if any(ref and kind not in found for kind, ref in refs.items()):
        raise refuse()
    return found
