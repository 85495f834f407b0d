"""Adaptive fusion: the query's features, the policy, the shipped model, and the trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contexts.retrieval import adaptive
from contexts.retrieval.types import FusionConfig
from devtools import fusion_fit

ERROR = ("ImproperlyConfigured: The SECRET_KEY setting must not be empty.\n"
         '  File "contexts/settings.py", line 82, in <module>')
LEGS = {"lexical": [(1, 12.0), (2, 6.0), (3, 5.0)], "dense": [(2, 0.61), (4, 0.55), (1, 0.5)]}


def test_text_features_tell_identifiers_errors_and_questions_apart():
    question = adaptive.text_features("how are agent tokens hashed?")
    identifier = adaptive.text_features("hash_token_secret sha256")
    dotted = adaptive.text_features("QuerySet.bulk_create contexts/api/retrieve.py")
    error = adaptive.text_features(ERROR)
    assert question["identifier_share"] == 0 and question["error_like"] == 0
    assert identifier["identifier_share"] == 0.5
    assert dotted["identifier_share"] == 1.0
    assert error["error_like"] == 1.0 and question["log_terms"] < error["log_terms"]
    assert set(error) == set(adaptive.TEXT_FEATURES)


def test_path_share_counts_file_paths_and_module_names_not_qualified_identifiers():
    assert adaptive.text_features("contexts/search/_backend.py")["path_share"] == 1.0
    assert adaptive.text_features("what is in contexts.services.rls")["path_share"] == 0.25
    assert adaptive.text_features("QuerySet.bulk_create")["path_share"] == 0.0
    assert adaptive.text_features("e.g. how do I pin")["path_share"] == 0.0


@pytest.mark.parametrize("pasted", [
    "InvalidOperation: the context belongs to another organization",
    "django.core.signing.BadSignature: malformed nudge token",
    "ValueError('bad')",
    "WARNING contexts.retrieval.lexical lexical leg failed for org 12",
    "2026-11-30 10:02:11 job lost its worker",
    '{"error": {"code": "invalid", "field": "top_k"}}',
    "403 Forbidden: you may not edit fragments in this scope",
    "fatal: not a git repository",
    # A program's message pasted without its exception class: a marked value or name, or a
    # sentence opening in lower case, in the words of something gone wrong.
    "unknown fusion method 'max' (rrf, convex)",
    "Fragment.body must not be empty",
    "nudge 41 escalated: the owner's account is deactivated",
    "an owner cannot hand a fragment over to themselves",
    "job job_01jdc0ab12mn was queued with no message in the broker; published again",
])
def test_pasted_errors_and_log_lines_are_error_like(pasted):
    assert adaptive.text_features(pasted)["error_like"] == 1.0


@pytest.mark.parametrize("asked", [
    "Note: how do I pin a fragment?",
    "what happens on an error in the worker",
    "why is INFO logging so verbose",
    "HashTokenSecret",
    "QuerySet.bulk_create: where is it called",
    "0-dimensional biomaterials show inductive properties.",
    # Keywords typed into a search box name what went wrong without being a message; a claim,
    # a question about an error and a paragraph are not messages either.
    "python setuptools command not found",
    "python list remove list indices must be",
    "Localization of PIN1 in the roots of Arabidopsis requires VPS9a",
    "the sync cannot reach the remote, what should I check?",
    "the cohort was followed for ten years and " * 5 + "the treatment failed to reduce events",
    # Phrases in the words of a message, with no mark of machine text: two apostrophes are not
    # a quoted value, and "with no", "must" or "timeout" alone do not make a sentence a message.
    "Alice's API key isn't accepted after rotation",
    "documents with no owner",
    "fragments that must be reviewed by an owner",
    "tests of the wsgi bridge's body limit and timeout",
])
def test_questions_and_identifiers_are_not_error_like(asked):
    assert adaptive.text_features(asked)["error_like"] == 0.0


def test_list_features_are_scale_free():
    values = adaptive.features("x", LEGS, {1: "prose", 2: "code", 3: "prose", 4: "code"})
    assert values["lexical_gap"] == pytest.approx(0.5)
    assert values["lexical_spread"] == 1.0  # fewer than ten hits: as spread as it gets
    scaled = adaptive.features("x", {**LEGS, "lexical": [(p, s * 7) for p, s in LEGS["lexical"]]},
                               {})
    assert scaled["lexical_gap"] == values["lexical_gap"]
    assert values["agreement"] == pytest.approx(0.2) and values["code_share"] == 0.5
    assert values["dense_top"] == 0.61 and values["dense_gap"] == pytest.approx(0.06)


def model_with(bias: list[float]) -> adaptive.FusionModel:
    k, f = len(fusion_fit.GRID), len(adaptive.FEATURES)
    return adaptive.FusionModel("t", fusion_fit.GRID, np.zeros(f), np.ones(f),
                                np.zeros((k, f)), np.array(bias, dtype=float))


def test_the_expected_share_and_a_missing_leg():
    k = len(fusion_fit.GRID)
    assert model_with([0.0] * k).lexical_share(adaptive.features("x", LEGS, {})) == \
        pytest.approx(0.5)
    lexical_only = model_with([50.0 if i == k - 1 else 0.0 for i in range(k)])
    share, info = adaptive.choose("x", LEGS, {}, lexical_only)
    assert share == pytest.approx(1.0) and info["model"] == "t"
    assert set(info["features"]) == set(adaptive.FEATURES)
    assert adaptive.choose("x", {"dense": LEGS["dense"]}, {}, lexical_only)[0] == 0.0
    assert adaptive.choose("x", {"lexical": LEGS["lexical"], "dense": []}, {})[0] == 1.0


CODE = {pk: "code" for pk in (1, 2, 3, 4)}
LEXICAL_ONLY = model_with([0.0] * (len(fusion_fit.GRID) - 1) + [50.0])  # the model says α 1
DENSE_ONLY = model_with([50.0] + [0.0] * (len(fusion_fit.GRID) - 1))    # the model says α 0


@pytest.mark.parametrize(("query", "floored"), [
    ("hash_token_secret", "identifiers"),             # an identifier
    ("contexts/retrieval/fuse.py", "identifiers"),    # a path
    ("QuerySet.bulk_create sha256", "identifiers"),   # half identifiers
    (ERROR, "error"),                                 # a pasted error
    ("KeyError: 'fragment_id'", "error"),             # an error of identifiers: an error
    ("how are agent tokens hashed?", ""),             # words
    ("where is hash_token_secret called from", ""),   # words around one identifier
])
def test_a_query_of_exact_words_gives_the_lexical_leg_at_least_its_floor(query, floored):
    dense_only = DENSE_ONLY
    share, info = adaptive.choose(query, LEGS, CODE, dense_only)
    floor = adaptive.EXACT_WORDS_SHARE if floored else 0.0
    assert share == pytest.approx(floor, abs=1e-9)
    assert info["lexical_floor"] == floor
    assert info["share_rule"] == ("exact_words" if floored else "")
    # A model that already leans lexical keeps its own share.
    assert adaptive.choose(query, LEGS, CODE, LEXICAL_ONLY)[0] == pytest.approx(1.0)
    # The fit scores the model as it serves: with the floor.
    values = adaptive.features(query, LEGS, CODE)
    assert adaptive.lexical_share(dense_only, values) == pytest.approx(share)
    # With one leg missing the other gets it all, and no floor is claimed for the trace.
    share, info = adaptive.choose(query, {"dense": LEGS["dense"]}, CODE, dense_only)
    assert share == 0.0 and info["lexical_floor"] == 0.0 and info["share_rule"] == ""


PARAGRAPH = " ".join(["the", "trial", "measured", "how", "often", "patients", "recovered",
                      "after", "treatment"] * 8)  # 72 words, no question


@pytest.mark.parametrize(("query", "namespaces", "model", "share", "rule"), [
    # A question or a task in words among prose: at most the ceiling, however the model leans.
    ("how are agent tokens hashed?", {}, "lexical", adaptive.PROSE_QUESTION_SHARE,
     "question_over_prose"),
    ("how do I start the demo", {}, "lexical", adaptive.PROSE_QUESTION_SHARE,
     "question_over_prose"),
    # … and the model's own share when it leans further to the dense leg.
    ("how are agent tokens hashed?", {}, "dense", 0.0, "question_over_prose"),
    # Among code the model decides (the fit's questions were asked over code).
    ("how are agent tokens hashed?", "code", "lexical", 1.0, ""),
    # A claim is not a question; a question with an identifier is not in words.
    ("agent tokens are hashed with sha256", {}, "lexical", 1.0, ""),
    ("how is hash_token_secret called?", {}, "lexical", 1.0, ""),
    # A paragraph: at least the long-query floor, among prose or code.
    (PARAGRAPH, {}, "dense", adaptive.LONG_QUERY_SHARE, "paragraph"),
    (PARAGRAPH, "code", "dense", adaptive.LONG_QUERY_SHARE, "paragraph"),
    (PARAGRAPH, {}, "lexical", 1.0, "paragraph"),
    (" ".join(PARAGRAPH.split()[:60]), {}, "dense", 0.0, ""),   # 60 words: a long sentence
    # A long paragraph asked as a question is still a paragraph.
    (PARAGRAPH + "?", {}, "dense", adaptive.LONG_QUERY_SHARE, "paragraph"),
    # A pasted error, however long, keeps the exact-words floor.
    (ERROR + "\n" + PARAGRAPH, {}, "dense", adaptive.EXACT_WORDS_SHARE, "exact_words"),
])
def test_queries_no_fit_set_holds_get_bounds_on_the_share(query, namespaces, model, share, rule):
    namespaces = CODE if namespaces == "code" else namespaces
    policy = LEXICAL_ONLY if model == "lexical" else DENSE_ONLY
    got, info = adaptive.choose(query, LEGS, namespaces, policy)
    assert got == pytest.approx(share, abs=1e-9) and info["share_rule"] == rule
    low, high, _ = adaptive.share_bounds(adaptive.features(query, LEGS, namespaces),
                                         adaptive.in_words(query, adaptive.text_features(query)))
    assert (info["lexical_floor"], info["lexical_ceiling"]) == (low, high)
    assert low <= got <= high


def words(n: int) -> str:
    return " ".join((PARAGRAPH.split() * 2)[:n])


@pytest.mark.parametrize(("query", "rule"), [
    (words(adaptive.LONG_QUERY_WORDS), ""),
    (words(adaptive.LONG_QUERY_WORDS + 1), "paragraph"),
    # Names are words; snake_case, a path and a number are exact words.
    ("how do I list the APIs on GitHub?", "question_over_prose"),
    ("how does PostgreSQL store OAuth secrets?", "question_over_prose"),
    ("why do I get a 429?", ""),
    ("where is hash_token_secret explained?", ""),
    ("what does docs/api.md say about tokens?", ""),
    # An order, not a question.
    ("explain how agent tokens are hashed", ""),
])
def test_where_each_bound_starts(query, rule):
    assert adaptive.choose(query, LEGS, {}, DENSE_ONLY)[1]["share_rule"] == rule


@pytest.mark.parametrize(("code", "bounded"), [(0, True), (1, True), (2, False)])
def test_a_pool_is_prose_under_a_quarter_code(code, bounded):
    """Eight fragments in both legs' top 20: one is 12.5 % code (prose), two are 25 %."""
    legs = {"lexical": [(pk, 10.0 - pk) for pk in range(1, 9)],
            "dense": [(pk, 0.9 - pk / 100) for pk in range(1, 9)]}
    namespaces = {pk: "code" if pk <= code else "prose" for pk in range(1, 9)}
    share, info = adaptive.choose("how are agent tokens hashed?", legs, namespaces,
                                  LEXICAL_ONLY)
    assert info["features"]["code_share"] == code / 8
    assert share == (adaptive.PROSE_QUESTION_SHARE if bounded else pytest.approx(1.0))


def test_a_share_that_is_not_a_number_becomes_a_bound():
    broken = model_with([float("nan")] * len(fusion_fit.GRID))
    values = adaptive.features("how are agent tokens hashed?", LEGS, {})
    assert adaptive.lexical_share(broken, values, True) == adaptive.PROSE_QUESTION_SHARE


@pytest.mark.parametrize(("query", "discount"), [
    # Where something is done, asked in words: the code that does it.
    ("which module checks an uploaded zip for too many members?", adaptive.LOCATION_PROSE_DISCOUNT),
    ("Which files decide the queue a sync runs in", adaptive.LOCATION_PROSE_DISCOUNT),
    ("which console module draws the score bars?", adaptive.LOCATION_PROSE_DISCOUNT),
    ("where is scope enforced", adaptive.LOCATION_PROSE_DISCOUNT),
    # How something behaves: code a little more often than prose.
    ("how does a sync work out which files changed?", adaptive.QUESTION_PROSE_DISCOUNT),
    ("what happens when a reviewer approves a proposal?", adaptive.QUESTION_PROSE_DISCOUNT),
    ("does an agent get a summary of a fragment", adaptive.QUESTION_PROSE_DISCOUNT),
    # A task asks for instructions; keywords, identifiers, paths and errors are not asked in words.
    ("how do I run the test suite", 0.0),
    ("where do I find the logs?", 0.0),
    ("how to upgrade an installation", 0.0),
    ("tantivy schema fields", 0.0),
    ("which module defines hash_token_secret?", 0.0),
    ("what is in contexts/search/_terms.py?", 0.0),
    (ERROR, 0.0),
])
def test_the_prose_discount_follows_how_the_question_is_asked(query, discount):
    assert adaptive.prose_discount(query, adaptive.text_features(query)) == discount
    assert adaptive.choose(query, LEGS, {})[1]["prose_discount"] == discount
    # The file evidence goes with it: a question in words, where or how, and nothing else;
    # a question about where gains only the best part of each file.
    evidence = adaptive.FILE_EVIDENCE if discount else 0.0
    parts = "best" if discount == adaptive.LOCATION_PROSE_DISCOUNT else "every"
    assert adaptive.file_evidence(query, adaptive.text_features(query)) == (evidence, parts)
    choice = adaptive.choose(query, LEGS, {})[1]
    assert (choice["file_evidence"], choice["file_evidence_parts"]) == (evidence, parts)


@pytest.mark.parametrize(("query", "discount"), [
    ("hash_token_secret", adaptive.TEST_DISCOUNT),
    ("how are agent tokens hashed?", adaptive.TEST_DISCOUNT),
    (ERROR, adaptive.TEST_DISCOUNT),
    ("how is hash_token_secret tested?", 0.0),
    ("tests for the fusion arithmetic", 0.0),
    ("which fixture builds the world", 0.0),
    ("latest release notes", adaptive.TEST_DISCOUNT),  # "latest" is not "test"
])
def test_test_code_counts_less_unless_the_question_asks_about_tests(query, discount):
    assert adaptive.discount_for_tests(query) == discount
    assert adaptive.choose(query, LEGS, {})[1]["test_discount"] == discount


def test_a_model_fitted_on_other_features_is_refused():
    data = model_with([0.0] * len(fusion_fit.GRID)).as_json()
    data["features"] = data["features"][:-1]
    with pytest.raises(ValueError, match="re-fit"):
        adaptive.FusionModel.from_json(data)


def test_the_fit_learns_which_share_wins_for_which_query():
    # Identifier queries are won by the lexical leg, questions by the dense leg.
    rng = np.random.default_rng(7)
    rows, gains = [], []
    for i in range(200):
        identifier = i % 2 == 0
        values = {name: float(rng.random()) for name in adaptive.FEATURES}
        values["identifier_share"] = 0.9 if identifier else 0.0
        values["error_like"] = 0.0  # a pasted error would get the exact-words floor
        rows.append([values[name] for name in adaptive.FEATURES])
        gains.append([a if identifier else 1 - a for a in fusion_fit.GRID])
    data = fusion_fit.Collected("toy:train", [str(i) for i in range(200)], np.array(rows),
                                np.array(gains), np.array(gains), [""] * 200)
    model = fusion_fit.fit([data], version="toy")
    ident = dict(zip(adaptive.FEATURES, rows[0], strict=True))
    question = dict(zip(adaptive.FEATURES, rows[1], strict=True))
    assert model.lexical_share(ident) > 0.8 and model.lexical_share(question) < 0.2
    assert fusion_fit.score(model, data) > data.ndcg[:, 5].mean() + 0.3
    assert adaptive.FusionModel.from_json(json.loads(json.dumps(model.as_json()))) \
        .lexical_share(ident) == pytest.approx(model.lexical_share(ident))


def test_the_fit_scores_a_question_over_prose_within_its_ceiling():
    """fusion_fit.score serves the share as retrieval does: a question asked in words over
    prose (its text read again from the cache, so ``asked`` holds) gets at most the ceiling."""
    n = 10
    rows = np.full((n, len(adaptive.FEATURES)), 0.0)
    rows[:, adaptive.FEATURES.index("log_terms")] = 2.0
    gains = np.array([[a for a in fusion_fit.GRID]] * n)   # the lexical leg wins
    data = fusion_fit.Collected("qa:dev", [str(i) for i in range(n)], rows, gains, gains,
                                [""] * n)
    assert fusion_fit.score(LEXICAL_ONLY, data) == pytest.approx(1.0)
    texts = {str(i): "how do I pin a fragment?" for i in range(n)}
    asked = fusion_fit._with_text_features(data, texts)
    assert asked.asked == [True] * n
    assert fusion_fit.score(LEXICAL_ONLY, asked) == pytest.approx(adaptive.PROSE_QUESTION_SHARE)


def test_the_fit_does_not_trade_a_dataset_away_below_its_best_fixed_share():
    """A big dataset that wants the lexical leg and a small one that wants the dense leg, told
    apart by one feature, and an L2 strong enough that separating them costs: without the floor
    the fit serves the big one and leaves the small one at what α = 1 gives it; with the floor
    it serves both (the small one within 0.02 of its best fixed share)."""
    column = adaptive.FEATURES.index("code_share")

    def dataset(name: str, n: int, gain, code: float) -> fusion_fit.Collected:
        rows = np.full((n, len(adaptive.FEATURES)), 0.5)
        rows[:, column] = code
        # Questions in words: neither exact-words feature, so the model's share is served.
        for name in ("identifier_share", "error_like"):
            rows[:, adaptive.FEATURES.index(name)] = 0.0
        gains = np.array([[gain(a) for a in fusion_fit.GRID]] * n)
        return fusion_fit.Collected(name, [str(i) for i in range(n)], rows, gains, gains,
                                    [""] * n)

    lexical_wins = dataset("prose:train", 400, lambda a: 0.2 + 0.8 * a, 0.0)
    dense_wins = dataset("code:dev", 50, lambda a: 0.6 - 0.2 * a, 1.0)
    sets = [lexical_wins, dense_wins]
    unfloored = fusion_fit.fit(sets, version="toy", l2=0.1, floor=0.0)
    floored = fusion_fit.fit(sets, version="toy", l2=0.1, floor=1.0)
    assert fusion_fit.score(unfloored, dense_wins) < 0.5
    assert fusion_fit.score(floored, dense_wins) >= 0.6 - 0.02
    assert fusion_fit.score(floored, lexical_wins) >= 0.99


def test_the_shipped_model_is_fitted_on_train_dev_splits_and_earns_its_place():
    """The artifact's own report (written by tune_fusion --fit): on every split it was fitted
    on, at least as good as the best fixed share for all queries — the fit's floor holds it
    there — and a real function of the query, not a constant."""
    data = json.loads(adaptive.MODEL_PATH.read_text())
    model = adaptive.FusionModel.from_json(data)
    assert model.trained_on and not any(name.endswith(":test") for name in model.trained_on)
    for name, row in data["report"].items():
        assert row["adaptive"] >= max(row["fixed"].values()), name
    question = adaptive.choose("how are agent tokens hashed and why that way?", LEGS, {})[0]
    error = adaptive.choose(ERROR, LEGS, {})[0]
    code = adaptive.choose("how are agent tokens hashed and why that way?", LEGS,
                           {pk: "code" for pk in range(10)})[0]
    assert len({round(share, 3) for share in (question, error, code)}) > 1


def test_convex_share_is_clamped():
    assert dict(FusionConfig.convex_share(1.7).weights) == {"lexical": 1.0, "dense": 0.0}
    assert FusionConfig.convex_share(0.25).method == "convex"


def test_the_fit_refuses_a_test_split():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="never fitted on a test split"):
        call_command("tune_fusion", "--fit", "tests/golden:test")
    with pytest.raises(ValueError, match="never fitted on a test split"):
        fusion_fit.collect("tests/golden", "test")
