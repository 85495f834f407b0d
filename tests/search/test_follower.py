"""The change feed and the index follower (issue 21, ADR 0015), on the real database and index.

What a node's index holds is derived from PostgreSQL through the feed only: every change through
the one door appends to the feed in its own transaction, the follower applies the feed in order,
records its mark inside the index directory, and rebuilds when the index or the feed it needs is
gone. Multi-process behaviour (two web nodes, a worker node, SIGKILL) is ``simulate_nodes``'s,
run by tests/operations/test_simulate_nodes.py.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time

import pytest
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from accounts.permissions import SYSTEM
from contexts.indexes import follower
from contexts.indexes.indexing import index_path, lexical_index
from contexts.models import Change, ChangeHead, Follower, FragmentStatus, RetrievalTrace
from contexts.search import LexicalDoc
from contexts.services.change_feed import changes_committed
from contexts.services.fragments import create_fragment, edit_fragment, retire_fragment
from contexts.signals import apply_own_changes
from tests.api.conftest import api, as_token, world  # noqa: F401 - re-exported fixtures
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture

QUERY = {"query": "rate limiter bucket", "scope": {"org_id": "acme", "repo_id": "web"}}


def ids_in_index(org_id: int) -> set[str]:
    return set(lexical_index(org_id).all_fragment_ids())


def active_ids(org) -> set[str]:
    return set(org.fragments.filter(status=FragmentStatus.ACTIVE)
               .values_list("public_id", flat=True))


@pytest.fixture
def index_dir(settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    return settings.LEXICAL_INDEX_DIR


def note(cast, body: str, title: str = "Note"):  # noqa: F811
    return create_fragment(SYSTEM, cast.repo.scope, title=title, body=body)


# --- the feed ----------------------------------------------------------------------------------

def test_every_change_through_the_door_appends_in_order(cast, index_dir):  # noqa: F811
    first = note(cast, "The ledger closes at midnight.")
    edited = edit_fragment(SYSTEM, first, based_on_version=first.version,
                           body="The ledger closes at noon.")
    retire_fragment(SYSTEM, edited, reason="obsolete")
    rows = list(Change.objects.filter(org=cast.org).order_by("seq")
                .values_list("seq", "kind", "public_id"))
    assert [kind for _, kind, _ in rows] == ["create", "version", "retire"]
    seqs = [seq for seq, _, _ in rows]
    assert seqs == list(range(seqs[0], seqs[0] + 3))  # gapless
    assert ChangeHead.objects.get(org=cast.org).seq == seqs[-1]
    assert {public_id for _, _, public_id in rows} == {first.public_id}


def test_a_rolled_back_change_leaves_no_row_and_no_gap(cast, index_dir):  # noqa: F811
    note(cast, "Committed first.")
    before = ChangeHead.objects.get(org=cast.org).seq
    with pytest.raises(RuntimeError), transaction.atomic():
        note(cast, "Rolled back.")
        raise RuntimeError("abort")
    assert ChangeHead.objects.get(org=cast.org).seq == before
    after = note(cast, "Committed second.")
    last = Change.objects.filter(org=cast.org).order_by("-seq").first()
    assert last.seq == before + 1 and last.public_id == after.public_id


# --- applying ----------------------------------------------------------------------------------

def test_catch_up_applies_the_feed_and_records_its_mark_in_the_index(cast, index_dir):  # noqa: F811
    kept = note(cast, "Tokens are hashed with sha256 before storage.")
    gone = note(cast, "The old queue retries forever.")
    retire_fragment(SYSTEM, gone)
    mark = follower.catch_up(cast.org.pk)
    assert mark == ChangeHead.objects.get(org=cast.org).seq
    assert follower.read_mark(cast.org.pk).seq == mark
    assert (index_path(cast.org) / follower.STATE_FILE).exists()
    assert ids_in_index(cast.org.pk) == {kept.public_id} == active_ids(cast.org)
    hits = lexical_index(cast.org.pk).search("sha256", [cast.repo.scope.pk])
    assert [fid for fid, _ in hits] == [kept.public_id]


def test_a_deleted_index_is_rebuilt_from_postgresql(cast, world, index_dir):  # noqa: F811
    before = ids_in_index(cast.org.pk)
    shutil.rmtree(index_path(cast.org))
    lexical_index(cast.org)._index = None
    follower.catch_up(cast.org.pk)
    assert ids_in_index(cast.org.pk) == before == active_ids(cast.org)


def test_a_feed_pruned_past_the_mark_rebuilds(cast, world, index_dir):  # noqa: F811
    mark = follower.read_mark(cast.org.pk).seq
    extra = [note(cast, f"Fact number {n} about the billing cron.") for n in range(3)]
    Change.objects.filter(org=cast.org, seq=mark + 1).delete()  # pruned before this node saw it
    follower.catch_up(cast.org.pk)
    assert {f.public_id for f in extra} <= ids_in_index(cast.org.pk)
    assert follower.read_mark(cast.org.pk).seq == ChangeHead.objects.get(org=cast.org).seq


def test_a_feed_that_went_backwards_rebuilds(cast, world, index_dir):  # noqa: F811
    """A database restored from an older backup hands out sequence numbers again: the row at
    the node's mark is another change now, and the index is rebuilt."""
    mark = follower.read_mark(cast.org.pk)
    Change.objects.filter(org=cast.org, seq=mark.seq).delete()
    Change.objects.create(org=cast.org, seq=mark.seq, fragment_id=world.repo_limiter.pk,
                          public_id=world.repo_limiter.public_id, kind="reindex")
    # Something only the lost history had: the rebuild must drop it.
    lexical_index(cast.org).upsert([LexicalDoc(
        fragment_id="frag_lost", scope_ids=(cast.repo.scope.pk,), kind="note", title="",
        body="only in the index", identifiers="")])
    follower.catch_up(cast.org.pk)
    assert ids_in_index(cast.org.pk) == active_ids(cast.org)
    assert follower.read_mark(cast.org.pk).change_id != mark.change_id


def test_a_node_without_an_index_writes_none(cast, index_dir, settings):  # noqa: F811
    settings.INDEX_FOLLOWER = False
    note(cast, "Written on a worker node.")
    assert follower.catch_up(cast.org.pk) == 0
    assert not index_path(cast.org).exists()


# --- the node's follower thread ----------------------------------------------------------------

def wait_for(predicate, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def remote_writes():
    """Changes committed here are not applied by this process after commit, as if another node
    had made them: only the follower thread can bring them into this node's index."""
    changes_committed.disconnect(apply_own_changes)
    yield
    changes_committed.connect(apply_own_changes)


@pytest.mark.django_db(transaction=True)
def test_the_follower_applies_what_another_node_committed(cast, node_follower,  # noqa: F811
                                                         remote_writes):
    leader = node_follower()
    standby = node_follower()
    assert wait_for(lambda: leader.heartbeat or standby.heartbeat)
    time.sleep(0.3)
    assert bool(leader.heartbeat) != bool(standby.heartbeat)  # one writer per node
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Remote",
                               body="Deploy freezes start on the 20th of December.")
    assert wait_for(lambda: fragment.public_id in ids_in_index(cast.org.pk))
    retire_fragment(SYSTEM, fragment)
    assert wait_for(lambda: fragment.public_id not in ids_in_index(cast.org.pk))
    head = ChangeHead.objects.get(org=cast.org).seq
    assert wait_for(lambda: Follower.objects.filter(org=cast.org, seq=head).exists(), 10)


# --- lag, readiness, degraded ------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_readyz_follows_the_follower(cast, node_follower, settings):  # noqa: F811
    client = Client()
    assert client.get("/readyz").status_code == 503  # no pass yet on this node
    node = node_follower()
    assert wait_for(lambda: client.get("/readyz").status_code == 200)
    node.stop()
    settings.INDEX_MAX_LAG = 0.5
    assert wait_for(lambda: client.get("/readyz").status_code == 503, seconds=5)
    body = client.get("/readyz")
    assert body.json() == {"status": "unavailable"} and body["Retry-After"] == "5"


def test_an_index_behind_the_feed_is_reported_degraded(cast, world, settings, api):  # noqa: F811
    as_token(api, cast.raw_token)
    fresh = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert fresh["degraded"] == {}
    trace = fresh["trace_id"]
    note(cast, "A change this node has not applied.")
    Change.objects.filter(org=cast.org).update(
        created_at=timezone.now() - dt.timedelta(seconds=60))
    stale = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert stale["degraded"] == {"lexical": "lexical_index_behind"}
    assert stale["fragments"]  # still answered, from the index it has
    follower.catch_up(cast.org.pk)
    again = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert again["degraded"] == {}
    recorded = RetrievalTrace.objects.get(public_id=trace).versions["lexical_index"]
    assert recorded["mark"] == recorded["head"] and recorded["lag_seconds"] == 0


def test_metrics_export_the_lag_per_organization(cast, world, settings):  # noqa: F811
    collected = {m.name: m for m in follower.LAG_COLLECTOR.collect()}
    samples = {s.labels["org"]: s.value for s in collected["contexts_index_lag_changes"].samples}
    assert samples[cast.org.slug] == 0
    note(cast, "Unapplied.")
    collected = {m.name: m for m in follower.LAG_COLLECTOR.collect()}
    samples = {s.labels["org"]: s.value for s in collected["contexts_index_lag_changes"].samples}
    assert samples[cast.org.slug] == 1


# --- pruning -----------------------------------------------------------------------------------

def test_prune_keeps_what_a_recent_follower_still_needs(cast, index_dir, settings):  # noqa: F811
    for n in range(4):
        note(cast, f"Fact {n} about the release train.")
    seqs = list(Change.objects.filter(org=cast.org).order_by("seq").values_list("seq", flat=True))
    Follower.objects.create(org=cast.org, node="a", seq=seqs[1])
    Follower.objects.create(org=cast.org, node="b", seq=seqs[3])
    Follower.objects.create(org=cast.org, node="gone", seq=0,
                            seen_at=timezone.now() - dt.timedelta(days=3))
    follower.prune()
    left = list(Change.objects.filter(org=cast.org).values_list("seq", flat=True))
    assert sorted(left) == seqs[2:]  # node a still needs them
    assert not Follower.objects.filter(node="gone").exists()
    Change.objects.filter(org=cast.org).update(
        created_at=timezone.now() - dt.timedelta(days=settings.FEED_RETENTION_DAYS + 1))
    follower.prune()
    assert not Change.objects.filter(org=cast.org).exists()


def test_the_feed_is_written_in_the_changing_transaction(cast, index_dir):  # noqa: F811
    """Not after commit: a crash between the change and the feed row cannot happen."""
    with transaction.atomic():
        fragment = note(cast, "Inside one transaction.")
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM contexts_change WHERE public_id = %s",
                           [fragment.public_id])
            assert cursor.fetchone()[0] == 1


@pytest.mark.django_db(transaction=True)
def test_the_follower_removes_the_index_of_a_deleted_organization(cast, node_follower):  # noqa: F811
    node = node_follower()
    assert wait_for(lambda: (index_path(cast.other_org) / follower.STATE_FILE).exists())
    gone = index_path(cast.other_org)
    cast.other_org.delete()
    assert wait_for(lambda: not gone.exists())
    assert node.heartbeat and index_path(cast.org).exists()
