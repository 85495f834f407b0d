"""Restoring an archive (``archive.read_archive``) as a new organization, in the caller's
transaction: any bad row raises :class:`ArchiveRefused` naming its file, line and field, and
the caller's rollback leaves nothing behind.

Public ids are kept when they are free in this instance, so agents' configurations naming a
repository or persona keep working after a move; one already taken (an import into the
instance it came from) gets a new one, and audit events are rewritten to name it. Users are
matched by username; one this instance lacks is created **inactive**, without a password
(``docs/export-format.md``, *Users*).

A row is held to the rules of the live path that creates its kind of object, from the same
code: an owner (of a fragment, a context, a nudge, a git source) must be a member of the
organization (``accounts.permissions.may_own``); a git source's URL, branch, patterns,
interval and permalink template pass ``contexts.usecases.sources.check_settings``, which the
use case hands in as ``check_source`` (this layer sits below it). A git source always gets a
new public id: its mirror on disk is named by it (``VAR_DIR/sources/<public id>.git``), so an
id from the archive could name another organization's mirror.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db.models import DateTimeField
from django.utils.dateparse import parse_datetime

from accounts.models import (
    SLUG_VALIDATOR,
    Membership,
    Organization,
    Persona,
    Repository,
    Role,
    Scope,
    Session,
)
from accounts.permissions import may_own
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
from contexts.models.fragments import (
    FragmentKind,
    FragmentStatus,
    LinkKind,
    Namespace,
    fragment_public_id,
)
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.portability.archive import GRANTS_LEFT_OUT, Archive, ArchiveRefused
from contexts.services import fragments as fragment_service
from contexts.services.errors import InvalidOperation

# New uids for fragments whose own is taken in this instance (a copy in the instance it came
# from): derived from the new organization's public id and the old uid, so unique per copy.
IMPORT_NAMESPACE = uuid.UUID("2b0f8a4e-7c61-4d2a-9a0e-5d3c1f7e6b21")
# A git source's settings by column name → the same, cleaned; InvalidOperation naming the
# column otherwise (``contexts.usecases.sources.check_settings`` for the importer).
SourceCheck = Callable[[dict[str, Any]], dict[str, Any]]
# The columns of a source that check_source rules on.
SOURCE_SETTINGS = ("url", "branch", "include", "exclude", "interval_seconds",
                   "web_url_template")


@dataclasses.dataclass
class Restored:
    org: Organization
    counts: dict[str, int]
    renamed: int                  # public ids that were taken here and got new ones
    created_users: list[str]      # usernames created inactive
    fragment_ids: list[int]       # database ids of the restored fragments
    # Object permissions (repository roles and other per-object grants) the exporting
    # instance had and the archive does not carry; None: an older archive that does not say.
    dropped_grants: int | None = None


class _Row:
    """One row of one file, for reading fields with errors that say where."""

    def __init__(self, name: str, line: int, data: dict) -> None:
        self.name, self.line, self.data = name, line, data

    def refuse(self, key: str, why: str) -> ArchiveRefused:
        return ArchiveRefused(f"{self.name} line {self.line}: {key} {why}",
                              field=f"{self.name}.{key}")

    def get(self, key: str, kind: type | tuple = str, *, required: bool = True,
            default: Any = None) -> Any:
        value = self.data.get(key, default)
        if value is None:
            if required:
                raise self.refuse(key, "is missing")
            return default
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.refuse(key, f"has the wrong type ({type(value).__name__})")
        return value

    def text(self, key: str, max_length: int | None = None, *, required: bool = False) -> str:
        value = self.get(key, str, required=required, default="")
        if max_length is not None and len(value) > max_length:
            raise self.refuse(key, f"is longer than {max_length} characters")
        return value

    def when(self, key: str, *, required: bool = False) -> dt.datetime | None:
        value = self.get(key, str, required=required)
        if value is None:
            return None
        parsed = parse_datetime(value)
        if parsed is None or parsed.tzinfo is None:
            raise self.refuse(key, f"is not an ISO 8601 time with a zone: {value!r}")
        return parsed

    def choice(self, key: str, choices: list[str], default: str | None = None) -> str:
        value = self.get(key, str, required=default is None, default=default)
        if value not in choices:
            raise self.refuse(key, f"is {value!r}, not one of {', '.join(choices)}")
        return value


class _Restore:
    def __init__(self, archive: Archive, principal: Any,
                 created: Callable[[Organization], None],
                 check_source: SourceCheck | None) -> None:
        self.archive = archive
        self.created = created
        self.check_source = check_source
        self.principal = principal
        self.org: Organization | None = None
        self.may_own: dict[int, bool] = {}  # user id → member of the new organization
        self.renamed: dict[str, str] = {}  # archive public id → the one given here
        self.scopes: dict[str, Scope] = {}  # archive scope public id → scope here
        self.fragments: dict[str, Fragment] = {}
        self.documents: dict[tuple[str | None, str], SourceDocument] = {}
        self.users: dict[str, Any] = {}
        self.user_rows: dict[str, dict] = {}
        self.created_users: list[str] = []
        self.counts: dict[str, int] = {}
        taken = Scope.objects.filter(public_id__in=self._all_scope_ids()).values_list(
            "public_id", flat=True)
        self.taken_scope_ids = set(taken) | set(Organization.objects.filter(
            public_id__in=self._all_scope_ids()).values_list("public_id", flat=True))

    # -- reading -------------------------------------------------------------------------------
    def rows(self, name: str) -> list[_Row]:
        rows = [_Row(name, n, data) for n, data in enumerate(self.archive.rows(name), start=1)]
        self.counts[name.removesuffix(".jsonl")] = len(rows)
        return rows

    def _all_scope_ids(self) -> list[str]:
        ids = []
        for name in ("organization.jsonl", "repositories.jsonl", "personas.jsonl",
                     "sessions.jsonl", "contexts.jsonl"):
            ids.extend(str(row.get("public_id")) for row in self.archive.rows(name))
        return ids

    def public_id(self, row: _Row) -> str:
        """The archive's public id, or ``""`` (a new one is made on save) when it is taken."""
        pid = row.text("public_id", 32, required=True)
        if pid in self.scopes or pid in self.renamed:
            raise row.refuse("public_id", f"{pid!r} appears twice")
        return "" if pid in self.taken_scope_ids else pid

    def scope(self, row: _Row, key: str, *, required: bool = True) -> Scope | None:
        pid = row.get(key, str, required=required)
        if pid is None:
            return None
        if pid not in self.scopes:
            raise row.refuse(key, f"names {pid!r}, which is not a scope of this archive")
        return self.scopes[pid]

    def scoped(self, row: _Row, key: str, model: type, kind: str) -> Any:
        """The object (repository, persona, context) a row names by its scope's public id."""
        scope = self.scope(row, key, required=False)
        if scope is None:
            return None
        if scope.kind != kind:
            raise row.refuse(key, f"names a {scope.kind} scope, not a {kind}")
        return model.objects.get(scope=scope)

    def fragment(self, row: _Row, key: str) -> Fragment:
        pid = row.get(key, str)
        if pid not in self.fragments:
            raise row.refuse(key, f"names {pid!r}, which is not a fragment of this archive")
        return self.fragments[pid]

    def user(self, row: _Row, key: str, *, required: bool = False) -> Any:
        name = row.get(key, str, required=required)
        return None if name is None else self.user_named(row, key, name)

    def user_named(self, row: _Row, key: str, name: str) -> Any:
        if name in self.users:
            return self.users[name]
        User = get_user_model()
        user = User.objects.filter(**{User.USERNAME_FIELD: name}).first()
        if user is None:
            try:
                UnicodeUsernameValidator()(name)
            except ValidationError:
                raise row.refuse(key, f"{name!r} is not a valid username") from None
            if len(name) > 150:
                raise row.refuse(key, "is longer than 150 characters")
            details = self.user_rows.get(name, {})
            # Inactive and without a password: an administrator here decides who may sign in.
            user = User(**{User.USERNAME_FIELD: name}, is_active=False,
                        email=str(details.get("email") or "")[:254],
                        first_name=str(details.get("first_name") or "")[:150],
                        last_name=str(details.get("last_name") or "")[:150])
            user.set_unusable_password()
            user.save()
            self.created_users.append(name)
        self.users[name] = user
        return user

    def owner(self, row: _Row, key: str, *, required: bool = False) -> Any:
        """The user a row names as an owner: a member of the organization (by
        ``memberships.jsonl``), as the live paths require (``may_own``)."""
        name = row.get(key, str, required=required)
        return None if name is None else self.owner_named(row, key, name)

    def owner_named(self, row: _Row, key: str, name: str) -> Any:
        user = self.user_named(row, key, name)
        if user.pk not in self.may_own:
            self.may_own[user.pk] = may_own(user, self.org.pk, active=False)
        if not self.may_own[user.pk]:
            raise row.refuse(key, f"names {name!r}, who is not a member of the organization "
                             "(memberships.jsonl)")
        return user

    def remember(self, archive_pid: str, obj: Any) -> None:
        self.scopes[archive_pid] = obj.scope
        if obj.public_id != archive_pid:
            self.renamed[archive_pid] = obj.public_id

    # -- writing -------------------------------------------------------------------------------
    def run(self, slug: str, name: str | None = None, org_id: int | None = None) -> Restored:
        for row in self.rows("users.jsonl"):
            self.user_rows[row.text("username", 150, required=True)] = row.data
        org = self.org = self.organization(slug, name, org_id)
        for row in self.rows("memberships.jsonl"):
            Membership.objects.create(user=self.user(row, "user", required=True), org=org,
                                      role=row.choice("role", Role.values),
                                      created_at=row.when("created_at") or org.created_at)
        self.repositories(org)
        self.personas(org)
        self.sessions(org)
        self.contexts(org)
        self.subscriptions(org)
        self.source_documents(org)
        self.sources(org)
        self.import_fragments(org)
        self.pointers(org)
        self.pins(org)
        self.links(org)
        self.nudges(org)
        self.audit_events(org)
        return Restored(org=org, counts=self.counts, renamed=len(self.renamed),
                        created_users=self.created_users,
                        fragment_ids=[f.pk for f in self.fragments.values()],
                        dropped_grants=_dropped_grants(self.archive.manifest))

    def organization(self, slug: str, name: str | None = None,
                     org_id: int | None = None) -> Organization:
        rows = self.rows("organization.jsonl")
        if len(rows) != 1:
            raise ArchiveRefused("organization.jsonl must hold exactly one row",
                                 field="organization.jsonl")
        row = rows[0]
        archive_pid = row.text("public_id", 32, required=True)
        org = Organization(id=org_id, slug=slug, name=name or _imported_name(row, slug),
                           created_at=row.when("created_at", required=True),
                           proposal_policy=row.choice("proposal_policy", _policies(),
                                                      "review"))
        if archive_pid not in self.taken_scope_ids:
            org.public_id = archive_pid
        org.save(force_insert=True)  # a new row, also under an id given beforehand
        self.created(org)
        self.remember(archive_pid, org)
        return org

    def repositories(self, org: Organization) -> None:
        for row in self.rows("repositories.jsonl"):
            repo = Repository(org=org, public_id=self.public_id(row),
                              slug=_slug(row, "slug"), name=row.text("name", 200),
                              url=row.text("url", 500),
                              default_branch=row.text("default_branch", 100) or "main",
                              proposal_policy=row.choice("proposal_policy", _policies(),
                                                         "review"))
            repo.save()
            self.remember(row.data["public_id"], repo)

    def personas(self, org: Organization) -> None:
        for row in self.rows("personas.jsonl"):
            persona = Persona(org=org, public_id=self.public_id(row), slug=_slug(row, "slug"),
                              name=row.text("name", 200), description=row.text("description"),
                              halflife_days=row.get("halflife_days", dict, required=False,
                                                     default={}),
                              **{w: float(row.get(w, (int, float), required=False,
                                                  default=Persona._meta.get_field(w).default))
                                 for w in ("w_r", "w_f", "w_c", "w_p")})
            persona.save()
            self.remember(row.data["public_id"], persona)

    def sessions(self, org: Organization) -> None:
        for row in self.rows("sessions.jsonl"):
            session = Session(
                org=org, public_id=self.public_id(row),
                external_id=row.text("external_id", 120, required=True),
                repository=self.scoped(row, "repository", Repository, "repo"),
                persona=self.scoped(row, "persona", Persona, "persona"),
                created_at=row.when("created_at", required=True),
                expires_at=row.when("expires_at"), closed_at=row.when("closed_at"))
            session.save()
            self.remember(row.data["public_id"], session)

    def contexts(self, org: Organization) -> None:
        for row in self.rows("contexts.jsonl"):
            context = Context(org=org, public_id=self.public_id(row), slug=_slug(row, "slug"),
                              name=row.text("name", 200), description=row.text("description"),
                              home=self.scope(row, "home"),
                              published=row.get("published", bool, required=False,
                                                default=False),
                              created_at=row.when("created_at", required=True))
            context.save()
            self.remember(row.data["public_id"], context)
            owners = row.get("owners", list, required=False, default=[])
            ContextOwner.objects.bulk_create([
                ContextOwner(org=org, context=context,
                             user=self.owner_named(row, "owners", str(name)))
                for name in owners])

    def subscriptions(self, org: Organization) -> None:
        for row in self.rows("subscriptions.jsonl"):
            context = self.scoped(row, "context", Context, "context")
            if context is None:
                raise row.refuse("context", "is missing")
            ContextSubscription.objects.create(
                org=org, context=context,
                subscriber=self.scope(row, "subscriber"),
                created_by=self.user(row, "created_by"),
                created_at=row.when("created_at", required=True))

    def _document_key(self, row: _Row, value: dict) -> tuple[str | None, str]:
        repo = value.get("repository")
        if repo is not None and (repo not in self.scopes or self.scopes[repo].kind != "repo"):
            raise row.refuse("repository", f"names {repo!r}, not a repository of this archive")
        path = value.get("path")
        if not isinstance(path, str) or not path or len(path) > 1000:
            raise row.refuse("path", "is missing or longer than 1000 characters")
        return repo, path

    def source_documents(self, org: Organization) -> None:
        documents = []
        for row in self.rows("documents.jsonl"):
            key = self._document_key(row, row.data)
            if key in self.documents:
                raise row.refuse("path", f"{key[1]!r} appears twice")
            repo_scope = self.scopes[key[0]] if key[0] else None
            document = SourceDocument(
                org=org, path=key[1],
                repository=Repository.objects.get(scope=repo_scope) if repo_scope else None,
                language=row.text("language", 32), author=row.text("author", 200),
                authored_at=row.when("authored_at"),
                content_hash=row.text("content_hash", 64, required=True),
                size_bytes=row.get("size_bytes", int, required=False, default=0),
                ingested_at=row.when("ingested_at", required=True),
                changed_at=row.when("changed_at"),
                links=row.get("links", list, required=False, default=[]),
                front_links=row.get("front_links", list, required=False, default=[]))
            if hasattr(document, "source_commit"):  # a git source's document (issue 24)
                document.source_commit = row.get("source_commit", str, required=False)
            elif row.data.get("source_commit") is not None:
                raise row.refuse("source_commit", "names a git commit; this instance has no "
                                 "git sources")
            self.documents[key] = document
            documents.append(document)
        SourceDocument.objects.bulk_create(documents, batch_size=500)

    def import_fragments(self, org: Organization) -> None:
        rows = self.rows("fragments.jsonl")
        uids = {}
        for row in rows:
            try:
                uids[row] = uuid.UUID(row.text("uid", 36, required=True))
            except ValueError:
                raise row.refuse("uid", "is not a UUID") from None
        taken_uids = set(Fragment.objects.filter(uid__in=list(uids.values())).values_list(
            "uid", flat=True))
        taken_pids = set(Fragment.objects.filter(
            public_id__in=[row.data.get("public_id") for row in rows]).values_list(
            "public_id", flat=True))
        fragments, memberships, supersessions = [], [], []
        for row in rows:
            pid = row.text("public_id", 32, required=True)
            if pid in self.fragments:
                raise row.refuse("public_id", f"{pid!r} appears twice")
            uid = uids[row]
            if uid in taken_uids or pid in taken_pids:
                uid = uuid.uuid5(IMPORT_NAMESPACE, f"{org.public_id}|{uid}")
                self.renamed[pid] = fragment_public_id(uid)
            fragment = Fragment(
                uid=uid, public_id=self.renamed.get(pid, pid), org=org,
                scope=self.scope(row, "scope"),
                kind=row.choice("kind", FragmentKind.values),
                namespace=row.choice("namespace", Namespace.values),
                negative=row.get("negative", bool), title=row.text("title", 300),
                heading_path=_strings(row, "heading_path", 300),
                body=row.text("body", required=True), language=row.text("language", 32),
                natural_language=row.text("natural_language", 8),
                symbol=row.text("symbol", 300), tags=_strings(row, "tags", 50),
                token_count=_count(row, "token_count"),
                content_hash=row.text("content_hash", 64, required=True),
                simhash=row.get("simhash", int, required=False),
                chunker_version=row.text("chunker_version", 32),
                version=_count(row, "version", minimum=1),
                owner=self.owner(row, "owner"),
                status=row.choice("status", FragmentStatus.values),
                valid_from=row.when("valid_from", required=True), valid_to=row.when("valid_to"),
                recorded_at=row.when("recorded_at", required=True),
                last_edited_at=row.when("last_edited_at", required=True),
                verified_at=row.when("verified_at"),
                retrieved_count=_count(row, "retrieved_count"),
                cited_count=_count(row, "cited_count"), helped_count=_count(row, "helped_count"),
                hurt_count=_count(row, "hurt_count"),
                last_retrieved_at=row.when("last_retrieved_at"),
                authority=float(row.get("authority", (int, float), required=False,
                                        default=0.0)))
            self.fragments[pid] = fragment
            fragments.append(fragment)
            for context_pid in row.get("contexts", list, required=False, default=[]):
                scope = self.scopes.get(context_pid)
                if scope is None or scope.kind != "context":
                    raise row.refuse("contexts", f"names {context_pid!r}, not a context of "
                                     "this archive")
                memberships.append((fragment, Context.objects.get(scope=scope)))
        for row in rows:
            if row.data.get("superseded_by") is not None:
                supersessions.append((self.fragments[row.data["public_id"]],
                                      self.fragment(row, "superseded_by")))
        versions = []
        seen: set[tuple[str, int]] = set()
        for row in self.rows("versions.jsonl"):
            fragment = self.fragment(row, "fragment")
            number = _count(row, "number", minimum=1)
            if (fragment.public_id, number) in seen:
                raise row.refuse("number", f"{number} appears twice for {fragment.public_id}")
            seen.add((fragment.public_id, number))
            versions.append(FragmentVersion(
                org=org, fragment=fragment, number=number, title=row.text("title", 300),
                body=row.get("body", str), metadata=row.get("metadata", dict, required=False,
                                                             default={}),
                editor=self.user(row, "editor"), reason=row.text("reason", 300),
                created_at=row.when("created_at", required=True)))
        fragment_service.import_fragments(self.principal, org.scope, fragments, versions,
                                           in_contexts=memberships,
                                           supersessions=supersessions)

    def pointers(self, org: Organization) -> None:
        pointers = []
        for row in self.rows("pointers.jsonl"):
            value = row.get("document", dict)
            key = self._document_key(row, value)
            if key not in self.documents:
                raise row.refuse("document", f"names {key[1]!r}, not in documents.jsonl")
            pointers.append(SourcePointer(
                org=org, fragment=self.fragment(row, "fragment"), document=self.documents[key],
                anchor=row.text("anchor", 500, required=True),
                start_line=row.get("start_line", int, required=False),
                end_line=row.get("end_line", int, required=False),
                content_hash=row.text("content_hash", 64),
                created_at=row.when("created_at", required=True)))
        SourcePointer.objects.bulk_create(pointers, batch_size=500)

    def pins(self, org: Organization) -> None:
        Pin.objects.bulk_create([
            Pin(org=org, fragment=self.fragment(row, "fragment"), scope=self.scope(row, "scope"),
                pinned_by=self.user(row, "pinned_by"), reason=row.text("reason", 300),
                position=_count(row, "position"), expires_at=row.when("expires_at"),
                created_at=row.when("created_at", required=True))
            for row in self.rows("pins.jsonl")], batch_size=500)

    def links(self, org: Organization) -> None:
        Link.objects.bulk_create([
            Link(org=org, source=self.fragment(row, "source"),
                 target=self.fragment(row, "target"),
                 kind=row.choice("kind", LinkKind.values),
                 created_at=row.when("created_at", required=True))
            for row in self.rows("links.jsonl")], batch_size=500)

    def nudges(self, org: Organization) -> None:
        Nudge.objects.bulk_create([
            Nudge(org=org, fragment=self.fragment(row, "fragment"),
                  owner=self.owner(row, "owner", required=True),
                  reasons=row.get("reasons", list, required=False, default=[]),
                  state=row.choice("state", NudgeState.values),
                  answer=row.choice("answer", ["", *NudgeAnswer.values], ""),
                  answered_by=self.user(row, "answered_by"),
                  created_at=row.when("created_at", required=True),
                  escalated_at=row.when("escalated_at"), answered_at=row.when("answered_at"))
            for row in self.rows("nudges.jsonl")], batch_size=500)

    def audit_events(self, org: Organization) -> None:
        # Tokens are not carried (their secrets cannot be): an event keeps its actor's name.
        AuditEvent.objects.bulk_create([
            AuditEvent(org=org, actor=self.user(row, "actor"),
                       action=row.text("action", 40, required=True),
                       object_type=row.text("object_type", 40, required=True),
                       object_id=self._renamed(row.text("object_id", 64, required=True)),
                       before=row.data.get("before"), after=row.data.get("after"),
                       request_id=row.text("request_id", 64),
                       created_at=row.when("created_at", required=True))
            for row in self.rows("audit_events.jsonl")], batch_size=500)

    def sources(self, org: Organization) -> None:
        """Git sources, where this instance has them (``export._sources``): each column the
        model has, by name; due for a sync at once (its documents are those of
        ``last_commit``, so the sync picks up from there), idle, with no error. What it
        follows passes ``check_source`` (the rules of ``source add``); its creator — the
        default owner of what it syncs — must be a member; its public id is always new."""
        rows = self.rows("sources.jsonl")
        if not rows:
            return
        try:
            model = apps.get_model("contexts", "Source")
        except LookupError:
            # Refused, not half-read: the archive's git sources would be lost silently.
            raise ArchiveRefused("this instance has no git sources to restore "
                                 "sources.jsonl into", field="sources.jsonl") from None
        if self.check_source is None:
            raise ArchiveRefused("this restore cannot check git sources",
                                 field="sources.jsonl")
        fields = {f.name: f for f in model._meta.concrete_fields
                  if f.name not in {"id", "org", "repository", "created_by", "public_id",
                                    "state", "last_error", "next_sync_at", *SOURCE_SETTINGS}}
        for row in rows:
            values = {}
            for name, field in fields.items():
                if name not in row.data:
                    continue
                value = row.data[name]
                if isinstance(field, DateTimeField) and value is not None:
                    value = row.when(name)
                values[name] = value
            values.update(self._source_settings(row, model))
            pid = row.text("public_id", 32, required=True)
            # Never the archive's id: the mirror's directory is named by it.
            source = model(org=org, repository=self.scoped(row, "repository", Repository,
                                                             "repo"),
                           created_by=self.owner(row, "created_by"), **values)
            if source.repository_id is None:
                raise row.refuse("repository", "is missing")
            try:
                source.full_clean(exclude=["org", "repository", "created_by", "public_id"])
            except ValidationError as exc:
                key, errors = next(iter(exc.message_dict.items()))
                raise row.refuse(key, errors[0]) from None
            source.save()
            self.renamed[pid] = source.public_id

    def _source_settings(self, row: _Row, model: type) -> dict[str, Any]:
        defaults = {name: model._meta.get_field(name).get_default()
                    for name in SOURCE_SETTINGS}
        given = {name: row.data.get(name, defaults[name]) for name in SOURCE_SETTINGS}
        try:
            return self.check_source(given)
        except InvalidOperation as exc:
            raise row.refuse(exc.field or "url", f"is refused: {exc}") from None

    def _renamed(self, public_id: str) -> str:
        return self.renamed.get(public_id, public_id)


def _policies() -> list[str]:
    return [choice for choice, _ in Organization._meta.get_field("proposal_policy").choices]


def _slug(row: _Row, key: str) -> str:
    value = row.text(key, 63, required=True)
    try:
        SLUG_VALIDATOR(value)
    except ValidationError:
        raise row.refuse(key, f"{value!r} is not a slug") from None
    return value


def _count(row: _Row, key: str, *, minimum: int = 0) -> int:
    value = row.get(key, int, required=False, default=minimum)
    if value < minimum or value > 2**31 - 1:
        raise row.refuse(key, f"is {value}, out of range")
    return value


def _strings(row: _Row, key: str, max_length: int) -> list[str]:
    values = row.get(key, list, required=False, default=[])
    if not all(isinstance(v, str) and len(v) <= max_length for v in values):
        raise row.refuse(key, f"must be a list of strings of at most {max_length} characters")
    return values


def _imported_name(row: _Row, slug: str) -> str:
    """The display name when the operator gives none: the archive's, and under another slug
    the archive's followed by the new slug — the organization switcher shows names, and two
    organizations named alike there cannot be told apart."""
    archived = row.text("name", 200) or slug
    if slug == row.text("slug", 63):
        return archived
    suffix = f" ({slug})"
    return archived[:200 - len(suffix)] + suffix


def _dropped_grants(manifest: dict) -> int | None:
    """How many object permissions the exporting instance had that the archive leaves out
    (``left_out_counts`` in the manifest; an older archive does not say)."""
    counts = manifest.get("left_out_counts")
    value = counts.get(GRANTS_LEFT_OUT) if isinstance(counts, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def restore(archive: Archive, principal: Any, slug: str,
            created: Callable[[Organization], None] = lambda org: None,
            check_source: SourceCheck | None = None, name: str | None = None,
            org_id: int | None = None) -> Restored:
    """Restore ``archive`` as organization ``slug`` (named ``name``, else the archive's name;
    ``org_id``: the id to give it, its partition made already; the caller's transaction, which
    has asked :func:`refuse_unusable_slug` before making anything for it); ``created``
    hears of the organization as soon as its row exists (what a rollback must clean up beside
    the database: the node's index directory). ``check_source`` rules on each git source's
    settings (without it, an archive with git sources is refused)."""
    return _Restore(archive, principal, created, check_source).run(slug, name, org_id)


def refuse_unusable_slug(slug: str) -> None:
    """Raise ``ArchiveRefused`` (field ``slug``) for a slug an organization cannot have, or
    one an organization here has already."""
    try:
        SLUG_VALIDATOR(slug)
    except ValidationError as exc:
        raise ArchiveRefused(f"{slug!r}: {exc.messages[0]}", field="slug") from None
    if Organization.objects.filter(slug=slug).exists():
        raise ArchiveRefused(f"an organization {slug!r} exists already; choose another with "
                             "--as", field="slug")
