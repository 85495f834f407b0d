"""An organization's rows as the archive's entity files (``docs/export-format.md``).

Rows name each other by public id (scopes, fragments) or by a natural key (users by username,
source documents by repository and path), never by database id, so the archive restores into
any instance. Derived data is left out: vectors, the lexical index, the change feed, traces.
"""

from __future__ import annotations

import datetime as dt
from typing import IO, Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.utils import timezone
from guardian.models import GroupObjectPermission, UserObjectPermission

from accounts.models import Membership, Organization, Persona, Repository, Scope, Session
from contexts.models import (
    AuditEvent,
    Context,
    Fragment,
    FragmentVersion,
    Link,
    Nudge,
    Pin,
    SourceDocument,
    SourcePointer,
)
from contexts.models.bundles import ContextOwner, ContextSubscription
from contexts.models.fragments import FragmentContext
from contexts.portability.archive import GRANTS_LEFT_OUT, jsonl, write_archive

# What version 1 deliberately does not carry, and why (also in the manifest and the docs).
LEFT_OUT = {
    "embeddings": "derived: re-computed from the fragments on import",
    "lexical index": "derived: rebuilt from the fragments through the change feed",
    "change feed, followers": "derived, per instance",
    "api tokens": "credentials: their secrets are stored hashed and cannot be carried; "
                  "mint new ones",
    "password hashes": "credentials: imported users set a password (or are activated) anew",
    "retrieval traces, evaluation runs, ingestion jobs, uploads": "operational records",
    "proposals, dedup candidates, staleness scans, secret findings": "work queues and "
                  "findings of this instance; their outcomes are in the fragments and audit",
    "guardian object permissions": "version 1 carries organization roles only; "
                                   "left_out_counts says how many grants stayed behind",
    "subscriptions to other organizations' contexts": "the publisher is not in the archive",
}


def iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class _Rows:
    """The organization's rows, read once, keyed the way the archive names them."""

    def __init__(self, org: Organization) -> None:
        self.org = org
        self.scope_pid = dict(Scope.objects.filter(org=org).values_list("id", "public_id"))
        self.fragment_pid = dict(Fragment.objects.filter(org=org).values_list("id", "public_id"))
        self.users: dict[int, Any] = {}

    def user(self, user_id: int | None) -> str | None:
        if user_id is None:
            return None
        if user_id not in self.users:
            self.users[user_id] = get_user_model().objects.get(pk=user_id)
        return _username(self.users[user_id])


def export_files(org: Organization) -> dict[str, bytes]:
    """Every entity file of ``org``, read in one snapshot."""
    rows = _Rows(org)
    files: dict[str, list[dict]] = {
        "organization.jsonl": [{
            "public_id": org.public_id, "slug": org.slug, "name": org.name,
            "created_at": iso(org.created_at), "proposal_policy": org.proposal_policy}],
        "memberships.jsonl": [
            {"user": rows.user(m.user_id), "role": m.role, "created_at": iso(m.created_at)}
            for m in Membership.objects.filter(org=org).order_by("user__username")],
        "repositories.jsonl": [
            {"public_id": r.public_id, "slug": r.slug, "name": r.name, "url": r.url,
             "default_branch": r.default_branch, "proposal_policy": r.proposal_policy}
            for r in Repository.objects.filter(org=org).order_by("slug")],
        "personas.jsonl": [
            {"public_id": p.public_id, "slug": p.slug, "name": p.name,
             "description": p.description, "w_r": p.w_r, "w_f": p.w_f, "w_c": p.w_c,
             "w_p": p.w_p, "halflife_days": p.halflife_days}
            for p in Persona.objects.filter(org=org).order_by("slug")],
        "sessions.jsonl": [
            {"public_id": s.public_id, "external_id": s.external_id,
             "repository": rows.scope_pid.get(s.repository.scope_id) if s.repository_id
             else None,
             "persona": s.persona.public_id if s.persona_id else None,
             "created_at": iso(s.created_at), "expires_at": iso(s.expires_at),
             "closed_at": iso(s.closed_at)}
            for s in Session.objects.filter(org=org).select_related("repository", "persona")
            .order_by("created_at", "public_id")],
        "contexts.jsonl": _contexts(org, rows),
        "subscriptions.jsonl": [
            {"context": rows.scope_pid[s.context.scope_id],
             "subscriber": rows.scope_pid[s.subscriber_id], "created_by": rows.user(
                 s.created_by_id), "created_at": iso(s.created_at)}
            for s in ContextSubscription.objects.filter(org=org, context__org=org)
            .select_related("context").order_by("created_at", "id")],
        "documents.jsonl": [
            {"repository": rows.scope_pid[d.repository.scope_id] if d.repository_id else None,
             "path": d.path, "language": d.language, "author": d.author,
             "authored_at": iso(d.authored_at), "content_hash": d.content_hash,
             "size_bytes": d.size_bytes, "ingested_at": iso(d.ingested_at),
             "changed_at": iso(d.changed_at), "links": d.links, "front_links": d.front_links,
             **({"source_commit": d.source_commit} if hasattr(d, "source_commit") else {})}
            for d in SourceDocument.objects.filter(org=org).select_related("repository")
            .order_by("repository__slug", "path")],
        "fragments.jsonl": _fragments(org, rows),
        "versions.jsonl": [
            {"fragment": rows.fragment_pid[v.fragment_id], "number": v.number,
             "title": v.title, "body": v.body, "metadata": v.metadata,
             "editor": rows.user(v.editor_id), "reason": v.reason,
             "created_at": iso(v.created_at)}
            for v in FragmentVersion.objects.filter(org=org).order_by("fragment_id", "number")],
        "pointers.jsonl": [
            {"fragment": rows.fragment_pid[p.fragment_id],
             "document": {"repository": rows.scope_pid[p.document.repository.scope_id]
                          if p.document.repository_id else None, "path": p.document.path},
             "anchor": p.anchor, "start_line": p.start_line, "end_line": p.end_line,
             "content_hash": p.content_hash, "created_at": iso(p.created_at)}
            for p in SourcePointer.objects.filter(org=org)
            .select_related("document__repository").order_by("document__path", "anchor")],
        # In each scope's order: ``position`` then creation, the order retrieval puts them in.
        "pins.jsonl": [
            {"fragment": rows.fragment_pid[p.fragment_id], "scope": rows.scope_pid[p.scope_id],
             "pinned_by": rows.user(p.pinned_by_id), "reason": p.reason,
             "position": p.position, "expires_at": iso(p.expires_at),
             "created_at": iso(p.created_at)}
            for p in Pin.objects.filter(org=org).order_by("scope_id", "position",
                                                           "created_at", "id")],
        "links.jsonl": [
            {"source": rows.fragment_pid[link.source_id],
             "target": rows.fragment_pid[link.target_id], "kind": link.kind,
             "created_at": iso(link.created_at)}
            for link in Link.objects.filter(org=org).order_by("source_id", "target_id", "kind")],
        "nudges.jsonl": [
            {"fragment": rows.fragment_pid[n.fragment_id], "owner": rows.user(n.owner_id),
             "reasons": n.reasons, "state": n.state, "answer": n.answer,
             "answered_by": rows.user(n.answered_by_id), "created_at": iso(n.created_at),
             "escalated_at": iso(n.escalated_at), "answered_at": iso(n.answered_at)}
            for n in Nudge.objects.filter(org=org).order_by("created_at", "id")],
        "audit_events.jsonl": [
            {"actor": rows.user(e.actor_id),
             "actor_token": e.actor_token.public_id if e.actor_token_id else None,
             "action": e.action, "object_type": e.object_type, "object_id": e.object_id,
             "before": e.before, "after": e.after, "request_id": e.request_id,
             "created_at": iso(e.created_at)}
            for e in AuditEvent.objects.filter(org=org).select_related("actor_token")
            .order_by("created_at", "id")],
    }
    sources = _sources(org, rows)
    if sources is not None:
        files["sources.jsonl"] = sources
    # Last: every user a row above named (members, owners, editors, actors), never a password.
    files["users.jsonl"] = [
        {"username": _username(u), "email": u.email, "first_name": u.first_name,
         "last_name": u.last_name, "is_active": u.is_active}
        for u in sorted(rows.users.values(), key=_username)]
    return {name: jsonl(content) for name, content in files.items()}


def _contexts(org: Organization, rows: _Rows) -> list[dict]:
    owners: dict[int, list[str]] = {}
    for owner in ContextOwner.objects.filter(org=org).order_by("user__username"):
        owners.setdefault(owner.context_id, []).append(rows.user(owner.user_id))
    return [
        {"public_id": c.public_id, "slug": c.slug, "name": c.name,
         "description": c.description, "home": rows.scope_pid[c.home_id],
         "published": c.published, "created_at": iso(c.created_at),
         "owners": owners.get(c.pk, [])}
        # A context's home may be another context: parents first (their scope ids are older).
        for c in Context.objects.filter(org=org).order_by("scope_id")]


def _fragments(org: Organization, rows: _Rows) -> list[dict]:
    in_contexts: dict[int, list[str]] = {}
    for fragment_id, scope_id in (FragmentContext.objects.filter(org=org)
                                  .order_by("context__slug")
                                  .values_list("fragment_id", "context__scope_id")):
        in_contexts.setdefault(fragment_id, []).append(rows.scope_pid[scope_id])
    return [
        {"public_id": f.public_id, "uid": str(f.uid), "scope": rows.scope_pid[f.scope_id],
         "contexts": in_contexts.get(f.pk, []), "kind": f.kind, "namespace": f.namespace,
         "negative": f.negative, "title": f.title, "heading_path": f.heading_path,
         "body": f.body, "language": f.language, "natural_language": f.natural_language,
         "symbol": f.symbol, "tags": f.tags, "token_count": f.token_count,
         "content_hash": f.content_hash, "simhash": f.simhash,
         "chunker_version": f.chunker_version, "version": f.version,
         "owner": rows.user(f.owner_id), "status": f.status,
         "superseded_by": rows.fragment_pid.get(f.superseded_by_id),
         "valid_from": iso(f.valid_from), "valid_to": iso(f.valid_to),
         "recorded_at": iso(f.recorded_at), "last_edited_at": iso(f.last_edited_at),
         "verified_at": iso(f.verified_at), "retrieved_count": f.retrieved_count,
         "cited_count": f.cited_count, "helped_count": f.helped_count,
         "hurt_count": f.hurt_count, "last_retrieved_at": iso(f.last_retrieved_at),
         "authority": f.authority}
        for f in Fragment.objects.filter(org=org).order_by("id")]


def _plain(value: Any) -> Any:
    return iso(value) if isinstance(value, dt.datetime) else value


# Columns of a git source that are this instance's state of the sync, not what to follow.
SOURCE_STATE_FIELDS = frozenset({"id", "org", "repository", "created_by", "url", "state",
                                 "last_error", "next_sync_at"})


def without_password(url: str) -> str:
    """A URL without its user part (a user name and password, or a token written as the user
    name, before the host's ``@``): ``scheme://host/…``. An scp-like
    ``git@host:path`` has no secret and stays."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if not sep or "@" not in authority:
        return url
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def _sources(org: Organization, rows: _Rows) -> list[dict] | None:
    """Git sources (issue 24; ``contexts.models.Source`` where this instance has it, else
    ``None``: the archive then has no ``sources.jsonl`` and its manifest says so). Every
    column of the row but this instance's sync state, written by name, so a column the model
    gains is carried too; the URL without its password: a credential in it is not carried,
    as tokens are not."""
    try:
        model = apps.get_model("contexts", "Source")
    except LookupError:
        return None
    # Relations by id would carry database ids: the two it has are named below instead.
    fields = [f for f in model._meta.concrete_fields
              if f.name not in SOURCE_STATE_FIELDS and not f.is_relation]
    return [
        {**{f.name: _plain(getattr(source, f.attname)) for f in fields},
         "repository": rows.scope_pid[source.repository.scope_id],
         "created_by": rows.user(source.created_by_id),
         "url": without_password(source.url)}
        for source in model.objects.filter(org=org).select_related("repository")
        .order_by("public_id")]


def _object_grants(org: Organization) -> int:
    """The organization's django-guardian grants (users' and groups'): on the organization
    itself and on its repositories, personas and sessions."""
    total = 0
    for model in (Organization, Repository, Persona, Session):
        pks = ([org.pk] if model is Organization
               else list(model.objects.filter(org=org).values_list("pk", flat=True)))
        if not pks:
            continue
        content_type = ContentType.objects.get_for_model(model)
        wanted = {"content_type": content_type, "object_pk__in": [str(pk) for pk in pks]}
        total += (UserObjectPermission.objects.filter(**wanted).count()
                  + GroupObjectPermission.objects.filter(**wanted).count())
    return total


def export_organization(org: Organization, out: IO[bytes]) -> dict[str, Any]:
    """Write ``org``'s archive to ``out``; returns the manifest's counts.

    One snapshot: outside a transaction, the reads run in one ``REPEATABLE READ`` transaction,
    so a change committed while exporting is either wholly in the archive or not at all."""
    with transaction.atomic():
        if not connection.savepoint_ids:  # this block opened the transaction
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        files = export_files(org)
        grants = _object_grants(org)
    manifest = {
        "exported_at": timezone.now().isoformat(),
        "organization": {"public_id": org.public_id, "slug": org.slug},
        "left_out": LEFT_OUT,
        # What the importer tells its operator was dropped (``import_org`` prints it).
        "left_out_counts": {GRANTS_LEFT_OUT: grants},
        "sources": "sources.jsonl" if "sources.jsonl" in files else
                   "not in this archive: this instance has no git sources",
    }
    write_archive(out, files, manifest)
    return {name: data.count(b"\n") for name, data in files.items()}

