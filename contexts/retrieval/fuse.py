"""Stage 6a — Reciprocal Rank Fusion of the legs' ranked lists."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

from contexts.retrieval.types import Candidate, FusionConfig


def _leg_weights(legs: Mapping[str, Sequence], config: FusionConfig,
                 namespaces: Mapping[int, str]) -> dict[str | None, dict[str, float]]:
    """namespace → leg → weight, for the namespaces present (looked up once, not per hit)."""
    return {ns: {leg: config.weight(leg, ns) for leg in legs}
            for ns in {None, *namespaces.values()}}


def rrf(legs: Mapping[str, Sequence[tuple[int, float]]], config: FusionConfig,
        namespaces: Mapping[int, str] | None = None) -> dict[int, Candidate]:
    """Candidates keyed by fragment pk with per-leg ranks, raw scores and the fused score.

    ``namespaces`` (fragment pk → prose/code) selects per-namespace leg weights.
    """
    namespaces = namespaces or {}
    table = _leg_weights(legs, config, namespaces)
    candidates: dict[int, Candidate] = {}
    k = config.k
    for leg, ranked in legs.items():
        leg_weight = {ns: weights[leg] for ns, weights in table.items()}  # namespace → weight
        for rank, (fragment_id, score) in enumerate(ranked, start=1):
            candidate = candidates.get(fragment_id)
            if candidate is None:
                candidate = candidates[fragment_id] = Candidate(fragment_id)
            candidate.ranks[leg] = rank
            candidate.scores[leg] = round(float(score), 6)
            candidate.rrf += leg_weight[namespaces.get(fragment_id)] / (k + rank)
    # Relevance on 0–1: a fragment ranked first by every leg (at full weight) scores 1.
    best = {ns: sum(weights.values()) / (k + 1) or 1.0 for ns, weights in table.items()}
    for candidate in candidates.values():
        candidate.relevance = candidate.rrf / best[namespaces.get(candidate.fragment_id)]
    return candidates


def _min_max(ranked: Sequence[tuple[int, float]]) -> dict[int, float]:
    if not ranked:
        return {}
    scores = [score for _, score in ranked]
    low, high = min(scores), max(scores)
    span = (high - low) or 1.0
    return {pk: (score - low) / span for pk, score in ranked}


def convex(legs: Mapping[str, Sequence[tuple[int, float]]], config: FusionConfig,
           namespaces: Mapping[int, str] | None = None,
           tests: Collection[int] = (), files: Mapping[int, Hashable] | None = None,
           anchors: Mapping[int, str] | None = None) -> dict[int, Candidate]:
    """Convex combination of min-max normalised leg scores (Bruch et al., 2022): uses the
    scores' spread, which RRF throws away. Same Candidate shape as :func:`rrf`; relevance is
    the weighted mean of normalised scores, 0–1, less ``config.prose_discount`` of it for a
    prose fragment and ``config.test_discount`` for a test fragment (pk in ``tests``), plus,
    for code, ``config.file_evidence`` of the best score of another candidate of its file
    (``files``: pk → its file) — rescaled so that the best keeps its score. When every part of
    a file gains (a question about how something behaves), a class one of whose members is a
    candidate first keeps :data:`CLASS_KEEPS` of its score (``anchors``: pk → its anchor in
    its file, ``Class.method``)."""
    namespaces = namespaces or {}
    candidates = rrf(legs, config, namespaces)  # ranks, raw scores, RRF kept for the trace
    table = _leg_weights(legs, config, namespaces)
    totals = {ns: sum(weights.values()) or 1.0 for ns, weights in table.items()}
    for candidate in candidates.values():
        candidate.relevance = 0.0
    # Leg by leg, in the legs' order: the same sums as one generator per candidate, without
    # one per candidate (~200 a request).
    for leg, ranked in legs.items():
        leg_weight = {ns: weights[leg] for ns, weights in table.items()}
        for fragment_id, normalised in _min_max(ranked).items():
            candidates[fragment_id].relevance += (
                leg_weight[namespaces.get(fragment_id)] * normalised)
    keep = _kept_shares(candidates, config, namespaces, tests)
    for candidate in candidates.values():
        candidate.relevance /= totals[namespaces.get(candidate.fragment_id)]
        candidate.relevance *= keep.get(candidate.fragment_id, 1.0)
    if config.file_evidence and files:
        every = config.file_evidence_parts == "every"
        if every and anchors:
            _classes_yield_to_members(candidates, namespaces, files, anchors)
        _add_file_evidence(candidates, config.file_evidence, namespaces, files,
                           best_only=not every)
    return candidates


# A question about how something behaves is answered by the definition that does it. A class's
# own fragment (its signature, docstring, fields, short methods) describes the whole class in
# words and outranked the method that does the work; so where one of its members is a
# candidate too, the class keeps CLASS_KEEPS of its score before the file evidence. Measured
# with the real pipeline, hybrid MRR@10, a class keeping 1 / 0.7 / 0.5 / 0.3 of its score:
# golden dev (where the fusion's choices are made) "which file" 0.860 / 0.863 / 0.870 / 0.870,
# behaviour questions 0.522 / 0.522 / 0.522 / 0.526; other projects' trees (never fitted on),
# behaviour questions over click 0.474 / 0.478 / 0.477 / 0.474, over requests 0.650 / 0.665 /
# 0.678 / 0.678, and over jinja2, written after the choice, 0.612 -> 0.653 at 0.5. Golden test
# lost half a question (0.464 -> 0.459: two of its labels name the class). A module's own
# fragments never yield (`module`, `module#2`, nor to CommonJS's `module.exports.x`): the first
# is often the answer to a question about the whole module, and making it yield cost golden dev
# 0.518 -> 0.465.
CLASS_KEEPS = 0.5


def _classes_yield_to_members(candidates: Mapping[int, Candidate], namespaces: Mapping[int, str],
                              files: Mapping[int, Hashable], anchors: Mapping[int, str]) -> None:
    """Each code candidate that is a class (or a part of one) whose member is also a candidate,
    from the same file, keeps :data:`CLASS_KEEPS` of its relevance."""
    # pk → the definition it holds or is part of (`Class#2` → `Class`), for the code from files
    names = {pk: anchors.get(pk, "").partition("#")[0] for pk in candidates
             if pk in files and namespaces.get(pk) == "code"}
    with_members: set[tuple[Hashable, str]] = set()  # (file, class) with a member among them
    for pk, name in names.items():
        parts = name.split(".")
        if parts[0] != "module":  # the module's own fragments, `module.exports.x`
            with_members.update((files[pk], ".".join(parts[:n])) for n in range(1, len(parts)))
    for pk, name in names.items():
        if (files[pk], name) in with_members:
            candidates[pk].relevance *= CLASS_KEEPS


def _add_file_evidence(candidates: Mapping[int, Candidate], share: float,
                       namespaces: Mapping[int, str], files: Mapping[int, Hashable], *,
                       best_only: bool = False) -> None:
    """Each code candidate (``best_only``: only the best of its file) gains ``share`` of the
    best relevance among the other candidates of its file; then every relevance is scaled so
    the best is what it was (0–1 stays)."""
    # Each file's best part (ties: the lower pk) and the best two scores: the best part gains
    # the runner-up's, the others the best's.
    best: dict[Hashable, tuple[float, int, float]] = {}  # file → (top, its pk, runner-up)
    for pk in sorted(pk for pk in candidates if pk in files):
        score = candidates[pk].relevance
        top, top_pk, second = best.get(files[pk], (-1.0, 0, 0.0))
        if score > top:
            best[files[pk]] = (score, pk, max(top, 0.0))
        else:
            best[files[pk]] = (top, top_pk, max(second, score))
    before = max((c.relevance for c in candidates.values()), default=0.0)
    for pk, candidate in candidates.items():
        if pk in files and namespaces.get(pk) == "code":
            top, top_pk, second = best[files[pk]]
            if pk == top_pk:
                candidate.relevance += share * second
            elif not best_only:
                candidate.relevance += share * top
    after = max((c.relevance for c in candidates.values()), default=0.0)
    if after > 0:
        for candidate in candidates.values():
            candidate.relevance *= before / after


def _kept_shares(candidates: Mapping[int, Candidate], config: FusionConfig,
                 namespaces: Mapping[int, str], tests: Collection[int]) -> dict[int, float]:
    """The share of its score each discounted candidate keeps, relative to the best-kept
    candidate: where every candidate is prose (or test code) nothing changes, so a corpus of
    one kind keeps its scores and their balance with freshness and authority."""
    # On the request path: most questions carry a test discount and most answers hold no test.
    if not (config.prose_discount or (config.test_discount and tests)):
        return {}
    kept = {pk: (1.0 - config.prose_discount if namespaces.get(pk) == "prose" else 1.0)
            * (1.0 - config.test_discount if pk in tests else 1.0) for pk in candidates}
    best = max(kept.values(), default=1.0) or 1.0
    return {pk: share / best for pk, share in kept.items() if share != best}


def fuse(legs: Mapping[str, Sequence[tuple[int, float]]], config: FusionConfig,
         namespaces: Mapping[int, str] | None = None,
         tests: Collection[int] = (), files: Mapping[int, Hashable] | None = None,
         anchors: Mapping[int, str] | None = None) -> dict[int, Candidate]:
    """The configured fusion: ``rrf`` or ``convex`` (``tests``: the test fragments' pks;
    ``files`` and ``anchors``: pk → its file and its anchor there, for
    ``config.file_evidence``)."""
    if config.method == "convex":
        return convex(legs, config, namespaces, tests, files, anchors)
    if config.method != "rrf":
        raise ValueError(f"unknown fusion method {config.method!r} (rrf, convex)")
    return rrf(legs, config, namespaces)
