"""Issue 41: through the real legs, fusion and trace, a definition comes before the tests that
repeat its name unless the question asks about tests, a question in words about which
module does something counts the prose about it less than the code, and for such a question
a definition gains from the other parts of its file that match."""

import pytest

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import RetrievalTrace, SourceDocument, SourcePointer
from contexts.retrieval import adaptive
from contexts.retrieval.fuse import convex
from contexts.retrieval.types import FusionConfig
from contexts.services.fragments import create_fragment
from tests.api.conftest import as_token

SCOPE = {"org_id": "acme", "repo_id": "web"}
# The definition sits in a chunk it shares with a neighbour, as the chunker packs small
# definitions; the tests name the function in every line.
DEFINITION = '''class Membership(models.Model):
    """A person's role in an organization."""
    user = models.ForeignKey(User, on_delete=models.CASCADE)
    role = models.CharField(max_length=20)


def hash_token_secret(raw: str) -> str:
    """The stored form of an agent token's secret: its SHA-256, never the secret itself."""
    return hashlib.sha256(raw.encode()).hexdigest()'''
TESTS = ['''def test_hash_token_secret_is_stable():
    assert hash_token_secret("a") == hash_token_secret("a")
    assert hash_token_secret("a") != hash_token_secret("b")''',
         '''def test_hash_token_secret_hides_the_secret():
    assert "secret" not in hash_token_secret("secret")
    assert len(hash_token_secret("secret")) == 64''']


def _code(scope, title, body, kind="code", symbol=""):
    return create_fragment(SYSTEM, scope, title=title, body=body, kind=kind, namespace="code",
                           language="python", symbol=symbol)


def _fused(trace, config: FusionConfig | None = None, namespaces=None, files=None
           ) -> dict[str, float]:
    """Each candidate's relevance fused again from the trace's own leg scores at the recorded
    lexical share, without either discount (or with ``config``): what the discounts are
    measured against."""
    legs = {leg: sorted(((c["id"], c[leg]) for c in trace.candidates if c[leg] is not None),
                        key=lambda hit: -hit[1]) for leg in ("bm25", "dense")}
    choice = trace.parameters["adaptive"]
    fused = convex({"lexical": legs["bm25"], "dense": legs["dense"]},
                   config or FusionConfig.convex_share(choice["lexical_share"]),
                   namespaces, files=files)
    return {pk: c.relevance for pk, c in fused.items()}


def _ask(api, query):
    body = api.post("/api/contexts/retrieve", {"query": query, "scope": SCOPE},
                    format="json").json()
    return body, RetrievalTrace.objects.get(public_id=body["trace_id"])


def test_the_definition_comes_before_its_tests_unless_the_question_asks_about_tests(api, cast,
                                                                                    settings,
                                                                                    tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    definition = _code(cast.repo.scope, "Membership, hash_token_secret", DEFINITION,
                       symbol="Membership")
    tests = [_code(cast.repo.scope, f"test_tokens.py part {n}", body, kind="test")
             for n, body in enumerate(TESTS, start=1)]
    reindex_fragments([definition.pk, *(t.pk for t in tests)])
    as_token(api, cast.raw_token)

    test_ids = {t.public_id for t in tests}
    body, trace = _ask(api, "hash_token_secret")
    assert body["fragments"][0]["id"] == definition.public_id
    assert trace.parameters["adaptive"]["test_discount"] == adaptive.TEST_DISCOUNT
    plain = _fused(trace)
    for c in trace.candidates:  # the tests lose the discount's share, the definition nothing
        share = 1 - adaptive.TEST_DISCOUNT if c["id"] in test_ids else 1.0
        assert c["relevance"] == pytest.approx(share * plain[c["id"]], abs=1e-3), c
    assert {c["id"] for c in trace.candidates} == test_ids | {definition.public_id}

    body, trace = _ask(api, "how is hash_token_secret tested?")
    assert body["fragments"][0]["id"] in test_ids
    assert trace.parameters["adaptive"]["test_discount"] == 0.0
    plain = _fused(trace)
    assert all(c["relevance"] == pytest.approx(plain[c["id"]], abs=1e-3)
               for c in trace.candidates)


def test_a_which_module_question_in_words_discounts_the_prose(api, cast, world):
    definition = _code(cast.repo.scope, "Membership, hash_token_secret", DEFINITION,
                       symbol="Membership")
    prose = create_fragment(SYSTEM, cast.repo.scope, title="Agent tokens",
                            body="Agent tokens are kept hashed, so a copy of the database holds "
                                 "no token an agent could use.")
    reindex_fragments([definition.pk, prose.pk])
    as_token(api, cast.raw_token)
    _body, trace = _ask(api, "which module hashes agent tokens?")
    discount = trace.parameters["adaptive"]["prose_discount"]
    assert discount == trace.parameters["prose_discount"] == adaptive.LOCATION_PROSE_DISCOUNT
    plain = _fused(trace)
    for c in trace.candidates:  # prose loses the discount's share, code nothing
        keep = 1.0 if c["id"] == definition.public_id else 1 - discount
        assert c["relevance"] == pytest.approx(keep * plain[c["id"]], abs=1e-3), c
    assert len(trace.candidates) > 2  # the world's prose is scored too
    # A question with an identifier in it is not asked in words: no discount.
    _body, trace = _ask(api, "which module defines hash_token_secret?")
    assert trace.parameters["adaptive"]["prose_discount"] == 0.0


def _from_file(fragment, path: str) -> None:
    document, _ = SourceDocument.objects.get_or_create(
        org_id=fragment.org_id, path=path, defaults={"content_hash": path})
    SourcePointer.objects.create(fragment=fragment, document=document, anchor=fragment.title)


def test_a_question_in_words_lifts_the_parts_of_a_file_that_match_together(api, cast, settings,
                                                                           tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    scope = cast.repo.scope
    # Two parts of the file that decides which files a sync reads again, and a look-alike
    # elsewhere that shares the question's words.
    decide = _code(scope, "changed_paths", 'def changed_paths(old_tree, new_tree):\n'
                   '    """The paths whose blob differs between two trees: a sync reads only '
                   'these again."""\n    return {p for p in new_tree if old_tree.get(p) != '
                   'new_tree[p]}', symbol="changed_paths")
    module = _code(scope, "sync module", '"""A git sync: fetch the branch, work out which files '
                   'changed since the last sync, and ingest only those."""', symbol="")
    other = _code(scope, "file_changed_signal", 'def file_changed_signal(path):\n    """Tell '
                  'listeners which file changed."""\n    signal.send(path)',
                  symbol="file_changed_signal")
    _from_file(decide, "contexts/ingestion/git_sync.py")
    _from_file(module, "contexts/ingestion/git_sync.py")
    _from_file(other, "contexts/signals.py")
    reindex_fragments([decide.pk, module.pk, other.pk])
    as_token(api, cast.raw_token)

    _body, trace = _ask(api, "how does a sync work out which files changed?")
    choice = trace.parameters["adaptive"]
    assert choice["file_evidence"] == trace.parameters["file_evidence"] == adaptive.FILE_EVIDENCE
    # The trace's relevance is the fusion with the file evidence over the files the fragments
    # were cut from: re-fused from its own leg scores, it is the same, and not the same without.
    files = {decide.public_id: "sync", module.public_id: "sync", other.public_id: "signals"}
    code = dict.fromkeys(files, "code")
    share = choice["lexical_share"]
    relevance = {c["id"]: c["relevance"] for c in trace.candidates}
    with_files = _fused(trace, FusionConfig.convex_share(share, choice["prose_discount"],
                                                         choice["test_discount"],
                                                         adaptive.FILE_EVIDENCE), code, files)
    without = _fused(trace, FusionConfig.convex_share(share, choice["prose_discount"],
                                                      choice["test_discount"]), code, files)
    for pk in files:
        assert relevance[pk] == pytest.approx(with_files[pk], abs=1e-3), pk
    assert relevance != pytest.approx(without, abs=1e-3)
    # Each part of the sync file gained the other's score: both are above their plain fusion
    # relative to the look-alike.
    for pk in (decide.public_id, module.public_id):
        assert relevance[pk] / relevance[other.public_id] > without[pk] / without[other.public_id]

    # Asked where, the answer is the file: only its best part gains, so its other parts do
    # not crowd other files out.
    _body, trace = _ask(api, "which module works out which files changed in a sync?")
    choice = trace.parameters["adaptive"]
    assert (choice["file_evidence"], choice["file_evidence_parts"]) == \
        (adaptive.FILE_EVIDENCE, "best")
    relevance = {c["id"]: c["relevance"] for c in trace.candidates}
    best = _fused(trace, FusionConfig.convex_share(
        choice["lexical_share"], choice["prose_discount"], choice["test_discount"],
        adaptive.FILE_EVIDENCE, "best"), code, files)
    every = _fused(trace, FusionConfig.convex_share(
        choice["lexical_share"], choice["prose_discount"], choice["test_discount"],
        adaptive.FILE_EVIDENCE), code, files)
    for pk in files:
        assert relevance[pk] == pytest.approx(best[pk], abs=1e-3), pk
    assert relevance != pytest.approx(every, abs=1e-3)

    # Identifiers are not asked in words: no file evidence.
    _body, trace = _ask(api, "changed_paths")
    assert trace.parameters["adaptive"]["file_evidence"] == 0.0


def _fused_again(trace, parts: str, files: dict, anchors: dict | None) -> dict[str, float]:
    """The trace's candidates fused again from its own leg scores with the file evidence it
    chose, over ``files`` (and ``anchors``)."""
    choice = trace.parameters["adaptive"]
    config = FusionConfig.convex_share(choice["lexical_share"], choice["prose_discount"],
                                       choice["test_discount"], adaptive.FILE_EVIDENCE, parts)
    legs = {leg: sorted(((c["id"], c[leg]) for c in trace.candidates if c[leg] is not None),
                        key=lambda hit: -hit[1]) for leg in ("bm25", "dense")}
    fused = convex({"lexical": legs["bm25"], "dense": legs["dense"]}, config,
                   dict.fromkeys(files, "code"), files=files, anchors=anchors)
    return {pk: c.relevance for pk, c in fused.items()}


def test_asked_how_something_behaves_a_class_yields_to_its_method(api, cast, settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    scope = cast.repo.scope
    # The class describes in words what its method does; the method is the answer.
    limiter = _code(scope, "Limiter", 'class Limiter:\n    """Decides when a client has asked '
                    'too often: each client may ask a fixed number of times a minute, and is '
                    'told to wait once it has asked too often."""\n    per_minute = 600',
                    symbol="Limiter")
    allow = _code(scope, "Limiter.allow", 'def allow(self, client):\n    """Decide whether the '
                  'client has asked too often this minute; if so it must wait."""\n'
                  '    bucket = self.buckets[client]\n'
                  '    return bucket.take(1, per=60 / self.per_minute)', symbol="Limiter.allow")
    other = _code(scope, "log_line", 'def log_line(line):\n    """Write one line to the log '
                  'file."""\n    logger.info(line)', symbol="log_line")  # in another file
    _from_file(limiter, "contexts/limits.py")
    _from_file(allow, "contexts/limits.py")
    _from_file(other, "contexts/logs.py")
    reindex_fragments([limiter.pk, allow.pk, other.pk])
    as_token(api, cast.raw_token)
    files = {limiter.public_id: "limits", allow.public_id: "limits", other.public_id: "logs"}
    # The anchors the fragments were cut at (_from_file: their titles).
    anchors = {limiter.public_id: "Limiter", allow.public_id: "Limiter.allow",
               other.public_id: "log_line"}

    _body, trace = _ask(api, "how does it decide when a client has asked too often?")
    assert trace.parameters["adaptive"]["file_evidence_parts"] == "every"
    relevance = {c["id"]: c["relevance"] for c in trace.candidates}
    yielded = _fused_again(trace, "every", files, anchors)
    unyielded = _fused_again(trace, "every", files, None)
    # The trace's relevance is the fusion in which the class yielded to its method, read
    # through the real statement, and not the one without: the class lost ground to it.
    for pk in files:
        assert relevance[pk] == pytest.approx(yielded[pk], abs=1e-3), pk
    assert relevance != pytest.approx(unyielded, abs=1e-3)
    assert (relevance[limiter.public_id] / relevance[allow.public_id]
            < unyielded[limiter.public_id] / unyielded[allow.public_id])

    # Asked which module, the answer is the file: the class keeps its score.
    _body, trace = _ask(api, "which module decides when a client has asked too often?")
    assert trace.parameters["adaptive"]["file_evidence_parts"] == "best"
    relevance = {c["id"]: c["relevance"] for c in trace.candidates}
    kept = _fused_again(trace, "best", files, anchors)
    assert kept == pytest.approx(_fused_again(trace, "best", files, None))
    for pk in files:
        assert relevance[pk] == pytest.approx(kept[pk], abs=1e-3), pk
