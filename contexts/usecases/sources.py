"""Git sources an organization follows (``docs/sources.md``): adding one, syncing it — now, or
queued for a worker — and listing them. ``manage.py source`` and the console's Sources page are
thin adapters over these; the worker's ``sync_source`` task and beat's ``enqueue_due_sources``
run the sync itself (``contexts.ingestion.git_sync``), below this layer.

Who may: adding a source is administering its repository; syncing and listing an
organization's sources is for its tech leads and administrators (the ``pin`` right on the
organization). A local path (or ``file://`` URL) reads the server's disk, which is the
operator's power: the CLI (``SYSTEM``), or a superuser under ``CONTEXTS_INGEST_ROOTS`` — the
rule of server paths (``contexts.ingestion.server_paths``).
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.lookups import find_in_org, find_org
from accounts.models import Organization, Repository
from accounts.permissions import SYSTEM, may, principal_user
from contexts.ingestion import git_sync, lanes, server_paths
from contexts.ingestion.git_mirror import check_branch
from contexts.ingestion.git_sync import SyncResult
from contexts.ingestion.policy import valid_pattern
from contexts.kernel.ids import InvalidId, parse_public_id
from contexts.models import AuditEvent, Source
from contexts.models.sources_git import MIN_INTERVAL_SECONDS, PERMALINK_FIELDS, redact_url
from contexts.services.audit import record
from contexts.services.errors import InvalidOperation
from contexts.tasks import publish_sync
from contexts.usecases.errors import Refused
from contexts.usecases.scoping import resolve_in_org, resolve_org

MANAGE_REFUSED = "only the organization's administrators and tech leads manage its sources"
ADD_REFUSED = "only the repository's administrators add a source to it"
MAX_INTERVAL_SECONDS = 30 * 24 * 3600
MAX_PATTERNS = 200
REMOTE_SCHEMES = ("https", "http", "ssh", "git")
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*)://")
# git's scp-like syntax for ssh: [user@]host:path, with no slash before the colon.
_SCP_LIKE = re.compile(r"[^/:@\s]+@?[^/:\s]*:[^/]")


@dataclasses.dataclass(frozen=True)
class AddGitSource:
    """A git repository (any URL git can clone, or a local path) to follow into one
    repository scope of an organization (both by slug or public id)."""

    org: str
    repo: str
    url: str
    branch: str = "main"
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    interval_seconds: int = 900
    web_url_template: str = ""


@dataclasses.dataclass(frozen=True)
class SyncSource:
    """Sync a source (public id) now: ``wait`` runs it in this process and returns what it
    did; otherwise it is queued for a worker. ``org`` (slug or public id), when given, is the
    organization it must belong to (the console's page). ``full`` reconciles the whole tree
    (after changing its patterns)."""

    source: str
    org: str | None = None
    wait: bool = False
    full: bool = False


@dataclasses.dataclass(frozen=True)
class ListSources:
    org: str


@dataclasses.dataclass(frozen=True)
class ListSyncs:
    """The record of each sync of an organization's sources that applied changes, newest
    first; ``source`` (a public id) narrows it to one source."""

    org: str
    source: str = ""


def add_source(principal: Any, command: AddGitSource) -> Source:
    org = _org(principal, command.org)
    repository = (find_in_org(Repository, org, command.repo) if principal is SYSTEM
                  else resolve_in_org(org, "repo", command.repo))
    if repository is None:
        raise InvalidOperation(f"no repository {command.repo!r} in {org.slug}", field="repo")
    if not may(principal, "administer", repository.scope):
        raise Refused(ADD_REFUSED)
    settings = check_settings(principal, SourceSettings(
        url=command.url, branch=command.branch, include=command.include,
        exclude=command.exclude, interval_seconds=command.interval_seconds,
        web_url_template=command.web_url_template))
    existing = Source.objects.filter(org=org, repository=repository).first()
    if existing is not None:
        raise InvalidOperation(f"repository {repository.slug} already follows source "
                               f"{existing.public_id}", field="repo")
    try:
        with transaction.atomic():
            source = Source.objects.create(
                org=org, repository=repository, created_by=principal_user(principal),
                **dataclasses.asdict(settings))
            record(principal, "source.create", source, after={
                "repository": repository.public_id, **dataclasses.asdict(settings),
                "url": redact_url(settings.url)})
    except IntegrityError as exc:  # added by someone else meanwhile
        raise InvalidOperation(f"repository {repository.slug} already follows a source",
                               field="repo") from exc
    return source


@dataclasses.dataclass(frozen=True)
class SourceSettings:
    """What a source follows and how: the columns of ``Source`` a person (``source add``) or
    an archive (``import_org``) chooses, checked by :func:`check_settings` either way."""

    url: str
    branch: str = "main"
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    interval_seconds: int = 900
    web_url_template: str = ""


def check_settings(principal: Any, settings: SourceSettings, *,
                   from_archive: bool = False) -> SourceSettings:
    """``settings`` cleaned, or :class:`InvalidOperation` naming the column at fault: the one
    set of rules for a source, whether ``source add`` or the console adds it or an import
    restores it (``contexts.usecases.portability``).

    ``from_archive``: the values were read from an archive, not typed by ``principal``. The
    archive is the exporting organization's data, so a local path in it gets no operator's
    right: it is held to the console's rule (under ``CONTEXTS_INGEST_ROOTS``, never the
    instance's own data — other tenants' mirrors under ``var/sources`` included)."""
    if not isinstance(settings.interval_seconds, int) or isinstance(settings.interval_seconds,
                                                                    bool):
        raise InvalidOperation("the interval is a whole number of seconds",
                               field="interval_seconds")
    for name in ("url", "branch", "web_url_template"):
        if not isinstance(getattr(settings, name), str):
            raise InvalidOperation("must be text", field=name)
    for name in ("include", "exclude"):
        patterns = getattr(settings, name)
        if not isinstance(patterns, list | tuple) or not all(isinstance(p, str)
                                                            for p in patterns):
            raise InvalidOperation("must be a list of patterns", field=name)
    url = _check_url(principal, settings.url, from_archive=from_archive)
    if not check_branch(settings.branch):
        raise InvalidOperation(f"{settings.branch!r} is not a branch name git accepts",
                               field="branch")
    include = _check_patterns(settings.include, "include")
    exclude = _check_patterns(settings.exclude, "exclude")
    if not MIN_INTERVAL_SECONDS <= settings.interval_seconds <= MAX_INTERVAL_SECONDS:
        raise InvalidOperation(f"the interval is {MIN_INTERVAL_SECONDS} s to "
                               f"{MAX_INTERVAL_SECONDS} s", field="interval_seconds")
    return SourceSettings(url=url, branch=settings.branch, include=include, exclude=exclude,
                          interval_seconds=settings.interval_seconds,
                          web_url_template=_check_template(settings.web_url_template))


def sync_source(principal: Any, command: SyncSource) -> SyncResult | None:
    """Run the sync here (``wait``: waits for one already running, then runs) and return what
    it did, or queue it for a worker once the transaction commits (None)."""
    source = _source(principal, command.source, command.org)
    record(principal, "source.sync", source, after={"wait": command.wait,
                                                    "full": command.full})
    if command.wait:
        return git_sync.run_sync(source.pk, full=command.full, wait=True)
    task_id = git_sync.task_id(source.public_id, timezone.now())
    # A person asked: the interactive lane, not behind a bulk ingest.
    transaction.on_commit(partial(publish_sync, source.pk, task_id, command.full,
                                  queue=lanes.for_sync(by_person=True)))
    return None


def list_sources(principal: Any, command: ListSources) -> list[Source]:
    org = _org(principal, command.org)
    if not may_manage(principal, org):
        raise Refused(MANAGE_REFUSED)
    return list(Source.objects.filter(org=org).select_related("repository")
                .order_by("repository__slug"))


def list_syncs(principal: Any, command: ListSyncs) -> QuerySet[AuditEvent]:
    """What each sync did (the ``source.synced`` audit events ``git_sync.record`` writes):
    commit range, files, fragments. For those who manage the organization's sources; a
    ``source`` that is not one of them is :class:`InvalidOperation` naming ``source``."""
    org = _org(principal, command.org)
    if not may_manage(principal, org):
        raise Refused(MANAGE_REFUSED)
    events = AuditEvent.objects.filter(org=org, action=git_sync.SYNC_RECORDED,
                                       object_type="source")
    if command.source:
        try:
            public_id = parse_public_id(command.source, "source")
        except InvalidId:
            raise InvalidOperation("not a source id", field="source") from None
        if not Source.objects.filter(org=org, public_id=public_id).exists():
            raise InvalidOperation("no such source in this organization", field="source")
        events = events.filter(object_id=public_id)
    return events.order_by("-created_at", "-pk")


def may_manage(principal: Any, org: Organization) -> bool:
    return may(principal, "pin", org.scope)


def _org(principal: Any, ref: str) -> Organization:
    if principal is SYSTEM:
        org = find_org(ref)
        if org is None:
            raise InvalidOperation(f"no organization {ref!r}", field="org")
        return org
    return resolve_org(principal, ref)


def _source(principal: Any, public_id: str, org_ref: str | None) -> Source:
    try:
        parse_public_id(public_id, "source")
    except InvalidId:  # a NUL or a newline: no such source, before any query
        raise Refused("no such source among those you manage") from None
    source = (Source.objects.select_related("org__scope", "repository")
              .filter(public_id=public_id).first())
    if org_ref is not None and source is not None:
        org = _org(principal, org_ref)
        source = source if source.org_id == org.pk else None
    # Missing and not yours answer alike.
    if source is None or not may_manage(principal, source.org):
        raise Refused(f"no source {public_id} among those you manage")
    return source


def _check_url(principal: Any, raw: str, *, from_archive: bool = False) -> str:
    """A URL git may fetch from: a remote one (``https``, ``ssh``, ``git``, scp-like
    ``user@host:path``) as given, a local path resolved (the operator's, or a superuser's
    under an ingest root; one read from an archive: under an ingest root only). Never git's
    ``transport::address`` form (``ext::`` runs a command) nor anything git could read as an
    option."""
    url = raw.strip()
    if not url or url.startswith("-") or any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise InvalidOperation("name a git URL or a local path", field="url")
    if "::" in url.split("/", 1)[0]:
        raise InvalidOperation("git's transport::address URLs are not accepted", field="url")
    scheme = _SCHEME.match(url)
    if scheme is not None:
        name = scheme.group(1).lower()
        if name == "file":
            return _local_path(principal, url[len("file://"):], from_archive)
        if name not in REMOTE_SCHEMES:
            raise InvalidOperation(f"{name}:// is not accepted; use one of "
                                   f"{', '.join(REMOTE_SCHEMES)} or a local path", field="url")
        return url
    if not url.startswith(("/", ".", "~")) and _SCP_LIKE.match(url):
        return url
    return _local_path(principal, url, from_archive)


def _local_path(principal: Any, path: str, from_archive: bool = False) -> str:
    operator = principal is SYSTEM and not from_archive
    if not operator and not from_archive:
        # A person typing a path needs the right; an archive's path (imported by the operator
        # or a superuser) needs only to lie under an ingest root, checked below.
        server_paths.require_path_right(principal)
    try:
        return str(server_paths.check_server_path(path, operator=operator))
    except server_paths.PathRefused as exc:
        raise InvalidOperation(str(exc), field="url") from exc


def _check_patterns(patterns: Sequence[str], field: str) -> list[str]:
    cleaned = [p.strip() for p in patterns if p.strip()]
    if len(cleaned) > MAX_PATTERNS:
        raise InvalidOperation(f"at most {MAX_PATTERNS} patterns", field=field)
    for pattern in cleaned:
        if any(ord(c) < 32 for c in pattern) or not valid_pattern(pattern):
            raise InvalidOperation(f"{pattern!r} is not a gitignore-style pattern", field=field)
    return cleaned


def _check_template(template: str) -> str:
    """A permalink template: an http(s) URL with ``{commit}``, ``{path}``, ``{start_line}``,
    ``{end_line}`` and nothing else in braces."""
    template = template.strip()
    if not template:
        return ""
    if not template.lower().startswith(("https://", "http://")):
        raise InvalidOperation("the permalink template is an http(s) URL",
                               field="web_url_template")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template)
                 if name is not None}
        unknown = names - set(PERMALINK_FIELDS)
        if unknown:
            raise InvalidOperation(
                f"unknown placeholder(s) {', '.join(sorted(unknown))}; a permalink template "
                "may use " + ", ".join("{" + name + "}" for name in PERMALINK_FIELDS),
                field="web_url_template")
        template.format(**dict.fromkeys(PERMALINK_FIELDS, "x"))
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        if isinstance(exc, InvalidOperation):
            raise
        raise InvalidOperation(f"the permalink template does not parse: {exc}",
                               field="web_url_template") from exc
    return template
