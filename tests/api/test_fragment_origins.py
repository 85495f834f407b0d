"""Every fragment in an answer says where it came from (issue 40, item 4).

``source`` is an object with a ``kind`` — never null — in REST and MCP retrieval answers and in
``GET /api/fragments/{id}``: ``file``, ``git`` or ``archive`` for a fragment a file brought (the
citation's fields as before), and for one no file brought, where it was written: ``console``
(``written_by``, ``written_at``), ``session`` (``session_id``) or ``proposal`` (``proposal_id``).
``doc_id`` is never null either (a written fragment's own id). Retrieval reads it in the
statement that reads the returned fragments (``contexts/retrieval/returned.py``), under the
retrieval role's row-level security (migration 0037). Before, ``source`` and ``doc_id`` were null
for every written fragment and an agent's client crashed on it.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync

from contexts.indexes.follower import reindex_fragments
from contexts.mcp import server as mcp_server
from contexts.models import SourceDocument, SourcePointer
from contexts.services.fragments import create_fragment
from contexts.usecases import proposals as proposal_cases
from tests.api.conftest import as_token

URL = "/api/contexts/retrieve"
QUERY = "limiter bucket"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def origins(cast, world):
    """One fragment per origin, all about the limiter bucket, in the web repository (the session
    note in the cast's session)."""

    def from_file(title: str, origin: str, commit: str | None = None):
        fragment = create_fragment(cast.owner, cast.repo.scope, title=title,
                                   body=f"{title}: the limiter bucket holds 10 tokens.")
        document = SourceDocument.objects.create(
            org=cast.org, repository=cast.repo, path=f"docs/{title}.md", content_hash="h",
            origin=origin, source_commit=commit)
        SourcePointer.objects.create(fragment=fragment, document=document, anchor=title,
                                     start_line=1, end_line=4)
        return fragment

    made = {
        "file": from_file("folder", "path:/srv/docs"),
        "git": from_file("git", f"git:src_{'a' * 14}", COMMIT),
        "archive": from_file("archive", "archive:docs.zip"),
        "console": create_fragment(cast.teammate, cast.repo.scope, title="Written",
                                   body="The limiter bucket is sized per tenant."),
        "session": world.session_note,
    }
    proposal = proposal_cases.propose_promotion(
        cast.token, proposal_cases.Promote(world.session_note.public_id, "repository"))
    proposal = proposal_cases.approve(cast.lead, proposal)
    made["proposal"] = proposal.result_fragment
    reindex_fragments([f.pk for f in made.values()])
    return SimpleNamespace(fragments=made, proposal=proposal)


def _by_id(fragments: list[dict]) -> dict[str, dict]:
    return {f["id"]: f for f in fragments}


def _check(answer: dict[str, dict], origins, cast) -> None:
    made = origins.fragments
    for kind, fragment in made.items():
        assert answer[fragment.public_id]["source"]["kind"] == kind, (kind, answer)
        assert answer[fragment.public_id]["doc_id"] is not None
    git = answer[made["git"].public_id]["source"]
    assert git["path"] == "docs/git.md" and git["commit"] == COMMIT and git["lines"] == [1, 4]
    assert answer[made["file"].public_id]["doc_id"] == "docs/folder.md#folder"
    console = answer[made["console"].public_id]
    assert console["doc_id"] == made["console"].public_id
    assert console["source"]["written_by"] == "teammate" and console["source"]["written_at"]
    session = answer[made["session"].public_id]["source"]
    assert session["session_id"] == cast.session.public_id and session["written_by"] is None
    proposal = answer[made["proposal"].public_id]["source"]
    assert proposal["proposal_id"] == origins.proposal.public_id
    assert proposal["written_by"] == "lead"


def test_rest_retrieval_says_where_each_fragment_came_from(api, cast, origins):
    response = as_token(api, cast.raw_token).post(URL, {
        "query": QUERY, "budget_tokens": 100_000,
        "scope": {"org_id": "acme", "repo_id": "web",
                  "session_id": cast.session.external_id}}, format="json")
    assert response.status_code == 200, response.json()
    _check(_by_id(response.json()["fragments"]), origins, cast)


# The tool runs in a thread of its own that closes its connection: data must be committed.
@pytest.mark.django_db(transaction=True)
def test_mcp_retrieval_says_the_same(cast, origins):
    ctx = SimpleNamespace(request_context=SimpleNamespace(request=SimpleNamespace(
        scope={mcp_server.TOKEN_SCOPE_KEY: cast.token})))
    result = async_to_sync(mcp_server.retrieve)(
        query=QUERY, budget_tokens=100_000, ctx=ctx, scope=mcp_server.RetrievalScope(
            org_id="acme", repo_id="web", session_id=cast.session.external_id))
    assert not result.is_error, result.content
    _check(_by_id(json.loads(result.content[0].text)["fragments"]), origins, cast)


def test_the_fragment_api_says_it_too(api, cast, origins):
    api.force_authenticate(cast.owner)
    for kind, fragment in origins.fragments.items():
        source = api.get(f"/api/fragments/{fragment.public_id}").json()["source"]
        assert source["kind"] == kind, (kind, source)
        assert {"path", "repository", "commit", "state"} <= set(source)
    console = api.get(f"/api/fragments/{origins.fragments['console'].public_id}").json()
    assert console["source"]["written_by"] == "teammate"
    assert console["source"]["path"] is None
    proposal = api.get(f"/api/fragments/{origins.fragments['proposal'].public_id}").json()
    assert proposal["source"]["proposal_id"] == origins.proposal.public_id
    session = api.get(f"/api/fragments/{origins.fragments['session'].public_id}").json()
    assert session["source"]["session_id"] == cast.session.public_id
