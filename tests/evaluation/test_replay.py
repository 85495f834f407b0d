"""``manage.py replay``: recorded traces re-run against a candidate configuration over the same
stored scopes, through the real ``retrieve()``."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import Repository
from contexts.evaluation.replay import _fusion, candidate_request, parse_config, recorded_request
from contexts.ingestion.pipeline import Ingestor, Target
from contexts.ingestion.sources import SourceFile
from contexts.models import RetrievalTrace
from contexts.retrieval.pipeline import retrieve
from contexts.retrieval.types import RetrievalRequest
from tests.evaluation.conftest import DOCS
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db

# "quokkaflux" is in one document only: BM25 alone returns just that one, the hybrid
# pipeline fills the top-3 with dense neighbours — a single-leg candidate changes the top-3.
KEYWORD_QUERY = "what does quokkaflux control"


@pytest.fixture
def recorded(index_dir):
    """An organization with the tiny corpus (org scope) and a private repository document,
    and two recorded retrievals."""
    org = OrganizationFactory(slug="replay")
    repo = Repository.objects.create(org=org, slug="secret", name="secret")
    files = [SourceFile(f"{doc_id}.md", f"# {title}\n\n{text}".encode())
             for doc_id, (title, text) in DOCS.items()]
    Ingestor(Target(org=org, scope=org.scope), whole_documents=True).run(files)
    Ingestor(Target(org=org, scope=repo.scope, repository=repo), whole_documents=True).run(
        [SourceFile("hidden.md", b"# Quokkaflux secret\n\nquokkaflux quokkaflux internals")])
    for query in (KEYWORD_QUERY, "how long are database backups kept"):
        retrieve(RetrievalRequest(query=query, org_id=org.pk, scope_ids=frozenset({org.scope_id})))
    return org


def test_a_single_leg_candidate_lists_the_changed_query(recorded, capsys):
    call_command("replay", "--since", "2000-01-01", "--pipeline", '{"legs": ["lexical"]}')
    out = capsys.readouterr().out
    changed = [line for line in out.splitlines() if line.startswith("tr_")]
    assert len(changed) >= 1
    assert any(KEYWORD_QUERY in line for line in changed), out
    assert "replayed 2 of 2 traces" in out and "tokens Jaccard < 0.5" in out
    # The recorded scope set is reused as stored: the repository's document never appears.
    assert "hidden" not in out


def test_the_recorded_configuration_replays_unchanged(recorded, capsys):
    call_command("replay", "--since", "2000-01-01")
    out = capsys.readouterr().out
    assert "replayed 2 of 2 traces" in out and ": 0 changed top-3" in out
    call_command("replay", "--since", "2000-01-01", "--baseline", "recorded",
                 "--overlap", "ids")
    assert ": 0 changed top-3" in capsys.readouterr().out


def test_threshold_ids_mode_since_and_a_config_file(recorded, tmp_path, capsys):
    config = tmp_path / "candidate.json"
    config.write_text(json.dumps({"legs": ["lexical"]}))
    call_command("replay", "--since", "2000-01-01", "--pipeline", str(config),
                 "--overlap", "ids", "--threshold", "0.0")
    assert ": 0 changed top-3" in capsys.readouterr().out  # nothing is below 0
    call_command("replay", "--since", "2999-01-01", "--pipeline", str(config))
    assert "replayed 0 of 0 traces" in capsys.readouterr().out


def test_the_request_is_rebuilt_from_the_trace_and_overridden(recorded):
    trace = RetrievalTrace.objects.filter(query=KEYWORD_QUERY).get()
    request = recorded_request(trace)
    assert request.scope_ids == frozenset(trace.scope_ids) == {recorded.scope_id}
    assert request.legs == ("lexical", "dense") and request.reranker == "none"
    assert request.fusion.k == trace.parameters["rrf_k"]
    assert request.fusion.prose_discount == trace.parameters["prose_discount"]
    assert request.fusion.test_discount == trace.parameters["test_discount"]
    assert request.fusion.file_evidence == trace.parameters["file_evidence"]
    assert request.fusion.file_evidence_parts == trace.parameters["file_evidence_parts"]
    # A question in words: its file evidence is replayed as recorded, parts included.
    assert trace.parameters["file_evidence"] > 0
    where = _fusion(request.fusion, {**trace.parameters, "file_evidence_parts": "best"})
    assert (where.file_evidence, where.file_evidence_parts) == \
        (trace.parameters["file_evidence"], "best")
    candidate = candidate_request(request, parse_config(
        '{"rrf_k": 20, "leg_weights": {"lexical": 0.5, "dense": 1}, "legs": ["dense"]}'))
    assert candidate.fusion.k == 20.0 and candidate.legs == ("dense",)
    assert candidate.fusion.weight("lexical") == 0.5
    assert candidate.scope_ids == request.scope_ids and candidate.query == request.query
    # The trace recorded the convex weights adaptive fusion chose: replayed as recorded, those
    # run again; {"fusion": "adaptive"} asks the model anew.
    assert trace.parameters["fusion"] == "convex" and request.fusion.method == "convex"
    assert candidate_request(request, parse_config('{"fusion": "adaptive"}')).fusion.method \
        == "adaptive"


@pytest.mark.parametrize("config, message", [
    ('{"rrf": 20}', "unknown key(s) rrf"),
    ('{"legs": ["sparse"]}', "legs must be"),
    ('{"fusion": "magic"}', "fusion must be one of"),
    ("[1, 2]", "expected a JSON object"),
    ("not json", "not JSON"),
])
def test_bad_candidate_configurations_are_refused(config, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("replay", "--since", "2000-01-01", "--pipeline", config)
