"""A company-sized benchmark corpus (``manage.py bench_retrieve --fragments N --orgs M``): real
text, repeated with controlled, seeded perturbations, and vectors derived from the real
encoder's at a fraction of its cost.

Text. The distinct texts are SciFact abstracts (prose) and CoSQA snippets (code) from the
shared datasets, ~11,450 in all. Each fragment is a copy of one of them, changed by
:func:`perturb` with its own seed: words dropped, neighbouring words swapped, numbers changed,
sentences (prose) or lines (code) reordered. Every organization draws its texts with
replacement, so a large organization holds several differing copies of a text, as one with many
repositories does; BM25's statistics stay those of real text (no term is repeated verbatim
across thousands of documents, and no document is an exact duplicate).

Vectors. Encoding 200,000 texts with the real model on two cores takes hours. Each distinct
text is encoded once, by the real encoder (each of its passages, as ingestion does); a copy's
vector is ``normalise(v_base + σ·n)``, n standard normal, per passage, where σ makes the copy's
cosine to its base the one the real encoder gives for a real perturbed copy:
:func:`calibrate` encodes a sample of real perturbed copies, and each derived copy draws its
target cosine from those measured values (per namespace). For a unit vector and isotropic noise,
cos = 1 / sqrt(1 + σ²·d), so σ = sqrt((1/cos² − 1) / d) (:func:`noise_scale`).
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.conf import settings

DATASETS = Path(settings.BASE_DIR).parent / "shared" / "datasets"
SOURCES = (("scifact", "prose"), ("cosqa", "code"))
MAX_CHARS = 1500  # as the 10k corpus: a long abstract is cut where that one cuts it
SEED = 2025
# The organization index of the calibration's copies: none of a corpus's (numpy's seeds must be
# non-negative).
CALIBRATION = 2**31 - 1

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A sentence ends at . ! or ? followed by space and a capital or digit.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


@dataclass(frozen=True)
class Base:
    """One distinct text of the datasets."""

    title: str
    text: str
    namespace: str  # "prose" | "code"


@dataclass(frozen=True)
class Perturbation:
    """Rates of :func:`perturb`: per word (dropout, swap with the next), per number, and per
    text (one pair of neighbouring sentences or lines exchanged)."""

    dropout: float = 0.04
    swap: float = 0.03
    number: float = 0.5
    reorder: float = 0.5


DEFAULT_PERTURBATION = Perturbation()


def load_bases(datasets: Path = DATASETS) -> list[Base]:
    """Every text of the shared datasets, prose and code alternating (a prefix of the list is
    a mix of both), in the datasets' order."""
    columns: list[list[Base]] = []
    for name, namespace in SOURCES:
        path = datasets / name / "corpus.jsonl"
        if not path.exists():
            continue
        with open(path) as handle:
            docs = [json.loads(line) for line in handle if line.strip()]
        columns.append([Base(doc.get("title") or "", doc["text"][:MAX_CHARS], namespace)
                        for doc in docs if doc.get("text", "").strip()])
    bases: list[Base] = []
    for row in range(max((len(c) for c in columns), default=0)):
        bases += [column[row] for column in columns if row < len(column)]
    return bases


def copy_rng(seed: int, org_index: int, slot: int) -> random.Random:
    """The random source of one copy: a string seed is hashed (SHA-512) by ``random``, so the
    same copy is the same text in every process and on every run."""
    return random.Random(f"{seed}:{org_index}:{slot}")


def _change_number(match: re.Match[str], rng: random.Random) -> str:
    digits = match.group(0)
    out = "".join(str(rng.randint(1 if i == 0 and len(digits) > 1 else 0, 9))
                  if ch.isdigit() else ch for i, ch in enumerate(digits))
    return out


def _perturb_words(words: list[str], p: Perturbation, rng: random.Random) -> list[str]:
    kept = [w for w in words if len(words) < 4 or rng.random() >= p.dropout] or words[:1]
    i = 0
    while i < len(kept) - 1:
        if rng.random() < p.swap:
            kept[i], kept[i + 1] = kept[i + 1], kept[i]
            i += 2  # a word moves by one place at most
        else:
            i += 1
    return kept


def _exchange_neighbours(units: list[str], p: Perturbation, rng: random.Random) -> list[str]:
    if len(units) > 2 and rng.random() < p.reorder:
        # Not the first unit: a code snippet's first line is its signature, an abstract's first
        # sentence its topic — what a real edit rarely moves.
        i = rng.randrange(1, len(units) - 1)
        units[i], units[i + 1] = units[i + 1], units[i]
    return units


def perturb(text: str, namespace: str, rng: random.Random,
            p: Perturbation = DEFAULT_PERTURBATION) -> str:
    """A copy of ``text`` as a person's edit would change it (see the module's docstring)."""
    text = _NUMBER.sub(lambda m: _change_number(m, rng) if rng.random() < p.number
                       else m.group(0), text)
    if namespace == "code":
        # Indentation kept: a copy of code is still code.
        lines = [line[:len(line) - len(line.lstrip())]
                 + " ".join(_perturb_words(line.split(), p, rng)) if line.strip() else line
                 for line in text.split("\n")]
        return "\n".join(_exchange_neighbours(lines, p, rng))
    sentences = [" ".join(_perturb_words(s.split(), p, rng))
                 for s in _SENTENCE_END.split(text) if s.strip()]
    return " ".join(_exchange_neighbours(sentences, p, rng))


# --- vectors -----------------------------------------------------------------------------------
def noise_scale(target_cosine: float, dim: int) -> float:
    """σ of isotropic Gaussian noise that, added to a unit vector of ``dim`` dimensions, leaves
    it at ``target_cosine`` to where it was (in expectation; |n|² ≈ σ²·d, v·n ≈ 0)."""
    c = min(max(target_cosine, 1e-3), 1.0)
    return math.sqrt(max(0.0, 1.0 / (c * c) - 1.0) / dim)


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def derive(base: np.ndarray, target_cosine: float, rng: np.random.Generator) -> np.ndarray:
    """A copy's vectors (one row per passage) from its base's: ``normalise(v + σ·n)``."""
    base = np.atleast_2d(np.asarray(base, dtype=np.float32))
    sigma = noise_scale(target_cosine, base.shape[1])
    return normalise(base + rng.standard_normal(base.shape).astype(np.float32) * sigma)


def vector_rng(seed: int, org_index: int, slot: int) -> np.random.Generator:
    return np.random.default_rng([seed, org_index, slot])


@dataclass
class Calibration:
    """Cosines of real perturbed copies to their bases, as the real encoder gives them, per
    namespace; derived copies draw their target cosine from these."""

    cosines: dict[str, list[float]] = field(default_factory=dict)
    derived: dict[str, list[float]] = field(default_factory=dict)
    # Share of copies whose nearest base (among all bases) is their own: real, derived.
    nearest_own_real: float = 0.0
    nearest_own_derived: float = 0.0

    def draw(self, namespace: str, rng: random.Random) -> float:
        values = self.cosines.get(namespace) or [c for v in self.cosines.values() for c in v]
        return rng.choice(values) if values else 0.97

    def summary(self) -> list[str]:
        lines = []
        for namespace, values in sorted(self.cosines.items()):
            derived = self.derived.get(namespace, [])
            lines.append(
                f"{namespace}: {len(values)} real copies, cosine to base mean "
                f"{np.mean(values):.4f} (p5 {np.percentile(values, 5):.4f}, min "
                f"{min(values):.4f}); derived mean {np.mean(derived) if derived else 0:.4f}")
        lines.append(f"base is the copy's nearest base: real {self.nearest_own_real:.3f}, "
                     f"derived {self.nearest_own_derived:.3f}")
        return lines

    def to_json(self) -> dict:
        return {"cosines": self.cosines, "derived": self.derived,
                "nearest_own_real": self.nearest_own_real,
                "nearest_own_derived": self.nearest_own_derived}

    @classmethod
    def from_json(cls, data: dict) -> Calibration:
        return cls(**data)


def calibrate(bases: Sequence[Base], heads: np.ndarray,
              encode: Callable[[list[str]], np.ndarray], embedding_text: Callable[[Base], str],
              sample: int = 200, seed: int = SEED) -> Calibration:
    """Encode ``sample`` real perturbed copies with the real encoder (``encode``) and measure
    their cosine to their base's head vector (``heads``, unit rows); derive the same copies
    from those cosines and compare."""
    rng = random.Random(f"{seed}:calibration")
    picks = rng.sample(range(len(bases)), min(sample, len(bases)))
    copies = [Base(bases[i].title, perturb(bases[i].text, bases[i].namespace,
                                           copy_rng(seed, CALIBRATION, i)), bases[i].namespace)
              for i in picks]
    real = normalise(np.asarray(encode([embedding_text(c) for c in copies]), dtype=np.float32))
    result = Calibration()
    derived_rows = []
    for row, i in enumerate(picks):
        cosine = float(real[row] @ heads[i])
        result.cosines.setdefault(bases[i].namespace, []).append(round(cosine, 5))
    for i in picks:
        target = result.draw(bases[i].namespace, copy_rng(seed, CALIBRATION - 1, i))
        vector = derive(heads[i], target, vector_rng(seed, CALIBRATION - 1, i))[0]
        derived_rows.append(vector)
        result.derived.setdefault(bases[i].namespace, []).append(
            round(float(vector @ heads[i]), 5))
    own = np.asarray(picks)
    result.nearest_own_real = float(np.mean(np.argmax(real @ heads.T, axis=1) == own))
    result.nearest_own_derived = float(
        np.mean(np.argmax(np.asarray(derived_rows) @ heads.T, axis=1) == own))
    return result


# --- shape of the corpus -----------------------------------------------------------------------
def org_sizes(total: int, orgs: int, skew: float = 1.0) -> list[int]:
    """Fragments per organization, largest first: Zipf-like (size ∝ 1 / rank^skew), as a
    company's organizations are — a few large, many small; every one has at least one."""
    if orgs < 1 or total < orgs:
        raise ValueError(f"{total} fragments cannot fill {orgs} organizations")
    weights = [1.0 / (rank ** skew) for rank in range(1, orgs + 1)]
    scale = (total - orgs) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(sizes)):  # rounding: the remainder to the largest
        sizes[i % orgs] += 1
    return sizes


def repos_for(size: int) -> int:
    """Repositories of an organization of ``size`` fragments: more for a larger one, so that a
    repository-scoped retrieval in a large organization filters more of its rows out (the
    hard case for a filtered HNSW search)."""
    return max(4, min(24, size // 2000))


def org_plan(seed: int, org_index: int, size: int, n_bases: int) -> list[int]:
    """The base text of each of the organization's fragments (drawn with replacement)."""
    rng = random.Random(f"{seed}:plan:{org_index}")
    return [rng.randrange(n_bases) for _ in range(size)]


# --- recall ------------------------------------------------------------------------------------
def recall_at(found: Sequence[int], exact: Sequence[int], k: int) -> float:
    """Share of the exact top-``k`` the approximate top-``k`` found (1.0 when the exact
    search has nothing: nothing was missed)."""
    truth = set(exact[:k])
    if not truth:
        return 1.0
    return len(truth & set(found[:k])) / len(truth)
