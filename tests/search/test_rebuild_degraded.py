"""Issue 22: while the lexical index is being rebuilt, `degraded` says so.

A rebuild (contexts/indexes/follower.py) empties an organization's index, then refills it from
PostgreSQL; a keyword search meanwhile finds little or nothing. The rebuild keeps a marker beside
the organization's lock for its duration, and the lexical leg reports
`lexical_index_rebuilding`. On the real database and index: a retrieval made from inside a
running rebuild (at its slow step, refilling), and one made while another writer — as a
`manage.py rebuild_index` process would — holds the organization's lock.
"""

from __future__ import annotations

import pytest

from contexts.indexes import follower
from contexts.indexes.indexing import lexical_index
from contexts.models import RetrievalTrace
from contexts.retrieval.degraded import CODES, LEXICAL_INDEX_REBUILDING
from tests.api.conftest import api, as_token, world  # noqa: F401 - re-exported fixtures
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture

pytestmark = pytest.mark.django_db

QUERY = {"query": "RateLimiter.acquire ERR_RATE token bucket",
         "scope": {"org_id": "acme", "repo_id": "web"}}


def retrieve(client) -> dict:
    response = client.post("/api/contexts/retrieve", QUERY, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_retrieval_during_a_rebuild_says_the_index_is_being_rebuilt(cast, world, api,  # noqa: F811
                                                                       monkeypatch):
    as_token(api, cast.raw_token)
    before = retrieve(api)
    assert before["degraded"] == {} and world.repo_limiter.public_id in {
        f["id"] for f in before["fragments"]}
    during: list[dict] = []
    refill = follower.lexical_doc

    def slow_step(fragment, paths):
        # The rebuild's slow part: the index was emptied and is being refilled.
        if not during:
            assert lexical_index(cast.org.pk).count() == 0
            during.append(retrieve(api))
        return refill(fragment, paths)

    monkeypatch.setattr(follower, "lexical_doc", slow_step)
    follower.rebuild(cast.org.pk)

    [answer] = during
    assert answer["degraded"] == {"lexical": LEXICAL_INDEX_REBUILDING}
    assert LEXICAL_INDEX_REBUILDING in CODES
    assert answer["fragments"]  # the dense leg still answered
    recorded = RetrievalTrace.objects.get(public_id=answer["trace_id"])
    assert recorded.versions["lexical_index"]["rebuilding"] is True
    # Done: the marker is gone, the index whole, and nothing is reported any more.
    assert not follower.rebuilding(cast.org.pk)
    assert not follower._rebuild_marker(cast.org.pk).exists()
    after = retrieve(api)
    assert after["degraded"] == {}
    assert "rebuilding" not in RetrievalTrace.objects.get(
        public_id=after["trace_id"]).versions["lexical_index"]


def test_a_rebuild_held_by_another_writer_is_reported(cast, world, api):  # noqa: F811
    """As while `manage.py rebuild_index` runs in another process: its marker is there and it
    holds the organization's lock (flock: per open file, so this thread is as good a holder)."""
    as_token(api, cast.raw_token)
    marker = follower._rebuild_marker(cast.org.pk)
    with follower._org_lock(cast.org.pk), follower._marked_rebuilding(cast.org.pk):
        assert marker.exists() and follower.rebuilding(cast.org.pk)
        assert retrieve(api)["degraded"] == {"lexical": LEXICAL_INDEX_REBUILDING}
    assert not marker.exists() and not follower.rebuilding(cast.org.pk)
    assert retrieve(api)["degraded"] == {}


def test_a_marker_left_by_a_killed_rebuild_is_no_rebuild_and_is_repaired(cast, world, api):  # noqa: F811
    """A rebuild killed half way leaves its marker, a partial index and the old mark (at the
    feed's head): nobody holds the lock, so no rebuild is reported, and the next catch-up —
    the node's follower's next pass — rebuilds the index."""
    as_token(api, cast.raw_token)
    marker = follower._rebuild_marker(cast.org.pk)
    marker.write_text('{"pid": 1}')
    lexical_index(cast.org.pk).delete([world.repo_limiter.public_id])  # the part not refilled
    assert not follower.rebuilding(cast.org.pk)
    assert follower._left_behind(cast.org.pk)
    assert retrieve(api)["degraded"] == {}
    follower.NodeFollower(interval=0).follow_once()
    assert not marker.exists()
    assert world.repo_limiter.public_id in lexical_index(cast.org.pk).all_fragment_ids()
