"""Issue 19: results and traces carry the qualified name of the definition a fragment holds or
was cut from, and the lexical leg finds it by that name."""

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import RetrievalTrace
from contexts.services.fragments import create_fragment
from tests.api.conftest import as_token


def test_a_cut_method_is_found_by_its_qualified_name_and_says_so(api, cast, world):
    part = create_fragment(
        SYSTEM, cast.repo.scope, kind="code", language="python",
        title="TokenBucket.refill (part 2/3)", symbol="TokenBucket.refill",
        body="        # still refilling\n        self.tokens = min(self.capacity, self.tokens + n)",
        namespace="code")
    reindex_fragments([part.pk])
    as_token(api, cast.raw_token)
    body = api.post("/api/contexts/retrieve",
                    {"query": "TokenBucket.refill", "scope": {"org_id": "acme", "repo_id": "web"}},
                    format="json").json()
    first = body["fragments"][0]
    assert first["id"] == part.public_id
    assert first["symbol"] == "TokenBucket.refill"
    assert all(f["symbol"] == "" for f in body["fragments"][1:])  # prose has none
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert trace.returned[0]["symbol"] == "TokenBucket.refill"
