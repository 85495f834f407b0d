"""Keeping a git source in sync with its repository scope, by commit (``docs/sources.md``).

One sync: fetch the source's branch into its mirror (``git_mirror``), resolve the head, and
apply what changed since the commit applied last — ``git diff-tree -M`` between the two —
through the ingestion lane every other job uses (``pipeline.Ingestor``), with the files chosen
by the rules of a walk of a checkout of that commit (``sources.from_tree``: the default
exclusions, ``.contextsignore``, the kinds of ``.contexts.toml``, the content rules) and the
source's own include / exclude patterns:

* added and modified files are ingested (read with ``git cat-file``; no work tree);
* deleted files' documents are removed and their fragments retired;
* a renamed file's document takes the new path first, so its fragments keep their identity
  and history (a chunk is its SourcePointer (document, anchor)), then is read again there;
* a file whose path or content now puts it outside the included set is removed, one that
  comes into it is added;
* when the rules themselves change (a ``.contextsignore`` or the policy file), on the first
  sync, when ``full`` is asked for, or when the commit applied last is not in the fetched
  history any more (a force-push), the whole tree at head is reconciled instead: every
  included file read (unchanged ones cost a hash comparison), every other document removed.

The source's ``last_commit`` advances only once the whole diff is applied with no file in
error. A failure — the remote unreachable, credentials refused, the branch unknown, a policy
file that cannot be honoured — marks the source ``failing`` with git's words and writes no
fragment; a sync cut short (a killed worker) leaves ``last_commit`` where it was, and the next
one applies the same diff again, converging on the same state (every step is idempotent: a
document already moved is not moved twice, an unchanged one is skipped by its hash). One sync
at a time per source (``target_lock.one_sync_per_source``), and one ingestion at a time per
repository inside it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath

import pathspec
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.permissions import SYSTEM
from contexts.ingestion import codeowners, owners, policy, target_lock
from contexts.ingestion.git_mirror import GitError, Mirror, TreeFile, timeout_seconds
from contexts.ingestion.pipeline import Ingestor, Stats, Target
from contexts.ingestion.policy import PolicyError
from contexts.ingestion.sources import (
    MAX_IGNORE_FILE_BYTES,
    Skipped,
    SourceFile,
    from_tree,
    ignore_files,
    ingestible,
)
from contexts.models import Fragment, FragmentStatus, Source, SourceDocument, SourceState
from contexts.services import audit

logger = logging.getLogger(__name__)
# UUID5 namespace of sync task ids: one id per source and due time (``task_id``).
TASK_NAMESPACE = uuid.UUID("0b8f4c36-7f0e-4d6a-9d2b-5d3c1e2a4f60")
LOG_EVERY_SECONDS = 30.0
SYMLINK_MODE = "120000"
SYMLINK = "excluded: symbolic link (a git source reads files, not links)"
MAX_ERRORS_SHOWN = 5
# A sync's record lists at most this many paths and fragments of each kind (its counts are
# exact): a first sync of a large repository creates thousands.
MAX_LISTED = 1000
SYNC_RECORDED = "source.synced"  # the audit event of what one sync did (docs/sources.md)
MAX_WARNINGS_SHOWN = 20


@dataclass
class SyncResult:
    """What one sync did, for the source row (``last_summary``), the CLI and the task."""

    source: str
    commit: str = ""
    previous: str = ""
    full: bool = False
    added: int = 0
    modified: int = 0
    deleted: int = 0
    renamed: int = 0
    created: int = 0
    updated: int = 0
    retired: int = 0
    files: int = 0
    fragments: int = 0
    skipped: int = 0
    errors: list[dict] = field(default_factory=list)
    # What the sync could not honour but went on without: a CODEOWNERS entry naming nobody
    # who may own here, a front matter owner who may not curate (path, reason).
    warnings: list[dict] = field(default_factory=list)
    merged: int = 0          # fragments a person edited, merged with the file's change
    conflicted: int = 0      # ... whose change overlapped: the person's text kept, nudged
    # Which paths and fragments (ids) each counter counts: the sync's record lists them
    # (``record``); not in the source row's summary.
    paths: dict[str, list] = field(default_factory=dict)
    fragment_ids: dict[str, list[int]] = field(default_factory=dict)
    error: str = ""          # set when the sync failed: the source's last_error
    seconds: float = 0.0
    embedded: int = 0        # texts the model encoded (vectors reused from the cache: none)
    embed_seconds: float = 0.0

    @property
    def fragments_changed(self) -> int:
        return self.created + self.updated + self.retired

    def line(self) -> str:
        if self.error:
            return f"failing: {self.error}"
        return (f"commit {self.commit}: {self.added} added, {self.modified} modified, "
                f"{self.deleted} deleted, {self.renamed} renamed, "
                f"{self.fragments_changed} fragments changed")

    def summary(self) -> dict:
        summary = asdict(self)
        del summary["paths"], summary["fragment_ids"]
        return {**summary, "errors": self.errors[:MAX_ERRORS_SHOWN],
                "warnings": self.warnings[:MAX_WARNINGS_SHOWN],
                "fragments_changed": self.fragments_changed}


def task_id(public_id: str, due: dt.datetime) -> str:
    """The Celery task id of a source's sync due at ``due``: the same for every enqueue of that
    one sync (beat's claim, a redelivery), so its runs can be told apart in the broker and the
    logs; the lock makes a second run of it a no-op either way."""
    return str(uuid.uuid5(TASK_NAMESPACE, f"{public_id}@{due.isoformat()}"))


def claim_due(now: dt.datetime | None = None) -> list[tuple[int, str]]:
    """The sources whose next sync is due, each moved on by its interval in the same
    transaction (rows another beat holds are skipped): (source id, task id) to enqueue. A sync
    claimed and then lost (its worker killed) is claimed again when its next time comes."""
    now = now or timezone.now()
    claimed = []
    with transaction.atomic():
        for source in (Source.objects.select_for_update(skip_locked=True)
                       .filter(next_sync_at__lte=now).only("pk", "public_id", "next_sync_at",
                                                           "interval_seconds")):
            claimed.append((source.pk, task_id(source.public_id, source.next_sync_at)))
            Source.objects.filter(pk=source.pk).update(next_sync_at=now + source.interval)
    return claimed


def run_sync(source_id: int, *, full: bool = False, wait: bool = False) -> SyncResult | None:
    """Sync one source now (the ``sync_source`` task, ``manage.py source sync --wait``).
    None when the source is gone, or when another sync of it is running and ``wait`` is off.
    Never raises for what git or the files say: the result (and the row) say it."""
    with target_lock.one_sync_per_source(source_id, wait=wait) as held:
        if not held:
            logger.info("source #%s is being synced by another worker; not twice", source_id)
            return None
        source = (Source.objects.select_related("org", "repository__scope", "created_by")
                  .filter(pk=source_id).first())
        if source is None:
            return None
        return _Sync(source, full=full).run()


def origin(source: Source) -> str:
    """What a git source's documents say brought them (``SourceDocument.origin``)."""
    return f"git:{source.public_id}"


def own_documents(source: Source):
    """The documents this source brought into its repository: the ones its syncs count,
    reconcile and remove (a folder or an upload ingested into the same repository keeps
    its own)."""
    return SourceDocument.objects.filter(org=source.org, repository=source.repository,
                                         origin=origin(source))


def _is_rules_file(path: str) -> bool:
    """A file whose change can change which files of the tree are ingested, or their kinds."""
    return path == policy.POLICY_FILE or PurePosixPath(path).name == policy.IGNORE_FILE


def _spec(patterns: Iterable[str]) -> pathspec.GitIgnoreSpec | None:
    patterns = [p for p in patterns if p.strip()]
    return pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None


class _Sync:
    def __init__(self, source: Source, *, full: bool) -> None:
        self.source = source
        self.full = full
        self.mirror = Mirror.of(source.public_id)
        self.result = SyncResult(source=source.public_id, previous=source.last_commit)
        self.started = time.monotonic()
        self._include = _spec(source.include)
        self._exclude = _spec(source.exclude)
        self._candidates: set[str] = set()  # the paths this sync looks at (``_plan``)
        self._last_log = self.started

    # -- the steps ---------------------------------------------------------------------------
    def run(self) -> SyncResult:
        source = self.source
        Source.objects.filter(pk=source.pk).update(state=SourceState.SYNCING)
        logger.info("source %s: fetching %s (%s)", source.public_id, source.display_url,
                    source.branch)
        try:
            head = self.result.commit = self.mirror.fetch(source.url, source.branch)
            if head == source.last_commit and not self.full:
                logger.info("source %s: %s already applied", source.public_id, head[:12])
                return self._succeeded()
            files, removed, moved = self._plan(head)
        except (GitError, PolicyError) as exc:
            return self._failed(str(exc))
        logger.info("source %s: applying %s..%s (%s)", source.public_id,
                    (source.last_commit or "none")[:12], head[:12],
                    "whole tree" if self.result.full else "diff")
        documents = own_documents(source)
        relevant = None if self.result.full else {*self._candidates, *removed, *moved}
        before = self._hashes(documents, relevant)
        ingestor = Ingestor(
            Target(org=source.org, scope=source.repository.scope, repository=source.repository,
                   default_owner=source.created_by, commit=head, origin=origin(source),
                   owners=self._owners(head)),
            batch_chunks=settings.INGEST_EMBED_BATCH_CHUNKS, on_progress=self._progress,
            prune_missing=self.result.full)
        yielded: set[str] = set()
        try:
            stats = ingestor.run(self._recording(files, yielded), removed=removed, moved=moved)
        except (GitError, PolicyError) as exc:
            return self._failed(str(exc))
        except Exception as exc:  # noqa: BLE001 - recorded on the source, logged in full
            logger.exception("source %s: the sync failed", source.public_id)
            return self._failed(f"{type(exc).__name__}: {exc}")
        self._count(stats, before, self._hashes(documents, None if relevant is None
                                                else relevant | set(moved.values())),
                    yielded, moved)
        self._applied = True  # something was written: the sync is recorded (``_finish``)
        if stats.errors:
            shown = "; ".join(f"{e['path']}: {e['reason']}" for e in
                              stats.errors[:MAX_ERRORS_SHOWN])
            more = len(stats.errors) - MAX_ERRORS_SHOWN
            return self._failed(f"{len(stats.errors)} file(s) could not be ingested at "
                                f"{head[:12]}, so the commit is not marked applied: {shown}"
                                + (f" (and {more} more)" if more > 0 else ""))
        try:
            self.mirror.keep(head)
        except GitError as exc:  # only a guard against garbage collection: the sync stands
            logger.warning("source %s: could not keep %s in the mirror: %s", source.public_id,
                           head[:12], exc)
        return self._succeeded(head)

    def _plan(self, head: str) -> tuple[Iterable[SourceFile | Skipped], list[str],
                                        dict[str, str]]:
        """What to ingest (files), remove (paths) and move (old path → new) to reach ``head``."""
        tree: dict[str, TreeFile] = {}
        undecodable: list[Skipped] = []
        for entry in self.mirror.tree(head):
            try:
                tree[entry.path.decode("utf-8")] = entry
            except UnicodeDecodeError:
                undecodable.append(Skipped(policy.printable(entry.path.decode(
                    "utf-8", errors="replace")), policy.NOT_UTF8))
        rules = self._rules(tree)
        self._codeowners = self._read_codeowners(tree)
        last = self.source.last_commit
        changes = None
        if not self.full and last and self.mirror.has_commit(last):
            changes = self.mirror.diff(last, head)
            if any(_is_rules_file(path.decode("utf-8", errors="replace"))
                   for change in changes for path in (change.path, change.old) if path):
                changes = None  # the rules changed: which files are in may change anywhere
        self.result.full = changes is None

        removed: list[str] = []
        moved: dict[str, str] = {}
        if changes is None:
            self._candidates = set(tree)
            meta = self.mirror.authors(head)
        else:
            self._candidates = set()
            for change in changes:
                path = change.path.decode("utf-8", errors="replace")
                if change.status == "D":
                    removed.append(path)
                    continue
                if change.status == "R":
                    moved[change.old.decode("utf-8", errors="replace")] = path
                self._candidates.add(path)
            meta = self.mirror.authors(head, since=last)
            undecodable = []  # reported with the whole tree only

        considered, links = [], []
        for path in sorted(self._candidates):
            entry = tree.get(path)
            if entry is None or not self._wanted(path):
                continue
            if entry.mode == SYMLINK_MODE:
                if ingestible(PurePosixPath(path).name):
                    links.append(Skipped(path, SYMLINK))
                continue
            considered.append(path)
        if changes is not None and any(path not in meta for path in considered):
            # The branch was rewritten: a file's newest commit may be one the commit applied
            # last also reaches, so the range does not hold it.
            meta = self.mirror.authors(head)
        files = from_tree(considered, sizes={p: tree[p].size for p in considered},
                          read=lambda paths: self._read(tree, paths), rules=rules,
                          max_bytes=settings.INGEST_MAX_FILE_BYTES, meta=meta)
        if changes is None:
            # The whole tree, streamed; the documents it does not yield are pruned.
            return _chain(undecodable, links, files), removed, moved
        # A diff: read now (a few files), so that a changed file that is no longer ingested —
        # moved out of the included patterns, now binary or generated — is known to be
        # removed before anything is written.
        files = [*links, *files]
        ingested = {f.path for f in files if isinstance(f, SourceFile)}
        for old, new in list(moved.items()):
            if new not in ingested:
                del moved[old]
                removed.append(old)
        removed.extend(path for path in sorted(self._candidates) if path not in ingested)
        return files, removed, moved

    def _rules(self, tree: dict[str, TreeFile]) -> policy.Policy:
        """The tree's policy file and every ``.contextsignore`` in it, from the mirror."""
        policy_file = tree.get(policy.POLICY_FILE)
        ignores = [p for p in ignore_files(tree) if tree[p].size <= MAX_IGNORE_FILE_BYTES]
        wanted = ([policy.POLICY_FILE] if policy_file and
                  policy_file.size <= policy.MAX_POLICY_BYTES else []) + ignores
        contents = self._read(tree, wanted)
        if policy_file is not None and policy.POLICY_FILE not in contents:
            raise PolicyError(policy.POLICY_FILE, None,
                              f"too large: {policy_file.size} bytes > limit "
                              f"{policy.MAX_POLICY_BYTES}; a policy file is small")
        rules = policy.from_blob(contents.get(policy.POLICY_FILE))
        for path in ignores:
            directory = str(PurePosixPath(path).parent)
            rules.add_ignore_file("" if directory == "." else directory,
                                  contents[path].decode("utf-8", errors="replace"))
        return rules

    def _read_codeowners(self, tree: dict[str, TreeFile]) -> codeowners.CodeOwners | None:
        """The commit's CODEOWNERS (``.github/``, the root, ``docs/``), as a code host reads
        it; a file larger than a code host reads is no CODEOWNERS."""
        return owners.from_blobs(
            tree, lambda path: (self._read(tree, [path])[path]
                                if tree[path].size <= codeowners.MAX_BYTES else None))

    def _owners(self, head: str) -> owners.OwnerChain:
        """Who owns the files at ``head``: its CODEOWNERS, then front matter, the recent
        authors of each file in the mirror's history (read once, when first needed), the
        repository's tech lead (contexts/ingestion/owners.py)."""
        source = self.source

        def history() -> dict[str, list[str]]:
            try:
                log = self.mirror.git("log", f"--max-count={owners.HISTORY_COMMITS}",
                                      "--name-only", "--no-renames", owners.AUTHOR_LOG_FORMAT,
                                      head, "--", timeout=timeout_seconds(), what="log")
            except GitError as exc:  # the owner falls to the tech lead; the sync stands
                logger.warning("source %s: no history for owners: %s", source.public_id, exc)
                return {}
            return owners.parse_author_log(log.decode("utf-8", errors="replace"))

        return owners.OwnerChain(source.org, source.repository.scope, source.repository,
                                 codeowners=getattr(self, "_codeowners", None),
                                 history=history, fallback=source.created_by)

    def _read(self, tree: dict[str, TreeFile], paths: list[str]) -> dict[str, bytes]:
        blobs = self.mirror.blobs([tree[p].oid for p in paths])
        return {p: blobs[tree[p].oid] for p in paths}

    def _wanted(self, path: str) -> bool:
        """The source's own patterns: in its include patterns (when it has any), not in its
        exclude patterns."""
        if self._include is not None and not self._include.match_file(path):
            return False
        return self._exclude is None or not self._exclude.match_file(path)

    @staticmethod
    def _recording(files: Iterable[SourceFile | Skipped],
                   yielded: set[str]) -> Iterator[SourceFile | Skipped]:
        for item in files:
            if isinstance(item, SourceFile):
                yielded.add(item.path)
            yield item

    @staticmethod
    def _hashes(documents, paths: set[str] | None) -> dict[str, str]:
        rows = documents if paths is None else documents.filter(path__in=sorted(paths))
        return dict(rows.values_list("path", "content_hash"))

    def _count(self, stats: Stats, before: dict[str, str], after: dict[str, str],
               yielded: set[str], moved: dict[str, str]) -> None:
        """Files added, modified, deleted and renamed, as the documents saw it."""
        result = self.result
        renamed = {old: new for old, new in moved.items()
                   if old in before and new not in before and new in after}
        paths = {
            "added": sorted(yielded - set(before) - set(renamed.values())),
            "modified": sorted(path for path in yielded & set(before)
                               if after.get(path) != before[path]),
            "deleted": sorted(path for path in before
                              if path not in after and path not in renamed),
            "renamed": [[old, new] for old, new in sorted(renamed.items())],
        }
        result.paths = paths
        result.added, result.modified, result.deleted, result.renamed = (
            len(paths[kind]) for kind in ("added", "modified", "deleted", "renamed"))
        result.created, result.updated, result.retired = (stats.created, stats.updated,
                                                          stats.retired)
        # Each fragment once, under what happened to it: merged and conflicted before
        # updated (a merge writes a version too).
        seen: set[int] = set()
        ids = {}
        for kind, found in (("merged", stats.merged), ("conflicted", stats.conflicted),
                            ("created", stats.created_ids), ("updated", stats.updated_ids),
                            ("retired", stats.retired_ids)):
            ids[kind] = [pk for pk in dict.fromkeys(found) if pk is not None and pk not in seen]
            seen.update(ids[kind])
        result.fragment_ids = ids
        result.merged, result.conflicted = len(ids["merged"]), len(ids["conflicted"])
        result.skipped = len(stats.skipped)
        result.errors = stats.errors
        result.warnings = stats.warnings
        result.embedded = stats.encoded_texts
        result.embed_seconds = round(stats.encode_seconds, 3)

    def _progress(self, stats: Stats) -> None:
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_SECONDS:
            self._last_log = now
            logger.info("source %s: %d files done, %d fragments created, %d updated",
                        self.source.public_id, stats.files_done, stats.created, stats.updated)

    # -- the row ------------------------------------------------------------------------------
    def _finish(self, **fields) -> SyncResult:
        result = self.result
        result.seconds = round(time.monotonic() - self.started, 3)
        now = timezone.now()
        Source.objects.filter(pk=self.source.pk).update(
            last_synced_at=now, next_sync_at=now + self.source.interval,
            last_summary=result.summary(), **fields)
        if getattr(self, "_applied", False):
            record(self.source, result)
        return result

    def _succeeded(self, applied: str | None = None) -> SyncResult:
        source, result = self.source, self.result
        fields = {"state": SourceState.IDLE, "last_error": ""}
        if applied is not None:
            documents = own_documents(source)
            result.files = documents.count()
            result.fragments = (Fragment.objects.filter(sources__document__in=documents,
                                                        status=FragmentStatus.ACTIVE)
                                .distinct().count())
            fields.update(last_commit=applied, files_count=result.files,
                          fragments_count=result.fragments)
        else:
            result.files, result.fragments = source.files_count, source.fragments_count
        logger.info("source %s: %s in %.1fs", source.public_id, result.line(),
                    time.monotonic() - self.started)
        return self._finish(**fields)

    def _failed(self, reason: str) -> SyncResult:
        self.result.error = reason
        logger.warning("source %s: failing: %s", self.source.public_id, reason)
        self.result.files, self.result.fragments = (self.source.files_count,
                                                    self.source.fragments_count)
        return self._finish(state=SourceState.FAILING, last_error=reason)


def record(source: Source, result: SyncResult) -> None:
    """The audit event of one sync that applied changes (``source.synced``): the commit range,
    the files added, modified, deleted and renamed, and the fragments created, updated,
    merged, conflicted and retired (public ids) — the Sources page lists them. A sync with
    nothing to apply (the head already applied) or that failed before writing is not one."""
    ids = [pk for found in result.fragment_ids.values() for pk in found[:MAX_LISTED]]
    public = dict(Fragment.objects.filter(pk__in=ids).values_list("pk", "public_id"))
    audit.record(SYSTEM, SYNC_RECORDED, source, after={
        "from": result.previous, "to": result.commit, "full": result.full,
        "error": result.error,
        "files": {kind: paths[:MAX_LISTED] for kind, paths in result.paths.items()},
        "fragments": {kind: [public[pk] for pk in found[:MAX_LISTED] if pk in public]
                      for kind, found in result.fragment_ids.items()},
        "counts": {
            "files": {kind: len(paths) for kind, paths in result.paths.items()},
            "fragments": {kind: len(found) for kind, found in result.fragment_ids.items()},
        },
    })


def _chain(*parts: Iterable[SourceFile | Skipped]) -> Iterator[SourceFile | Skipped]:
    for part in parts:
        yield from part
