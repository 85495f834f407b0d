"""The lexical index deleted or corrupted: retrieval continues dense-only and the trace says
so; ``rebuild_index`` restores it from PostgreSQL."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from contexts.indexing import index_path
from contexts.models import RetrievalTrace
from tests.api.conftest import as_token

QUERY = {"query": "RateLimiter.acquire ERR_RATE", "scope": {"org_id": "acme", "repo_id": "web"}}


def delete(path: Path) -> None:
    shutil.rmtree(path)


def garble_meta(path: Path) -> None:
    (path / "meta.json").write_text("{ this is not json")


def truncate_segments(path: Path) -> None:
    segment_files = [f for f in path.iterdir()
                     if f.is_file() and not f.name.endswith(".json") and not f.name.startswith(".")]
    assert segment_files
    for f in segment_files:
        f.write_bytes(b"\0" * 16)


@pytest.mark.parametrize("damage", [delete, garble_meta, truncate_segments],
                         ids=["deleted", "corrupt-meta", "corrupt-segments"])
def test_retrieval_goes_dense_only_and_rebuild_restores(api, cast, world,
                                                        damage: Callable[[Path], None]):
    as_token(api, cast.raw_token)
    healthy = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert healthy["degraded"] == {}
    trace = RetrievalTrace.objects.get(public_id=healthy["trace_id"])
    assert any(c["bm25"] is not None for c in trace.candidates)

    damage(index_path(cast.org))

    response = api.post("/api/contexts/retrieve", QUERY, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body["degraded"]) == {"lexical"}
    # The dense leg alone still finds the fragment about the rate limiter.
    assert world.repo_limiter.public_id in [f["id"] for f in body["fragments"]]
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert set(trace.degraded) == {"lexical"}
    assert all(c["bm25"] is None for c in trace.candidates)
    assert "lexical" not in trace.timings_ms
    shown = api.get(f"/api/traces/{body['trace_id']}").json()
    assert set(shown["degraded"]) == {"lexical"}

    call_command("rebuild_index", org="acme")

    restored = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert restored["degraded"] == {}
    trace = RetrievalTrace.objects.get(public_id=restored["trace_id"])
    assert any(c["bm25"] is not None for c in trace.candidates)
    assert [f["id"] for f in restored["fragments"]] == [f["id"] for f in healthy["fragments"]]


def test_a_missing_index_is_never_silently_recreated_empty(api, cast, world):
    """A search must not create an empty index where the real one was deleted: that would
    answer "no lexical hits" without saying anything was wrong."""
    as_token(api, cast.raw_token)
    path = index_path(cast.org)
    delete(path)
    for _ in range(2):
        body = api.post("/api/contexts/retrieve", QUERY, format="json").json()
        assert set(body["degraded"]) == {"lexical"}
    assert not path.exists()


def test_a_new_organization_has_an_empty_index_not_a_degraded_one(api, db):
    """"Missing" must mean a fault: an organization without fragments yet is not degraded."""
    from accounts.tokens import create_token
    from tests.factories import OrganizationFactory

    org = OrganizationFactory(slug="newco")
    assert (index_path(org) / "meta.json").exists()
    as_token(api, create_token(org, "agent", [org.scope])[1])
    body = api.post("/api/contexts/retrieve", {"query": "anything", "scope": {"org_id": "newco"}},
                    format="json").json()
    assert body["fragments"] == [] and body["degraded"] == {}
