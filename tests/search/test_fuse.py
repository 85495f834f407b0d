"""Fusion arithmetic, checked against hand-computed values."""

from __future__ import annotations

import pytest

from contexts.retrieval.fuse import CLASS_KEEPS, convex, fuse, rrf
from contexts.retrieval.types import FusionConfig

LEGS = {"lexical": [(1, 12.0), (2, 8.0), (3, 4.0)], "dense": [(2, 0.9), (4, 0.5)]}
CONFIG = FusionConfig(k=10.0, weights=(("dense", 1.0), ("lexical", 0.5)),
                      namespace_weights=(("code", (("dense", 1.0), ("lexical", 0.0))),),
                      method="rrf")


def test_rrf_sums_weighted_reciprocal_ranks_and_scales_relevance_per_namespace() -> None:
    got = rrf(LEGS, CONFIG, {1: "prose", 2: "prose", 3: "code", 4: "code"})
    assert got[2].ranks == {"lexical": 2, "dense": 1} and got[2].scores["lexical"] == 8.0
    assert got[2].rrf == pytest.approx(0.5 / 12 + 1.0 / 11)
    assert got[3].rrf == 0.0  # lexical carries no weight for code
    assert got[4].rrf == pytest.approx(1.0 / 12)
    # Relevance 1 means first in every leg at full weight: prose best = 1.5/11, code 1/11.
    assert got[2].relevance == pytest.approx((0.5 / 12 + 1.0 / 11) / (1.5 / 11))
    assert got[4].relevance == pytest.approx((1.0 / 12) / (1.0 / 11))
    # Without namespaces the default weights apply.
    assert rrf(LEGS, CONFIG)[3].rrf == pytest.approx(0.5 / 13)


def test_convex_blends_min_max_normalised_scores() -> None:
    got = convex(LEGS, CONFIG, {1: "prose", 2: "prose", 3: "prose", 4: "code"})
    # lexical 12/8/4 → 1, 0.5, 0; dense 0.9/0.5 → 1, 0; prose weights 1 (dense), 0.5 (lexical).
    assert got[1].relevance == pytest.approx(0.5 * 1.0 / 1.5)
    assert got[2].relevance == pytest.approx((0.5 * 0.5 + 1.0 * 1.0) / 1.5)
    assert got[3].relevance == 0.0
    assert got[4].relevance == 0.0  # dense minimum; lexical has no weight for code
    assert got[2].rrf == pytest.approx(0.5 / 12 + 1.0 / 11)  # RRF kept for the trace


def test_prose_and_test_discounts_take_their_share_of_those_fragments_scores() -> None:
    namespaces = {1: "prose", 2: "code", 3: "code", 4: "code"}
    plain = convex(LEGS, FusionConfig.convex_share(0.5), namespaces, tests={3})
    got = convex(LEGS, FusionConfig.convex_share(0.5, 0.4, 0.3), namespaces, tests={3})
    # lexical 12/8/4 → 1, 0.5, 0; dense 0.9/0.5 → 1, 0; shares 0.5 each.
    assert plain[1].relevance == pytest.approx(0.5) and plain[2].relevance == pytest.approx(0.75)
    assert got[1].relevance == pytest.approx(0.5 * 0.6)  # prose
    assert got[2].relevance == pytest.approx(0.75)  # code: untouched
    assert got[3].relevance == 0.0 and got[4].relevance == 0.0
    tested = convex({"lexical": [(3, 2.0), (2, 1.0)], "dense": [(3, 0.9), (2, 0.1)]},
                    FusionConfig.convex_share(0.5, 0.4, 0.3), namespaces, tests={3})
    assert tested[3].relevance == pytest.approx(0.7) and tested[2].relevance == 0.0
    # Where every candidate is of one kind — code, prose, or tests — nothing changes at all.
    for kinds, tests in ((dict.fromkeys(range(1, 5), "code"), ()),
                         (dict.fromkeys(range(1, 5), "prose"), ()),
                         (dict.fromkeys(range(1, 5), "code"), {1, 2, 3, 4})):
        discounted = convex(LEGS, FusionConfig.convex_share(0.5, 0.4, 0.3), kinds, tests)
        undiscounted = convex(LEGS, FusionConfig.convex_share(0.5), kinds, tests)
        assert {pk: c.relevance for pk, c in discounted.items()} == \
            {pk: c.relevance for pk, c in undiscounted.items()}
    # Prose beside tests only: the tests are the best-kept, the prose keeps 0.6 / 0.7 of theirs.
    mixed = convex(LEGS, FusionConfig.convex_share(0.5, 0.4, 0.3), namespaces, tests={2, 3, 4})
    assert mixed[1].relevance == pytest.approx(0.5 * 0.6 / 0.7)
    assert mixed[2].relevance == pytest.approx(0.75)
    assert FusionConfig.convex_share(0.5, 1.7, -1).prose_discount == 1.0  # clamped
    assert FusionConfig.convex_share(0.5, 1.7, -1).test_discount == 0.0


def test_code_gains_a_share_of_the_best_score_among_the_other_candidates_of_its_file() -> None:
    # Fragment 1: prose; 2 and 3 are two definitions of one file, 4 alone in another, 5 was
    # written in the console (no file).
    namespaces = {1: "prose", 2: "code", 3: "code", 4: "code", 5: "code"}
    files = {1: "docs/a.md", 2: "pkg/sync.py", 3: "pkg/sync.py", 4: "pkg/other.py"}
    legs = {"lexical": [(1, 10.0), (4, 8.0), (2, 6.0), (3, 5.0), (5, 0.0)],
            "dense": [(1, 0.9), (4, 0.8), (2, 0.7), (3, 0.6), (5, 0.0)]}
    plain = convex(legs, FusionConfig.convex_share(0.5), namespaces, files=files)
    got = convex(legs, FusionConfig.convex_share(0.5, file_evidence=0.45), namespaces,
                 files=files)
    p = {pk: c.relevance for pk, c in plain.items()}
    # Before: prose 1, then the lone definition, then the two of one file.
    assert sorted(p, key=lambda pk: -p[pk]) == [1, 4, 2, 3, 5]
    # Each of the file's two gains 0.45 of the other's; the prose, the lone definition and
    # the fragment without a file gain nothing; the best (the prose) keeps its score.
    raw = {1: p[1], 2: p[2] + 0.45 * p[3], 3: p[3] + 0.45 * p[2], 4: p[4], 5: p[5]}
    scale = p[1] / max(raw.values())
    assert {pk: c.relevance for pk, c in got.items()} == pytest.approx(
        {pk: value * scale for pk, value in raw.items()})
    assert max(c.relevance for c in got.values()) == pytest.approx(p[1])
    # The file whose two parts match comes before the lone look-alike.
    assert sorted(got, key=lambda pk: -got[pk].relevance) == [1, 2, 3, 4, 5]
    # Without files, or without the share, nothing changes.
    for config, known in ((FusionConfig.convex_share(0.5, file_evidence=0.45), None),
                          (FusionConfig.convex_share(0.5), files)):
        same = convex(legs, config, namespaces, files=known)
        assert {pk: c.relevance for pk, c in same.items()} == p
    assert FusionConfig.convex_share(0.5, file_evidence=1.5).file_evidence == 1.0  # clamped
    with pytest.raises(ValueError, match="file_evidence_parts"):
        FusionConfig.convex_share(0.5, file_evidence=0.45, file_evidence_parts="some")
    # Only the best part of each file: the file's best (2) gains, its other part (3) does not.
    best = convex(legs, FusionConfig.convex_share(0.5, file_evidence=0.45,
                                                  file_evidence_parts="best"),
                  namespaces, files=files)
    raw = {**p, 2: p[2] + 0.45 * p[3]}
    scale = p[1] / max(raw.values())
    assert {pk: c.relevance for pk, c in best.items()} == pytest.approx(
        {pk: value * scale for pk, value in raw.items()})
    assert sorted(best, key=lambda pk: -best[pk].relevance) == [1, 2, 4, 3, 5]


def test_file_evidence_keeps_the_best_score_and_leaves_prose_and_ties_alone() -> None:
    # Two parts of one file at the top (tied), a third part, and a prose section that shares
    # a file with another section.
    namespaces = {1: "code", 2: "code", 3: "code", 4: "prose", 5: "prose"}
    files = {1: "a.py", 2: "a.py", 3: "a.py", 4: "b.md", 5: "b.md"}
    legs = {"lexical": [(1, 9.0), (2, 9.0), (4, 8.0), (5, 7.0), (3, 5.0), (6, 0.0)],
            "dense": [(1, 0.9), (2, 0.9), (4, 0.8), (5, 0.7), (3, 0.5), (6, 0.0)]}
    namespaces[6] = "code"
    plain = convex(legs, FusionConfig.convex_share(0.5), namespaces, files=files)
    p = {pk: c.relevance for pk, c in plain.items()}
    assert p[1] == p[2] == 1.0
    for parts, gainers in (("every", {1, 2, 3}), ("best", {1})):
        got = convex(legs, FusionConfig.convex_share(0.5, file_evidence=0.45,
                                                     file_evidence_parts=parts),
                     namespaces, files=files)
        # The file's parts lifted past 1 are scaled back: the best keeps its score, all ≤ 1.
        assert max(c.relevance for c in got.values()) == pytest.approx(1.0)
        assert all(0.0 <= c.relevance <= 1.0 for c in got.values())
        raw = {pk: p[pk] + (0.45 * (p[2] if pk == 1 else p[1]) if pk in gainers else 0.0)
               for pk in p}
        scale = 1.0 / max(raw.values())
        # Prose sharing a file gains nothing; of two tied best parts only the lower pk is the
        # file's best, so "best" lifts that one alone.
        assert {pk: c.relevance for pk, c in got.items()} == pytest.approx(
            {pk: value * scale for pk, value in raw.items()}), parts


def test_a_class_yields_to_its_members_when_the_question_asks_how_something_behaves() -> None:
    # One file: a class (1, and its second part 2), one of its methods (3), a nested class's
    # head (4) and its method (5), the module's first fragment (6); another file's class of the
    # same name (7); a prose section (8) anchored like a class.
    namespaces = {**dict.fromkeys(range(1, 8), "code"), 8: "prose"}
    files = {1: "a.py", 2: "a.py", 3: "a.py", 4: "a.py", 5: "a.py", 6: "a.py", 7: "b.py",
             8: "c.md"}
    anchors = {1: "Sync", 2: "Sync#2", 3: "Sync.plan", 4: "Sync.Step", 5: "Sync.Step.run",
               6: "module", 7: "Sync", 8: "Sync"}
    legs = {"lexical": [(pk, 10.0 - pk) for pk in range(1, 9)],
            "dense": [(pk, 0.9 - pk / 20) for pk in range(1, 9)]}
    plain = convex(legs, FusionConfig.convex_share(0.5), namespaces)
    p = {pk: c.relevance for pk, c in plain.items()}

    def fused(parts: str, known: dict | None = anchors) -> dict[int, float]:
        config = FusionConfig.convex_share(0.5, file_evidence=0.45, file_evidence_parts=parts)
        return {pk: c.relevance for pk, c in
                convex(legs, config, namespaces, files=files, anchors=known).items()}

    def with_evidence(start: dict[int, float]) -> dict[int, float]:  # as _add_file_evidence
        raw = dict(start)
        for pk in (1, 2, 3, 4, 5, 6):
            others = [start[other] for other in (1, 2, 3, 4, 5, 6) if other != pk]
            raw[pk] += 0.45 * max(others)
        scale = max(start.values()) / max(raw.values())
        return {pk: value * scale for pk, value in raw.items()}

    # Every part gains (how something behaves): the class's parts (1, 2) and the nested class
    # (4), whose members are candidates, keep half; the methods, the module's fragment, the
    # other file's class and the prose keep all.
    kept = {pk: p[pk] * (CLASS_KEEPS if pk in (1, 2, 4) else 1.0) for pk in p}
    assert fused("every") == pytest.approx(with_evidence(kept))
    # Only the file's best gains ("which file"), or no anchors are known: no class yields.
    assert fused("every", known=None) == pytest.approx(with_evidence(p))
    assert fused("best") == fused("best", known=None)
    # A class none of whose members is a candidate (its own second part is none) keeps its
    # score.
    lone = {pk: a for pk, a in anchors.items() if pk not in (3, 4, 5)}
    assert fused("every", known=lone) == fused("every", known=None)


def test_a_modules_own_fragments_never_yield() -> None:
    # CommonJS names what a module exports `module.exports.parse`: the module's first fragment
    # (`module`) and its other parts are no class of it.
    namespaces = {1: "code", 2: "code", 3: "code", 4: "code"}
    files = {1: "lib/index.js", 2: "lib/index.js", 3: "lib/index.js", 4: "lib/other.js"}
    anchors = {1: "module", 2: "module#2", 3: "module.exports.parse", 4: "other"}
    legs = {"lexical": [(1, 10.0), (2, 8.0), (3, 5.0), (4, 1.0)],
            "dense": [(1, 0.9), (2, 0.8), (3, 0.6), (4, 0.1)]}
    config = FusionConfig.convex_share(0.5, file_evidence=0.45, file_evidence_parts="every")
    with_anchors = convex(legs, config, namespaces, files=files, anchors=anchors)
    without = convex(legs, config, namespaces, files=files)
    assert {pk: c.relevance for pk, c in with_anchors.items()} == \
        {pk: c.relevance for pk, c in without.items()}


def test_fuse_dispatches_on_the_configured_method() -> None:
    assert fuse(LEGS, CONFIG)[2].relevance == rrf(LEGS, CONFIG)[2].relevance
    convex_config = FusionConfig(k=10.0, weights=CONFIG.weights, method="convex")
    assert fuse(LEGS, convex_config)[1].relevance == convex(LEGS, convex_config)[1].relevance
    with pytest.raises(ValueError, match="unknown fusion method"):
        fuse(LEGS, FusionConfig(method="max"))


def test_the_defaults_are_the_settings(settings) -> None:
    # One source of truth: a field left out is settings.RETRIEVAL's (or DEFAULT_WEIGHTS').
    from contexts.retrieval.types import Weights

    assert FusionConfig() == FusionConfig.from_settings()
    assert FusionConfig().as_dict() == {**{key: settings.RETRIEVAL[key] for key in (
        "fusion", "rrf_k", "leg_weights", "namespace_leg_weights")}, "prose_discount": 0.0,
        "test_discount": 0.0, "file_evidence": 0.0, "file_evidence_parts": "every"}
    assert vars(Weights()) == settings.DEFAULT_WEIGHTS
    settings.RETRIEVAL = {**settings.RETRIEVAL, "fusion": "rrf", "rrf_k": 42.0}
    settings.DEFAULT_WEIGHTS = {**settings.DEFAULT_WEIGHTS, "w_r": 0.5}
    assert (FusionConfig().method, FusionConfig().k) == ("rrf", 42.0)
    assert Weights().w_r == 0.5 and FusionConfig(k=7.0).method == "rrf"
