"""The lexical index deleted or corrupted: retrieval continues dense-only and the trace says
so; ``rebuild_index`` restores it from PostgreSQL."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from contexts.indexes.indexing import index_path
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


def old_schema(path: Path) -> None:
    """The index as the version before issue 19 left it: title/body fields, no version file."""
    import tantivy
    shutil.rmtree(path)
    path.mkdir(parents=True)
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("fragment_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", tokenizer_name="en_stem")
    builder.add_text_field("body", tokenizer_name="en_stem")
    tantivy.Index(builder.build(), path=str(path))


def old_analyzers(path: Path) -> None:
    """Same fields, another schema version: only the version file can tell."""
    (path / "contexts-schema-version").write_text("1\n")


@pytest.mark.parametrize("outdate", [old_schema, old_analyzers])
def test_an_outdated_index_is_rebuilt_by_the_upgrade(api, cast, world, outdate):
    """`make run` after an upgrade: runstack runs `rebuild_index --outdated` before the
    workers start; until then the lexical leg says it is unavailable."""
    as_token(api, cast.raw_token)
    healthy = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    outdate(index_path(cast.org))
    from contexts.indexes.indexing import lexical_index
    lexical_index(cast.org)._index = None  # as after the upgrade's restart
    degraded = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert degraded["degraded"] == {"lexical": "lexical_index_unavailable"}

    call_command("rebuild_index", outdated=True)

    restored = api.post("/api/contexts/retrieve", QUERY, format="json").json()
    assert restored["degraded"] == {}
    assert [f["id"] for f in restored["fragments"]] == [f["id"] for f in healthy["fragments"]]
    assert all("symbol" in f for f in restored["fragments"])


def test_a_write_to_an_outdated_index_rebuilds_it(cast, world):
    """A follower that applies a change before the upgrade ran heals the index instead of
    failing."""
    from contexts.indexes.follower import reindex_fragments
    from contexts.indexes.indexing import lexical_index
    old_schema(index_path(cast.org))
    lexical_index(cast.org)._index = None  # the process had it open before
    reindex_fragments([world.repo_limiter.pk])
    assert lexical_index(cast.org).count() > 1  # everything, not just the one written
