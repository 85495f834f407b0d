"""An ingested fragment comes back from the API cited to its source — path, repository, anchor
and lines — and the citations of the whole bundle cost one query."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.ingestion.jobs import run_job
from contexts.usecases.ingestion import create_job

pytestmark = pytest.mark.django_db

RUNBOOK = """# Deploy runbook

## Rollback

To roll back a deploy, run `make rollback` and watch the error rate settle for ten minutes.

## Canary

Send five percent of traffic to the canary first.
"""


def test_retrieved_fragments_carry_their_source_and_citations_take_one_query(
        ingest_target, write_tree, tmp_path) -> None:
    root = write_tree(tmp_path / "tree", {"docs/runbook.md": RUNBOOK,
                                          "docs/other.md": "# Other\n\nUnrelated notes.\n"})
    job = run_job(create_job(SYSTEM, ingest_target.repo.scope, str(root),
                             created_by=ingest_target.creator).pk)
    assert job.state == "done", job.errors
    _, raw = create_token(ingest_target.org, "agent", [ingest_target.repo.scope])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    with CaptureQueriesContext(connection) as queries:
        response = api.post("/api/contexts/retrieve", json.dumps({
            "query": "how do I roll back a deploy?",
            "scope": {"org_id": ingest_target.org.slug, "repo_id": ingest_target.repo.slug},
        }), content_type="application/json")
    assert response.status_code == 200, response.json()
    fragments = response.json()["fragments"]
    rollback = next(f for f in fragments if "make rollback" in f["text"])
    source = rollback["source"]
    assert source["path"] == "docs/runbook.md"
    assert source["repository"] == ingest_target.repo.slug
    assert source["anchor"] and rollback["doc_id"] == f"docs/runbook.md#{source['anchor']}"
    start, end = source["lines"]
    assert 1 <= start <= end <= RUNBOOK.count("\n") + 1
    citation_queries = [q["sql"] for q in queries.captured_queries
                        if "contexts_sourcepointer" in q["sql"]
                        or "contexts_sourcedocument" in q["sql"]]
    assert len(citation_queries) == 1, citation_queries  # no per-fragment loads
    assert len(fragments) >= 2  # more than one fragment was cited by that one query
