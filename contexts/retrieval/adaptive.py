"""Query-adaptive fusion: how much each leg counts is decided per query, by a small model.

A fixed weight cannot suit both "what does this function do" (the dense leg knows) and
"ImproperlyConfigured: The SECRET_KEY setting must not be empty" (only the lexical leg finds the
exact words). So after both legs ran, cheap features of the query and of the two ranked lists
(:func:`features`) go through a softmax policy over a grid of lexical shares; the expected share
``α`` weighs the legs in convex fusion (lexical ``α``, dense ``1 − α``).

The policy is learned by ``manage.py tune_fusion DATASET … --fit`` on train/dev splits only and
stored as a reviewable JSON artifact next to this module (:data:`MODEL_PATH`); every trace records
the features, the share and the model's version, and the console's trace page shows them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from contexts.retrieval.fuse import CLASS_KEEPS
from contexts.search import looks_like_error

MODEL_PATH = Path(__file__).with_name("fusion_model.json")

# The features, in the model's column order. Each is on a scale that does not depend on the
# corpus's size or the BM25 score's magnitude, so the model can carry to corpora it never saw.
FEATURES = (
    "identifier_share",   # share of query tokens that look like code identifiers or paths
    "error_like",         # 1 when the query looks like a pasted error or stack line
    "log_terms",          # log(1 + number of word tokens)
    "quoted",             # 1 when the query quotes a string
    "path_share",         # share of query tokens that name a file path or a dotted module
    "lexical_gap",        # (s1 − s2) / s1 of the lexical leg: one document far ahead
    "lexical_spread",     # (s1 − s10) / s1 of the lexical leg
    "lexical_depth",      # hits the lexical leg found / 100
    "dense_top",          # the best cosine similarity
    "dense_gap",          # s1 − s2 of the dense leg
    "agreement",          # |top-10 lexical ∩ top-10 dense| / 10
    "code_share",         # share of code fragments among both legs' top-20
)

# The features computed from the query's text alone; the rest, which need the legs' lists, come
# last (a fit's cache keeps those and computes the text features again: fusion_fit).
TEXT_FEATURES = FEATURES[:5]

_WORD = re.compile(r"[\w./:-]+")
_SNAKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|^_\w")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2,}[a-z]")
_DOTTED = re.compile(r"\w\.\w*[A-Za-z_]\w*|::")
_PATH = re.compile(r"\w/\w|\.(py|js|ts|go|rs|java|md|txt|toml|yaml|json)\b")
# A dotted module name: lowercase parts of two characters or more (`contexts.services.rls`), not
# a qualified identifier (`QuerySet.bulk_create`) or an abbreviation (`e.g`).
_MODULE = re.compile(r"^[a-z_][a-z0-9_]+(?:\.[a-z_][a-z0-9_]+)+$")
_QUOTED = re.compile(r"'[^'\n]{2,}'|\"[^\"\n]{2,}\"|`[^`\n]+`")


def _kind(token: str) -> tuple[bool, bool]:
    """(looks like a code identifier, names a file path or module) — a path is an identifier."""
    token = token.strip(".:,;-")
    path = bool(_PATH.search(token) or _MODULE.match(token))
    return path or bool(_SNAKE.search(token) or _CAMEL.search(token) or _DOTTED.search(token)), path


def text_features(query: str) -> dict[str, float]:
    tokens = _WORD.findall(query)
    kinds = [_kind(t) for t in tokens]  # one pass: a pasted page has thousands of tokens
    identifiers = sum(1 for identifier, _ in kinds if identifier)
    paths = sum(1 for _, path in kinds if path)
    return {
        "identifier_share": identifiers / len(tokens) if tokens else 0.0,
        "error_like": 1.0 if looks_like_error(query) else 0.0,
        "log_terms": math.log1p(len(tokens)),
        "quoted": 1.0 if _QUOTED.search(query) else 0.0,
        "path_share": paths / len(tokens) if tokens else 0.0,
    }


# A question asked in words about where something is done, or how it behaves, is answered by
# the code that does it more often than by the prose about it, so prose keeps only part of its
# score (nothing changes in a corpus without code). Fitted on the golden set's dev split (the one
# train/dev set with code and prose) with the lexical share left to the model; MRR@10 there:
# "which file" 0.67 → 0.80 from the location discount; questions labelled with code 0.37 →
# 0.46, with prose 0.61 → 0.60 from the question discount (docs/retrieval-quality.md).
LOCATION_PROSE_DISCOUNT = 0.4
QUESTION_PROSE_DISCOUNT = 0.15
# "Which (console) module …", "in what file …", "where …"; not "how does X pick which files".
_LOCATION = re.compile(r"^\s*(in )?(which|what)( [\w-]+)? (file|module|class|function|method|"
                       r"package|script)s?\b|^\s*where\b(?! (do|can|should) (i|we|you)\b)", re.I)
_QUESTION = re.compile(r"^\s*(how|what|when|why|which|who|whose|where|does|do|is|are|can|will|"
                       r"should)\b|\?\s*$", re.I)
# A task ("how do I …") asks for instructions, which the docs give.
_TASK = re.compile(r"^\s*(how (do|can|should|would) (i|we|you)\b|how to\b|can i\b|"
                   r"where do i\b)", re.I)


# A question in words seldom finds all its words in the one definition that answers it: the
# rest of the definition's file (its module docstring, the helpers beside it) carries them.
# For such a question code gains FILE_EVIDENCE of the best fused score among the other
# candidates from its file (fuse.convex), so a file whose several parts match lifts them —
# above prose that matches in one section, and above a lone look-alike elsewhere: every part
# when the question asks how something behaves, only the file's best when it asks where (see
# file_evidence). Prose gains nothing (measured: letting it gain too helped code questions less).
# Chosen on the golden set's dev split, hybrid MRR@10: questions about code behaviour 0.292 →
# 0.356, "which file" 0.820 → 0.850, newcomers' questions (answered by the docs as often as by
# code) 0.732 → 0.704; all questions in words 0.500 → 0.521. At 0.3: `nl` 0.506, `file` 0.873;
# at 0.6: 0.531, 0.827; with only the best part for "where": 0.518, 0.860
# (docs/retrieval-quality.md).
FILE_EVIDENCE = 0.45


# Test code repeats the names, messages and paths of the code it tests, so a question that does
# not ask about tests finds the tests beside (or before) the definition; it then counts at
# 1 − TEST_DISCOUNT. Fitted on the golden set's dev questions over this repository with its
# test code ingested too (docs/retrieval-quality.md), hybrid MRR@10: pasted errors 0.821 →
# 0.845, identifiers 0.963 → 0.988, paths 0.940 → 0.956 (offline, the plateau starts at 0.3).
# Questions that name tests keep them whole (0.551 → 0.572: fewer other tests in the way).
TEST_DISCOUNT = 0.3
_ASKS_ABOUT_TESTS = re.compile(r"\btest(s|ed|ing)?\b|\bfixtures?\b|\bspecs?\b", re.I)


# A query made mostly of identifiers or paths, or a pasted error, is answered by its exact
# words: the policy, fitted jointly on SciFact's and CoSQA's questions in words, gives such a
# query a lexical share of ~0.6, and the dense leg then lifts look-alike code over the exact
# match. Its share is at least EXACT_WORDS_SHARE. Chosen on the golden set's dev split (offline
# re-fusion of both legs' lists, MRR@10): identifiers 0.972 → 1.000, pasted errors 0.895 →
# 0.915, paths 0.957 → 0.954 (0.7 and 0.9: errors 0.903). No SciFact or CoSQA query qualifies.
# Checked on eight other projects' source trees (`manage.py derive_code_set`, 320 identifiers,
# 140 pasted errors), pooled MRR@10 for identifiers 0.9161 / 0.9153 / 0.9120 / 0.9137 at 0.7 /
# 0.8 / 0.9 / 0.95, errors 0.9964 at 0.8 to 0.95: a higher floor for identifiers, which golden
# dev favoured by one path, does not help there (the dense leg tells a definition from the
# line that re-exports its name).
EXACT_WORDS_SHARE = 0.8


# Two kinds of query that no fit set holds, so the policy extrapolates for them; each gets a
# bound chosen on the dev split of a set of its own (docs/retrieval-quality.md, nDCG@10):
# * A paragraph (more than LONG_QUERY_WORDS word tokens; the fit's longest query has 41) is
#   found by its many words, while the dense model reads only its head, averaged into one
#   vector: the policy, far outside its features' range, gives it 0.3. Its share is at least
#   LONG_QUERY_SHARE. Paragraph set dev 0.6702 → 0.6771 (0.5: 0.6727, 0.7: 0.6659). A
#   question that long counts as a paragraph (no set measures one).
# * A question in words over prose (in_words: no pasted error, no snake_case, dotted name,
#   path or number; under PROSE_POOL of both legs' top-20 code) is what the dense model was
#   trained for — questions and the passages that answer them — but the fit's questions ask
#   about code, where the lexical leg matters: the policy gives it ~0.55. Its share is at most
#   PROSE_QUESTION_SHARE. Docs-QA dev 0.6920 → 0.7530 (0.1: 0.7357, 0.3: 0.7393).
# Neither applies to a query of SciFact (claims of at most 41 words), CoSQA (its pools are
# code) or the golden set's dev split, so the policy's fit sets are served as before.
LONG_QUERY_WORDS = 64
LONG_QUERY_SHARE = 0.6
PROSE_QUESTION_SHARE = 0.2
PROSE_POOL = 0.25


_DIGIT = re.compile(r"\d")


def _exact_token(token: str) -> bool:
    """A token only its exact spelling finds: snake_case, a dotted name, a path or a module, a
    number. A capitalised name is a word here (GitHub, PostgreSQL, APIs), though
    :func:`text_features` counts it as an identifier: a product's name in a question asked
    among prose is no reason to lean on the lexical leg."""
    token = token.strip(".:,;-?!")
    return bool(_SNAKE.search(token) or _DOTTED.search(token) or _PATH.search(token)
                or _MODULE.match(token) or _DIGIT.search(token))


def in_words(query: str, values: Mapping[str, float]) -> bool:
    """Whether ``query`` is asked in words: a question (or a "how do I" task) with no pasted
    error (``values``: its :func:`text_features`) and no token of :func:`_exact_token`. Broader
    than :func:`_asked_in_words`, which a capitalised name also excludes: beside code such a
    name is likely a class's, among prose a product's."""
    return (not values["error_like"] and bool(_QUESTION.search(query))
            and not any(_exact_token(token) for token in _WORD.findall(query)))


def share_bounds(values: Mapping[str, float], asked: bool = False
                 ) -> tuple[float, float, str]:
    """(least share, greatest share, the rule that set them, "" for none) for a query with
    :func:`features` ``values``; ``asked``: it is :func:`in_words`."""
    # A query of exact words: a pasted error, or mostly identifiers or paths.
    if values["error_like"] or values["identifier_share"] >= 0.5:
        return EXACT_WORDS_SHARE, 1.0, "exact_words"
    if values["log_terms"] > math.log1p(LONG_QUERY_WORDS):
        return LONG_QUERY_SHARE, 1.0, "paragraph"
    if asked and values["code_share"] < PROSE_POOL:
        return 0.0, PROSE_QUESTION_SHARE, "question_over_prose"
    return 0.0, 1.0, ""


def lexical_share(model: FusionModel, values: Mapping[str, float], asked: bool = False
                  ) -> float:
    """The lexical leg's share for a query with ``values``: the model's, within the query's
    :func:`share_bounds` (``asked``: the query is :func:`in_words`)."""
    return _within(model.lexical_share(values), share_bounds(values, asked))


def _within(share: float, bounds: tuple[float, float, str]) -> float:
    # Clamped this way round, a share that is not a number (a broken vector's NaN score in
    # the features) becomes a bound, not NaN.
    low, high, _ = bounds
    return max(low, min(high, share))


def discount_for_tests(query: str) -> float:
    """The share of its fused score a test fragment loses for ``query``: none when the query
    asks about tests."""
    return 0.0 if _ASKS_ABOUT_TESTS.search(query) else TEST_DISCOUNT


def _asked_in_words(query: str, values: Mapping[str, float]) -> str | None:
    """"location" for a question in words about where something is done, "behaviour" for one
    about how something behaves, None for anything else (a task, an identifier, a path, a
    pasted error; ``values``: the query's :func:`text_features`)."""
    if values["identifier_share"] > 0 or values["error_like"]:
        return None
    if _LOCATION.search(query):
        return "location"
    if _QUESTION.search(query) and not _TASK.search(query):
        return "behaviour"
    return None


# By how a question in words is asked (_asked_in_words): the prose discount, and the file
# evidence with the parts of a file that gain it — "every" one when the question asks how
# something behaves (the answer is a definition in the file), only the "best" when it asks
# where (the answer is the file: its other parts would crowd other files, and the docs, out).
_PROSE_DISCOUNTS = {"location": LOCATION_PROSE_DISCOUNT, "behaviour": QUESTION_PROSE_DISCOUNT}
_FILE_EVIDENCE = {"location": (FILE_EVIDENCE, "best"), "behaviour": (FILE_EVIDENCE, "every")}
_NO_FILE_EVIDENCE = (0.0, "every")


def prose_discount(query: str, values: Mapping[str, float]) -> float:
    """The share of its fused score a prose fragment loses for ``query`` (its
    :func:`text_features` in ``values``): only for a question in words — no identifier, path
    or pasted error."""
    return _PROSE_DISCOUNTS.get(_asked_in_words(query, values), 0.0)


def file_evidence(query: str, values: Mapping[str, float]) -> tuple[float, str]:
    """The share of its file's other evidence a piece of code gains for ``query``
    (:data:`FILE_EVIDENCE` for a question in words, else 0), and which parts of a file gain."""
    return _FILE_EVIDENCE.get(_asked_in_words(query, values), _NO_FILE_EVIDENCE)


def _relative_gap(scores: Sequence[float], i: int) -> float:
    if len(scores) <= i or scores[0] <= 0:
        return 1.0 if scores else 0.0
    return max(0.0, (scores[0] - scores[i]) / scores[0])


def features(query: str, legs: Mapping[str, Sequence[tuple[int, float]]],
             namespaces: Mapping[int, str]) -> dict[str, float]:
    """The model's inputs for one query: its text and the two legs' ranked ``(pk, score)``."""
    lexical = [score for _, score in legs.get("lexical", ())]
    dense = [score for _, score in legs.get("dense", ())]
    top_lexical = {pk for pk, _ in legs.get("lexical", ())[:10]}
    top_dense = {pk for pk, _ in legs.get("dense", ())[:10]}
    pool = {pk for leg in legs.values() for pk, _ in leg[:20]}
    code = sum(1 for pk in pool if namespaces.get(pk) == "code")
    return {
        **text_features(query),
        "lexical_gap": _relative_gap(lexical, 1),
        "lexical_spread": _relative_gap(lexical, 9),
        "lexical_depth": min(len(lexical), 100) / 100,
        "dense_top": dense[0] if dense else 0.0,
        "dense_gap": dense[0] - dense[1] if len(dense) > 1 else 0.0,
        "agreement": len(top_lexical & top_dense) / 10,
        "code_share": code / len(pool) if pool else 0.0,
    }


@dataclass(frozen=True)
class FusionModel:
    """A softmax policy over lexical shares ``grid``: p = softmax(W · standardised x + b)."""

    version: str
    grid: tuple[float, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray      # len(grid) × len(FEATURES)
    bias: np.ndarray         # len(grid)
    trained_on: tuple[str, ...] = ()

    def probabilities(self, values: Mapping[str, float]) -> np.ndarray:
        x = (np.array([values[name] for name in FEATURES]) - self.mean) / self.scale
        logits = self.weights @ x + self.bias
        logits -= logits.max()
        p = np.exp(logits)
        return p / p.sum()

    def lexical_share(self, values: Mapping[str, float]) -> float:
        """The expected share: smoother than the likeliest grid point, so a small change in the
        features never flips the ranking wholesale."""
        return float(np.dot(self.probabilities(values), self.grid))

    def as_json(self, **extra: object) -> dict:
        return {"version": self.version, "features": list(FEATURES), "grid": list(self.grid),
                "mean": self.mean.round(6).tolist(), "scale": self.scale.round(6).tolist(),
                "weights": self.weights.round(6).tolist(), "bias": self.bias.round(6).tolist(),
                "trained_on": list(self.trained_on), **extra}

    @classmethod
    def from_json(cls, data: Mapping) -> FusionModel:
        if list(data["features"]) != list(FEATURES):
            raise ValueError(f"fusion model {data.get('version')} was fitted on other "
                             "features; re-fit it with manage.py tune_fusion --fit")
        return cls(version=str(data["version"]), grid=tuple(float(a) for a in data["grid"]),
                   mean=np.array(data["mean"], dtype=float),
                   scale=np.array(data["scale"], dtype=float),
                   weights=np.array(data["weights"], dtype=float),
                   bias=np.array(data["bias"], dtype=float),
                   trained_on=tuple(data.get("trained_on", ())))


@lru_cache(maxsize=4)
def load(path: str = str(MODEL_PATH)) -> FusionModel:
    return FusionModel.from_json(json.loads(Path(path).read_text()))


def choose(query: str, legs: Mapping[str, Sequence[tuple[int, float]]],
           namespaces: Mapping[int, str], model: FusionModel | None = None
           ) -> tuple[float, dict]:
    """(lexical share α, what the trace records of the choice, with the :func:`prose_discount`,
    the :func:`discount_for_tests` and the :func:`file_evidence`). With one leg missing (its
    index down, or a one-leg request) the other gets it all."""
    model = model or load()
    values = features(query, legs, namespaces)
    both = bool(legs.get("lexical") and legs.get("dense"))
    if both:  # the bounds once, for the share and for the trace
        bounds = share_bounds(values, in_words(query, values))
        share = _within(model.lexical_share(values), bounds)
    else:
        share, bounds = (1.0 if legs.get("lexical") else 0.0), (0.0, 1.0, "")
    asked = _asked_in_words(query, values)  # once: it decides both of the next
    evidence, parts = _FILE_EVIDENCE.get(asked, _NO_FILE_EVIDENCE)
    return share, {"model": model.version, "lexical_share": round(share, 4),
                   # the bounds the share was held within (both legs answering), and the rule
                   # that set them ("" for none): share_bounds
                   "lexical_floor": bounds[0], "lexical_ceiling": bounds[1],
                   "share_rule": bounds[2],
                   "prose_discount": _PROSE_DISCOUNTS.get(asked, 0.0),
                   "test_discount": discount_for_tests(query),
                   "file_evidence": evidence, "file_evidence_parts": parts,
                   # what a class keeps beside its members (fuse._classes_yield_to_members):
                   # with the file evidence for every part; 1.0 (nothing yields) otherwise
                   "class_keeps": CLASS_KEEPS if evidence and parts == "every" else 1.0,
                   "features": {name: round(value, 4) for name, value in values.items()}}
