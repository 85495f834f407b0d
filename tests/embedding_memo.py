"""What the suite's model has already computed: each distinct text is embedded once per session,
and the golden corpus's texts not even once per clone.

The golden gate (``tests/evaluation/test_golden.py``) ingests this repository, ~4,900 passages:
~8 CPU-minutes of the model, most of a fresh clone's ``make test``. The vectors it needs are kept
in ``tests/golden/vectors.npz`` — the same model's output for the same texts, recorded by
``make golden-vectors`` — so the gate embeds only the texts the code changed since. Everything
else the gate does (chunking, passages, the database, the index, fusion, compose) runs for real.

The snapshot is trusted only while it still is what the model gives: before the first vector is
taken from it, a few recorded texts are embedded again and must match (a new model, a new
version of it, or a change to how texts are encoded discards it, and every text is embedded).
Keys are digests of (model name, model version, text): a text the chunker now cuts differently
is simply missing, and embedded.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

SNAPSHOT = Path(__file__).resolve().parent / "golden" / "vectors.npz"
# `make golden-vectors` sets this to the file to write: every text the session embedded.
RECORD_ENV = "CONTEXTS_TEST_RECORD_VECTORS"
# A bound on the memory the session memo may hold (~1.6 KB a vector).
LIMIT = 50_000
# Texts embedded again to check the snapshot, and how close their vectors must be (cosine).
# Float16 storage and the padding of another batch move a vector by ~1e-4 of cosine at most.
PROBES = 4
PROBE_COSINE = 0.999

Encode = Callable[[Sequence[str]], np.ndarray]


def digest(model: str, text: str) -> bytes:
    return hashlib.blake2b(f"{model}\0{text}".encode("utf-8", "surrogatepass"),
                           digest_size=16).digest()


class Snapshot:
    """Vectors recorded for one model, looked up by :func:`digest`; checked before first use."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: dict[bytes, int] | None = None
        self.trusted: bool | None = None  # its probes matched the model (asked once)

    def _load(self) -> None:
        if self.rows is not None:
            return
        self.rows = {}
        if not self.path.exists():
            return
        try:
            with np.load(self.path, allow_pickle=False) as data:
                self.model = str(data["model"])
                keys = data["keys"]
                self.vectors = data["vectors"]
                self.probe_texts = [str(t) for t in data["probe_texts"]]
                self.probe_vectors = data["probe_vectors"]
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            # A truncated file or a Git LFS pointer costs speed, never a test.
            print(f"{self.path} is unreadable ({exc}); every text is embedded", file=sys.stderr)
            return
        self.rows = {bytes(key): i for i, key in enumerate(keys)}

    def _trust(self, encode: Encode) -> bool:
        if self.trusted is None:
            again = encode(self.probe_texts)
            cosines = np.sum(again * self.probe_vectors, axis=1)
            self.trusted = bool(np.all(cosines >= PROBE_COSINE))
            if not self.trusted:
                print(f"{self.path}: the model no longer gives the recorded vectors "
                      f"(cosine {cosines.min():.4f}); every text is embedded",
                      file=sys.stderr)
        return self.trusted

    def lookup(self, model: str, texts: Sequence[str], encode: Encode
               ) -> dict[str, np.ndarray]:
        """The recorded vectors of those ``texts`` (``encode``: the real model, for the check)."""
        self._load()
        assert self.rows is not None
        if not self.rows or model != self.model:
            return {}
        rows = {text: self.rows[key] for text in texts
                if (key := digest(model, text)) in self.rows}
        if not rows or not self._trust(encode):
            return {}
        found = {}
        for text, row in rows.items():
            vector = self.vectors[row].astype(np.float32)
            found[text] = vector / np.linalg.norm(vector)
        return found


class Memo:
    """``Embedder.encode`` through a per-process memo, seeded from the :class:`Snapshot`."""

    def __init__(self, snapshot: Snapshot | None) -> None:
        self.snapshot = snapshot
        self.vectors: dict[tuple[str, str], np.ndarray] = {}
        self.encoded: dict[tuple[str, str], np.ndarray] = {}  # by the model, this session

    def encode(self, model: str, texts: Sequence[str], original: Encode) -> np.ndarray:
        if not texts or len(self.vectors) >= LIMIT:
            return original(texts)
        missing = [t for t in dict.fromkeys(texts) if (model, t) not in self.vectors]
        if missing and self.snapshot is not None:
            known = self.snapshot.lookup(model, missing, original)
            self.vectors.update(((model, t), v) for t, v in known.items())
            missing = [t for t in missing if t not in known]
        if missing:
            fresh = original(missing)
            for text, vector in zip(missing, fresh, strict=True):
                self.vectors[model, text] = self.encoded[model, text] = vector
        return np.stack([self.vectors[model, t] for t in texts])

    def record(self, path: Path) -> int:
        """Write what the model embedded this session as a snapshot (one model: the default)."""
        models = {model for model, _ in self.encoded}
        assert len(models) == 1, f"one model per snapshot, found {sorted(models)}"
        (model,) = models
        texts = [text for _, text in self.encoded]
        vectors = np.stack(list(self.encoded.values()))
        probes = sorted(range(len(texts)), key=lambda i: len(texts[i]))[-PROBES:]
        np.savez_compressed(
            path, model=np.str_(model),
            keys=np.frombuffer(b"".join(digest(model, t) for t in texts),
                               dtype=np.uint8).reshape(len(texts), 16),
            vectors=vectors.astype(np.float16),
            probe_texts=np.array([texts[i] for i in probes]),
            probe_vectors=vectors[probes].astype(np.float32))
        return len(texts)


def record_path() -> Path | None:
    value = os.environ.get(RECORD_ENV)
    return Path(value) if value else None
