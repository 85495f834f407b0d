"""Each node's lexical index follows the change feed (ADR 0015).

PostgreSQL is the one system of record. Every change to what retrieval can see appends a row to
the organization's feed in the transaction that makes it (``contexts.services.change_feed``);
this module is the only code that writes a tantivy index. It applies the feed in sequence
order, in batches, to this node's index directory, and records how far it got — the
high-water mark — inside the organization's index directory, so an index and its mark are
deleted, copied and restored together.

Applying a change re-reads the fragment from PostgreSQL (upsert if active, delete otherwise),
so applying a change twice, or out of a batch, is harmless. An index that is missing, corrupt,
built by another schema, or further behind than the feed still holds (pruned), or a feed that
went backwards (a restored database) is rebuilt from PostgreSQL: the mark is read *before* the
fragments, so whatever changed during the rebuild is applied again after it.

Who applies:
- on every node with ``INDEX_FOLLOWER`` on, one :class:`NodeFollower` thread — the node's
  leader, elected by a file lock in the index directory, so one web process of the node writes
  — polls the feed every ``INDEX_FOLLOW_INTERVAL`` seconds, catches up on start, creates the
  indexes of new organizations and reports its position (pruning, ``/metrics``);
- a process on such a node also catches up right after its own commits (``contexts.signals``),
  so the node that took a write reads it at once.
Both go through :func:`catch_up`, serialized per organization by a file lock, so two writers on
a node never interleave. A worker node (``INDEX_FOLLOWER`` off) keeps no index at all.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connections, transaction
from django.utils import timezone

from accounts.models import Organization
from accounts.sql import prepared_cursor
from contexts.indexes.indexing import embed_changed, index_path, lexical_doc, lexical_index
from contexts.models import Fragment, FragmentStatus
from contexts.models.changes import Change, ChangeHead, ChangeKind, Follower
from contexts.search import IndexSchemaMismatch, IndexUnavailable, open_index
from contexts.services import change_feed

logger = logging.getLogger(__name__)

STATE_FILE = "contexts-follower.json"
LEADER_LOCK = ".follower-leader.lock"
BATCH = 500
# How long a caller waits for another writer of the same organization on this node.
LOCK_TIMEOUT = 60.0
# A follower's position is written to the database at most this often per organization.
REPORT_EVERY = 5.0
# The advisory-lock namespace of organizations being created: the creating transaction holds
# the organization's key (shared) until it ends, so a follower elsewhere never mistakes the
# index directory of an organization it cannot see yet for a deleted organization's.
CREATING_LOCK_SPACE = 7310
# Seconds between passes that open every index to check it (the others only look for it).
FULL_CHECK_EVERY = 30.0


@dataclass(frozen=True)
class Mark:
    """How far this node's index of one organization has applied the feed."""

    seq: int
    # The feed row at `seq` (its primary key): if a restored database hands out `seq` again
    # for another change, the mark no longer names it and the index is rebuilt.
    change_id: int | None
    applied_at: float


def enabled() -> bool:
    return bool(settings.INDEX_FOLLOWER)


def node_name() -> str:
    return _node_name(settings.NODE_NAME, str(settings.LEXICAL_INDEX_DIR))


@lru_cache(maxsize=8)
def _node_name(configured: str, index_dir: str) -> str:
    # Cached: every retrieval names the node in its trace, and resolving the directory and
    # hashing it are syscalls and work the request path need not repeat.
    if configured:
        return configured
    digest = hashlib.sha256(str(Path(index_dir).resolve()).encode())
    return f"{socket.gethostname()}:{digest.hexdigest()[:8]}"


# --- the mark ----------------------------------------------------------------------------------
def read_mark(org_id: int) -> Mark | None:
    """This node's mark for the organization; None when its index has none (new, deleted)."""
    try:
        data = json.loads((index_path(org_id) / STATE_FILE).read_text())
        return Mark(seq=int(data["seq"]), change_id=data.get("change_id"),
                    applied_at=float(data.get("applied_at", 0.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_mark(org_id: int, mark: Mark) -> None:
    path = index_path(org_id) / STATE_FILE
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(asdict(mark)))
    os.replace(tmp, path)  # atomic: a reader sees the old mark or the new one


def _lock_file(org_id: int) -> Path:
    # Beside the index directories, not in them: a rebuild removes an index directory.
    return Path(settings.LEXICAL_INDEX_DIR) / ".locks" / f"org-{org_id}.lock"


def _rebuild_marker(org_id: int) -> Path:
    """Present while this node rebuilds the organization's index (beside its lock, for the
    same reason): readers see the index emptied and refilled, and say so."""
    return _lock_file(org_id).with_suffix(".rebuilding")


@contextmanager
def _org_lock(org_id: int, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """This node's one writer of the organization's index (processes and threads alike: each
    call opens its own file description, and flock locks those)."""
    path = _lock_file(org_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"index of org {org_id} is busy on this node") from None
                time.sleep(0.01)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- applying ----------------------------------------------------------------------------------
_HEAD_SQL = f"SELECT seq FROM {ChangeHead._meta.db_table} WHERE org_id = %s"


def head(org_id: int) -> int:
    # A plain statement: every retrieval reads it (its trace's freshness), and building the ORM
    # query cost more Python time than the lookup itself.
    with prepared_cursor() as cursor:
        cursor.execute(_HEAD_SQL, [org_id])
        row = cursor.fetchone()
    return row[0] if row else 0


def catch_up(org_id: int) -> int:
    """Apply the organization's feed to this node's index; returns the mark reached. A no-op
    (returning 0) on a node that keeps no index."""
    if not enabled():
        return 0
    with _org_lock(org_id):
        return _catch_up(org_id)


def rebuild(org_id: int) -> int:
    """Recreate this node's index of the organization from PostgreSQL; returns documents."""
    with _org_lock(org_id):
        _rebuild(org_id)
        return lexical_index(org_id).count()


def rebuilding(org_id: int) -> bool:
    """Whether a rebuild of the organization's index is in progress on this node — what a
    retrieval checks, so one stat in the common case. A marker whose organization lock nobody
    holds was left by a rebuild that was killed: no rebuild runs (the next catch-up starts
    one), though the index may be partial until it has."""
    if not _rebuild_marker(org_id).exists():
        return False
    try:
        with open(_lock_file(org_id), "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released on close
    except BlockingIOError:
        return True  # the rebuilding writer holds the lock
    except OSError:
        return False
    return False


def _interrupted(org_id: int) -> bool:
    """A rebuild left its marker behind (killed half way): the index holds part of the
    fragments under the old mark, and is rebuilt. With the organization's lock held."""
    return _rebuild_marker(org_id).exists()


def _left_behind(org_id: int) -> bool:
    """:func:`_interrupted`, seen without the lock: a marker no running rebuild holds (one in
    progress elsewhere on the node is waited for by nobody)."""
    return _rebuild_marker(org_id).exists() and not rebuilding(org_id)


@contextmanager
def _marked_rebuilding(org_id: int) -> Iterator[None]:
    marker = _rebuild_marker(org_id)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"pid": os.getpid(), "started_at": time.time()}))
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def _present(org_id: int) -> bool:
    """The index's files are there (a stat, for every pass; :func:`_healthy` opens it)."""
    return (index_path(org_id) / "meta.json").exists()


def _healthy(org_id: int) -> bool:
    try:
        open_index(index_path(org_id), create=False)
    except (IndexUnavailable, IndexSchemaMismatch, ValueError):
        return False
    return True


def _catch_up(org_id: int) -> int:
    mark = read_mark(org_id)
    if mark is None or not _healthy(org_id) or _interrupted(org_id):
        return _rebuild(org_id)
    while True:
        rows = list(Change.objects.filter(org_id=org_id, seq__gt=mark.seq)
                    .order_by("seq")[:BATCH])
        if not rows:
            if mark.seq > head(org_id) or _rewound(org_id, mark):
                logger.warning("change feed of org %s went backwards; rebuilding its index",
                               org_id)
                return _rebuild(org_id)
            return mark.seq
        if rows[0].seq != mark.seq + 1:
            logger.warning("change feed of org %s was pruned past this node's mark %s; "
                           "rebuilding its index", org_id, mark.seq)
            return _rebuild(org_id)
        try:
            _apply(org_id, rows)
        except IndexSchemaMismatch:
            return _rebuild(org_id)
        mark = Mark(seq=rows[-1].seq, change_id=rows[-1].pk, applied_at=time.time())
        _write_mark(org_id, mark)


def _rewound(org_id: int, mark: Mark) -> bool:
    if mark.seq == 0 or mark.change_id is None:
        return False
    row = Change.objects.filter(org_id=org_id, seq=mark.seq).values_list("pk", flat=True).first()
    return row is not None and row != mark.change_id


def _apply(org_id: int, rows: Sequence[Change]) -> None:
    """Bring the index in line with PostgreSQL for these rows' fragments: active ones are
    upserted, everything else (retired, superseded, deleted) removed."""
    fragments = list(Fragment.objects.filter(org_id=org_id, pk__in={r.fragment_id for r in rows})
                     .prefetch_related("sources__document"))
    live = [f for f in fragments if f.status == FragmentStatus.ACTIVE]
    live_ids = {f.public_id for f in live}
    dead = sorted({r.public_id for r in rows} - live_ids)
    index = lexical_index(org_id)
    if dead:
        index.delete(dead)
    if live:
        index.upsert(lexical_doc(f, [p.document.path for p in f.sources.all()]) for f in live)


def _rebuild(org_id: int, batch: int = 2000) -> int:
    """With the organization's lock held. The index is emptied, then refilled batch by batch;
    meanwhile a marker says so, and retrievals say `lexical_index_rebuilding`."""
    with _marked_rebuilding(org_id):
        # The mark first: a change committed while the fragments are read is applied again after.
        last = (Change.objects.filter(org_id=org_id).order_by("-seq")
                .values_list("seq", "pk").first())
        seq, change_id = last if last else (head(org_id), None)
        index = lexical_index(org_id)
        try:
            index.clear()
        except (IndexSchemaMismatch, IndexUnavailable, ValueError):
            # Deleted, corrupted or another schema: tantivy cannot open it even to clear it.
            logger.warning("lexical index of org %s is unreadable; recreating it", org_id)
            index.recreate()
        ids = list(Fragment.objects.filter(org_id=org_id, status=FragmentStatus.ACTIVE)
                   .order_by("pk").values_list("pk", flat=True))
        for start in range(0, len(ids), batch):
            chunk = (Fragment.objects.filter(pk__in=ids[start:start + batch])
                     .prefetch_related("sources__document"))
            index.upsert(lexical_doc(f, [p.document.path for p in f.sources.all()]) for f in chunk)
        _write_mark(org_id, Mark(seq=seq, change_id=change_id, applied_at=time.time()))
        logger.info("rebuilt the lexical index of org %s: %d fragments, mark %d", org_id,
                    len(ids), seq)
        return seq


def catch_up_all() -> list[int]:
    """Catch up (or rebuild) every organization's index on this node — what a node does at
    start, and ``rebuild_index --outdated`` after an upgrade; returns the ids rebuilt."""
    rebuilt = []
    for org_id in Organization.objects.order_by("pk").values_list("pk", flat=True):
        if read_mark(org_id) is None or not _healthy(org_id) or _left_behind(org_id):
            rebuilt.append(org_id)
        catch_up(org_id)
    return rebuilt


def reindex_fragments(fragment_ids: Iterable[int]) -> None:
    """Re-derive these fragments everywhere: embed what lacks a vector, and append them to the
    feed, so that every node re-reads them; this node's index is caught up before returning.
    For repairs and for fragments written outside the one door (fixtures, imports)."""
    ids = set(fragment_ids)
    embed_changed(ids)
    with transaction.atomic():
        heads = change_feed.append(dict.fromkeys(ids, ChangeKind.REINDEX))
    for org_id in heads:
        catch_up(org_id)


# --- lag ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lag:
    mark: int | None
    head: int
    seconds: float

    @property
    def changes(self) -> int:
        return self.head - (self.mark or 0)


def lag(org_id: int, now: dt.datetime | None = None) -> Lag:
    """How far this node's index of the organization is behind PostgreSQL: the changes not
    applied yet, and the age of the oldest of them (0 s when caught up)."""
    mark = read_mark(org_id)
    seq = mark.seq if mark else 0
    current = head(org_id)
    if current <= seq:
        return Lag(mark=mark.seq if mark else None, head=current, seconds=0.0)
    oldest = (Change.objects.filter(org_id=org_id, seq__gt=seq).order_by("seq")
              .values_list("created_at", flat=True).first())
    age = ((now or timezone.now()) - oldest).total_seconds() if oldest else 0.0
    return Lag(mark=mark.seq if mark else None, head=current, seconds=max(age, 0.0))


# --- the node's follower -----------------------------------------------------------------------
class NodeFollower:
    """Follows every organization's feed into this node's indexes while it holds the node's
    leader lock; the other processes of the node wait to take over (a killed leader's lock is
    released by the kernel)."""

    def __init__(self, interval: float | None = None) -> None:
        self.interval = settings.INDEX_FOLLOW_INTERVAL if interval is None else interval
        self.node = node_name()
        self._stop = threading.Event()
        self._reported: dict[int, tuple[int, float]] = {}
        self._checked_at = float("-inf")  # the first pass opens every index
        self.heartbeat = 0.0  # time.time() of the last complete pass

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        try:
            self._run()
        finally:
            connections.close_all()  # this thread's own

    def _run(self) -> None:
        root = Path(settings.LEXICAL_INDEX_DIR)
        root.mkdir(parents=True, exist_ok=True)
        with open(root / LEADER_LOCK, "a+b") as leader:
            while not self._stop.is_set():
                try:
                    fcntl.flock(leader, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    self._stop.wait(1.0)
            logger.info("index follower of node %s leads in process %s", self.node, os.getpid())
            while not self._stop.is_set():
                try:
                    self.follow_once()
                except Exception:  # noqa: BLE001 - a database or disk hiccup: retry, never die
                    logger.exception("index follower pass failed; retrying")
                    close_old_connections()
                    self._stop.wait(1.0)
                    continue
                self._stop.wait(self.interval)

    def follow_once(self) -> None:
        """One pass: create missing indexes, apply what every organization's feed gained."""
        heads = dict(ChangeHead.objects.values_list("org_id", "seq"))
        orgs = list(Organization.objects.order_by("pk").values_list("pk", flat=True))
        # Opening an index to check it costs ≈2 ms; every pass, for every organization, that
        # was CPU the web process serving retrievals shares. A pass looks for the index's
        # files; every FULL_CHECK_EVERY seconds it opens each one (corruption, old schema).
        full = time.monotonic() - self._checked_at >= FULL_CHECK_EVERY
        for org_id in orgs:
            mark = read_mark(org_id)
            present = _healthy(org_id) if full else _present(org_id)
            if (mark is None or mark.seq != heads.get(org_id, 0) or not present
                    or _left_behind(org_id)):
                catch_up(org_id)
            self._report(org_id)
        if full:
            self._checked_at = time.monotonic()
        _drop_deleted(set(orgs))
        self.heartbeat = time.time()
        write_heartbeat(self.heartbeat)

    def _report(self, org_id: int) -> None:
        mark = read_mark(org_id)
        if mark is None:
            return
        last = self._reported.get(org_id)
        now = time.monotonic()
        if last and last[0] == mark.seq and now - last[1] < REPORT_EVERY:
            return
        Follower.objects.update_or_create(org_id=org_id, node=self.node,
                                          defaults={"seq": mark.seq, "seen_at": timezone.now()})
        self._reported[org_id] = (mark.seq, now)


def hold_while_creating(org_id: int) -> None:
    """Said by the transaction that creates the organization, before its index directory is
    made: until that transaction commits or rolls back, :func:`_drop_deleted` leaves the
    directory alone (an import embeds for minutes inside its transaction; a follower that
    removed the directory meanwhile left the import to find its index gone and recreate it,
    warning that it was unreadable)."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)",
                       [CREATING_LOCK_SPACE, org_id])


def _being_created(org_id: int) -> bool:
    """Whether a transaction that creates this organization is still open (it holds the key:
    :func:`hold_while_creating`). A session lock, taken and given back at once."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [CREATING_LOCK_SPACE, org_id])
        if not cursor.fetchone()[0]:
            return True
        cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [CREATING_LOCK_SPACE, org_id])
    return False


def _drop_deleted(orgs: set[int]) -> None:
    """Remove this node's indexes of organizations PostgreSQL no longer has (and none is
    creating: the lock is asked first, so one committed meanwhile is then seen)."""
    root = Path(settings.LEXICAL_INDEX_DIR)
    for path in root.glob("org-*"):
        suffix = path.name.removeprefix("org-")
        if path.is_dir() and suffix.isdigit() and int(suffix) not in orgs:
            with _org_lock(int(suffix)):
                if _being_created(int(suffix)):
                    continue
                if not Organization.objects.filter(pk=int(suffix)).exists():
                    shutil.rmtree(path, ignore_errors=True)
                    logger.info("removed the index of deleted org %s", suffix)


HEARTBEAT_FILE = "contexts-follower-node.json"


def write_heartbeat(at: float) -> None:
    path = Path(settings.LEXICAL_INDEX_DIR) / HEARTBEAT_FILE
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"node": node_name(), "at": at, "pid": os.getpid()}))
    os.replace(tmp, path)


def heartbeat_age() -> float | None:
    """Seconds since this node's follower last completed a pass; None if it never did."""
    try:
        data = json.loads((Path(settings.LEXICAL_INDEX_DIR) / HEARTBEAT_FILE).read_text())
        return max(time.time() - float(data["at"]), 0.0)
    except (OSError, ValueError, KeyError, TypeError):
        return None


_started: NodeFollower | None = None
_start_lock = threading.Lock()


def start_in_background() -> NodeFollower | None:
    """Start this process's follower thread (once); it leads if no other process of the node
    does. Called by the web server's worker processes."""
    global _started
    if not enabled():
        return None
    with _start_lock:
        if _started is None:
            _started = NodeFollower()
            threading.Thread(target=_started.run, name="index-follower", daemon=True).start()
    return _started


class LagCollector:
    """``/metrics``: this node's index per organization — its mark, the changes and seconds it
    is behind — and the age of its follower's last pass. Read when scraped."""

    def collect(self):  # noqa: ANN201 - prometheus_client's collector protocol
        from prometheus_client.core import GaugeMetricFamily

        labels = ["org"]
        mark = GaugeMetricFamily("contexts_index_mark", "Last change applied to this node's "
                                 "lexical index", labels=labels)
        changes = GaugeMetricFamily("contexts_index_lag_changes", "Changes in the feed not "
                                    "applied to this node's lexical index yet", labels=labels)
        seconds = GaugeMetricFamily("contexts_index_lag_seconds", "Age of the oldest change "
                                    "not applied to this node's lexical index", labels=labels)
        if enabled():
            for org_id, slug in Organization.objects.order_by("pk").values_list("pk", "slug"):
                lagging = lag(org_id)
                mark.add_metric([slug], float(lagging.mark if lagging.mark is not None else -1))
                changes.add_metric([slug], float(lagging.changes))
                seconds.add_metric([slug], lagging.seconds)
        yield from (mark, changes, seconds)
        age = heartbeat_age()
        if age is not None:
            yield GaugeMetricFamily("contexts_index_follower_pass_age_seconds",
                                    "Seconds since this node's index follower last completed "
                                    "a pass", value=age)


LAG_COLLECTOR = LagCollector()


def ready() -> tuple[bool, str]:
    """Whether this node's lexical index may serve: its follower completed a pass within
    ``INDEX_MAX_LAG`` seconds and no organization is further behind than that."""
    if not enabled():
        return True, "no index on this node"
    age = heartbeat_age()
    if age is None:
        return False, "the index follower has not completed a pass"
    if age > settings.INDEX_MAX_LAG:
        return False, f"the index follower's last pass was {age:.1f} s ago"
    for org_id in Organization.objects.values_list("pk", flat=True):
        behind = lag(org_id)
        if behind.seconds > settings.INDEX_MAX_LAG:
            return False, f"org {org_id} is {behind.seconds:.1f} s behind"
    return True, "ok"


# --- pruning -----------------------------------------------------------------------------------
def prune(now: dt.datetime | None = None) -> int:
    """Delete feed rows every follower seen recently has passed, and rows older than the
    retention whatever the followers (a node that far behind rebuilds). Returns rows deleted."""
    now = now or timezone.now()
    seen_since = now - dt.timedelta(hours=settings.FEED_FOLLOWER_TTL_HOURS)
    deleted = 0
    for org_id in ChangeHead.objects.values_list("org_id", flat=True):
        followers = Follower.objects.filter(org_id=org_id, seen_at__gte=seen_since)
        positions = list(followers.values_list("seq", flat=True))
        if positions:
            count, _ = Change.objects.filter(org_id=org_id, seq__lte=min(positions)).delete()
            deleted += count
    expired = now - dt.timedelta(days=settings.FEED_RETENTION_DAYS)
    count, _ = Change.objects.filter(created_at__lt=expired).delete()
    Follower.objects.filter(seen_at__lt=seen_since).delete()
    return deleted + count
