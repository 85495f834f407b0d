"""The suite's embedding memo and the golden snapshot it is seeded from (tests/embedding_memo.py):
a recorded vector is used only for the same model and text, and only while the model still gives
what was recorded. The model here is a stand-in (a vector from a text's digest) so each case can
count what reached it; the snapshot is the real file format."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from tests.embedding_memo import Memo, Snapshot

MODEL = "stand-in@1"


class Model:
    """A deterministic 8-dimensional "model" that remembers what it was asked to embed."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt
        self.asked: list[str] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.asked += texts
        rows = [np.frombuffer(hashlib.sha256((self.salt + t).encode()).digest()[:8],
                              dtype=np.uint8).astype(np.float32) + 1 for t in texts]
        return np.stack([row / np.linalg.norm(row) for row in rows])


def recorded(tmp_path, texts: list[str]) -> Snapshot:
    memo, model = Memo(None), Model()
    memo.encode(MODEL, texts, model)
    memo.record(tmp_path / "vectors.npz")
    return Snapshot(tmp_path / "vectors.npz")


def test_a_recorded_text_is_not_embedded_again_and_a_new_one_is(tmp_path):
    texts = [f"def f{i}(): return {i}" for i in range(10)]
    memo, model = Memo(recorded(tmp_path, texts)), Model()
    vectors = memo.encode(MODEL, [texts[3], "a text the chunker cut today"], model)
    # The probe check embeds the longest recorded texts once; then only the new text.
    assert model.asked[-1:] == ["a text the chunker cut today"]
    assert texts[3] not in model.asked
    assert np.allclose(vectors[0], Model()([texts[3]])[0], atol=1e-3)
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0)


def test_another_model_or_changed_outputs_embed_everything(tmp_path):
    texts = [f"class C{i}: pass" for i in range(10)]
    snapshot = recorded(tmp_path, texts)
    other = Model()
    Memo(snapshot).encode("another-model@1", texts[:2], other)
    assert other.asked == texts[:2]
    # Same name, different vectors (a new encoding): the probes disagree, nothing is taken.
    changed = Model(salt="v2")
    vectors = Memo(snapshot).encode(MODEL, texts[:2], changed)
    assert changed.asked[-2:] == texts[:2]
    assert np.allclose(vectors, Model(salt="v2")(texts[:2]))


def test_a_missing_snapshot_embeds_everything_once(tmp_path):
    memo, model = Memo(Snapshot(tmp_path / "absent.npz")), Model()
    memo.encode(MODEL, ["a", "b", "a"], model)
    memo.encode(MODEL, ["b", "c"], model)
    assert model.asked == ["a", "b", "c"]


def test_an_unreadable_snapshot_embeds_everything(tmp_path):
    """A truncated file, or a Git LFS pointer where the file should be, costs speed only."""
    path = tmp_path / "vectors.npz"
    path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 3172852\n")
    memo, model = Memo(Snapshot(path)), Model()
    memo.encode(MODEL, ["a", "b"], model)
    assert model.asked == ["a", "b"]
