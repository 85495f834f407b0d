"""Exporting and importing an organization (issue 24): ``manage.py export_org`` /
``import_org``, ``GET /api/orgs/{org}/export`` and the console's Export button.

An export is for the organization's administrators (and the operator's CLI); it is audited
(``org.export``). An import creates an organization, so it is the operator's (the CLI, or a
superuser): it runs in one transaction — a refused or failing import writes nothing — and,
waiting, embeds the fragments in that transaction and brings this node's lexical index up to
date before returning, so the organization is searchable when it returns. Not waiting, the
change feed and the worker's reindexing task do the same shortly after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
from functools import partial
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import DataError, IntegrityError, transaction

from accounts.lookups import find_org
from accounts.models import Organization
from accounts.permissions import SYSTEM, may
from contexts.indexes import follower, indexing
from contexts.models import Context, Fragment, FragmentStatus
from contexts.portability import (
    ArchiveRefused,
    Limits,
    Restored,
    export_organization,
    read_archive,
    refuse_unusable_slug,
    restore,
)
from contexts.retrieval.dense import QueryEmbedding
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.types import RetrievalRequest
from contexts.services import audit, partitions
from contexts.services import fragments as fragment_service
from contexts.usecases import sources
from contexts.usecases.errors import NotVisible, Refused

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ExportOrg:
    org: str  # public id or slug


@dataclasses.dataclass(frozen=True)
class ImportOrg:
    archive: Path
    slug: str | None = None  # None: the archive's own slug
    wait: bool = True        # embed and index before returning
    # The display name; None: the archive's, followed by the new slug when ``slug`` differs
    # from the archive's (``restore``'s rule: the switcher never shows two alike).
    name: str | None = None


def exportable_org(principal: Any, command: ExportOrg) -> Organization:
    """The organization, if the principal administers it: 404 for one it cannot see (another
    organization's, or none), 403 for a member without the role."""
    org = find_org(command.org) if command.org else None
    if org is None or not may(principal, "view", org.scope):
        raise NotVisible("no such organization")
    if not may(principal, "administer", org.scope):
        raise Refused("exporting an organization needs the admin role in it")
    return org


def export_org(principal: Any, command: ExportOrg, out: IO[bytes]) -> dict[str, int]:
    """Write the organization's archive to ``out``; returns rows per file."""
    org = exportable_org(principal, command)
    counts = export_organization(org, out)
    audit.record(principal, "org.export", org, org=org,
                 after={"fragments": counts.get("fragments.jsonl", 0),
                        "versions": counts.get("versions.jsonl", 0)})
    return counts


def _limits() -> Limits:
    return Limits(archive_bytes=settings.IMPORT_MAX_BYTES,
                  member_bytes=settings.IMPORT_MAX_MEMBER_BYTES,
                  total_bytes=settings.IMPORT_MAX_TOTAL_BYTES)


def import_org(principal: Any, command: ImportOrg) -> Restored:
    """Restore an archive as a new organization; raises ``ArchiveRefused`` (a
    ``InvalidOperation`` naming the field) having written nothing."""
    if principal is not SYSTEM and not getattr(principal, "is_superuser", False):
        raise Refused("importing an organization is for the instance's operator")
    name = _checked_name(command.name)
    archive = read_archive(command.archive, _limits())
    slug = command.slug or str(archive.manifest.get("organization", {}).get("slug") or "")
    created: list[int] = []
    refuse_unusable_slug(slug)  # before anything is made for it
    # Its partition made and committed first, so that this long transaction does not hold
    # the embeddings' table (and every retrieval) until it ends.
    org_id = partitions.prepared_organization_id()
    try:
        with transaction.atomic():
            indexed = (fragment_service.indexing_handled_by_caller() if command.wait
                       else contextlib.nullcontext())
            with indexed:
                restored = restore(archive, principal, slug,
                                   created=lambda o: created.append(o.pk),
                                   check_source=partial(_check_source, principal),
                                   name=name, org_id=org_id)
                if command.wait:
                    _embed(restored.fragment_ids)
            audit.record(principal, "org.import", restored.org, org=restored.org, after={
                "slug": slug, "from": archive.manifest.get("organization"),
                "exported_at": archive.manifest.get("exported_at"),
                "fragments": restored.counts.get("fragments", 0),
                "created_users": restored.created_users, "renamed_ids": restored.renamed,
                "name": restored.org.name, "dropped_grants": restored.dropped_grants})
    except ArchiveRefused:
        _forget(created, org_id)
        raise
    except (IntegrityError, DataError, ValidationError, ObjectDoesNotExist, ValueError,
            TypeError) as exc:
        _forget(created, org_id)
        raise ArchiveRefused(f"the archive's rows do not fit together: "
                             f"{type(exc).__name__}: {exc}") from exc
    except BaseException:
        _forget(created, org_id)
        raise
    if command.wait:
        follower.catch_up(restored.org.pk)  # this node's index, before "searchable" is said
    return restored


def _checked_name(name: str | None) -> str | None:
    if name is None:
        return None
    name = name.strip()
    if not name or len(name) > 200 or "\x00" in name:
        raise ArchiveRefused("a name has 1 to 200 characters, no NUL", field="name")
    return name


def _check_source(principal: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """A git source's settings from an archive, through the rules of ``source add``: a local
    path in them is held to the ingest roots whoever imports (``check_settings``)."""
    checked = sources.check_settings(principal, sources.SourceSettings(**settings),
                                     from_archive=True)
    return dataclasses.asdict(checked)


def _embed(fragment_ids: list[int]) -> None:
    # Active and superseded ones: retrieval reads a superseded fragment when asked
    # (include_superseded, as_of); a retired one never.
    fragments = list(Fragment.objects.filter(pk__in=fragment_ids).exclude(
        status=FragmentStatus.RETIRED).order_by("pk"))
    if fragments:
        indexing.embed_fragments(fragments)


def _forget(org_ids: list[int], prepared: int | None) -> None:
    """The import failed: the organization's (empty) index directory on this node, made when
    its row was written (``contexts.signals``), and the partition made for it before the
    transaction (``prepared``) are removed — unless an organization of that id exists (the
    transaction committed before the failure: Ctrl-C during the on-commit work; or the
    sequence lagged and the id was another's). Never raises: the failure being reported is
    the import's."""
    try:
        ids = {*org_ids, *([prepared] if prepared is not None else [])}
        kept = set(Organization.objects.filter(pk__in=ids).values_list("pk", flat=True))
        for org_id in set(org_ids) - kept:
            shutil.rmtree(indexing.index_path(org_id), ignore_errors=True)
        if prepared is not None and prepared not in kept:
            partitions.drop_partition(prepared)
    except Exception:  # noqa: BLE001 - e.g. the database gone: what is left is empty
        logger.exception("import: could not remove what was made for organization %s",
                         prepared if prepared is not None else org_ids)


# --- checking a restore: the same questions, the same answers ---------------------------------
@dataclasses.dataclass(frozen=True)
class CompareOrgs:
    left: str                 # slug or public id
    right: str
    queries: tuple[str, ...]
    repo: str | None = None   # a repository slug both have: its chain (repo → org) is asked


@dataclasses.dataclass(frozen=True)
class Answer:
    """What a retrieval returned, by what survives a move: source paths and text, in order."""

    fragments: tuple[tuple[tuple[str, ...], str], ...]


@dataclasses.dataclass(frozen=True)
class Comparison:
    query: str
    left: Answer
    right: Answer

    @property
    def same(self) -> bool:
        return self.left == self.right


def _answer(org: Organization, repo_slug: str | None, query: str,
            embedding: QueryEmbedding) -> Answer:
    chain = [org.scope_id]
    if repo_slug:
        repo = org.repositories.filter(slug=repo_slug).first()
        if repo is None:
            raise NotVisible(f"{org.slug} has no repository {repo_slug!r}")
        chain.insert(0, repo.scope_id)
    # The chain and the contexts defined in it, as accounts.scopes.retrieval_scopes gives a
    # reader of the whole chain (the operator reads through no membership).
    scope_ids = {*chain, *Context.objects.filter(org=org, home_id__in=chain).values_list(
        "scope_id", flat=True)}
    result = retrieve(RetrievalRequest(query=query, org_id=org.pk, scope_ids=frozenset(scope_ids),
                                       chain=tuple(chain)),
                      record_trace=False, embedding=embedding)
    return Answer(tuple((tuple(sorted(c.path for c in f.sources)), f.text)
                        for f in result.fragments))


def compare_orgs(principal: Any, command: CompareOrgs) -> list[Comparison]:
    """Ask both organizations the same queries (the repository's chain, or the organization's
    own scope); for the operator checking an import (``manage.py compare_orgs``)."""
    left = exportable_org(principal, ExportOrg(org=command.left))
    right = exportable_org(principal, ExportOrg(org=command.right))
    comparisons = []
    for query in command.queries:
        embedding = QueryEmbedding(query)  # one query vector for both: computed once
        comparisons.append(Comparison(query, _answer(left, command.repo, query, embedding),
                                      _answer(right, command.repo, query, embedding)))
    return comparisons


def sample_queries(principal: Any, org_ref: str, count: int = 20) -> list[str]:
    """``count`` queries made of the organization's active fragments' titles (headings),
    spread evenly over them, for a comparison nobody wrote queries for."""
    org = exportable_org(principal, ExportOrg(org=org_ref))
    titles = sorted(set(Fragment.objects.filter(org=org, status=FragmentStatus.ACTIVE)
                        .exclude(title="").values_list("title", flat=True)))
    step = max(1, len(titles) // max(count, 1))
    return titles[::step][:count]
