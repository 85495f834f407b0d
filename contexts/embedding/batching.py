"""Concurrent queries encoded in one forward pass.

A forward pass over eight short queries costs little more than over one (MiniLM on one core:
~17 ms for one, a few ms more per extra query), so a fleet of agents is served several times
faster when the queries that arrive together are encoded together. :class:`Batcher` is one
thread that takes what has been submitted and encodes it in batches; the query-encoder child
(``contexts.embedding.embedder.serve_queries``) and the in-process ``thread`` mode
(``contexts.retrieval.query_encoder``) both run one, so the rule lives here only:

- A query that arrives while the encoder is idle, after a quiet spell, is encoded at once:
  one request alone never waits.
- A batch takes every query already waiting, up to ``max_batch``. Under load that is what
  batches: the queries that arrive during one pass form the next.
- After a batch of more than one (the sign of concurrent clients), the next batch is held open
  for at most ``wait`` seconds from its first query's arrival, so that clients whose requests
  are a moment apart share a pass instead of each starting one.
- A batch whose pass fails is encoded again one query at a time: a query that cannot be
  encoded fails alone, never its neighbours.

No Django here: the spawned encoder child imports this before anything is configured.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

# encode(key, texts) -> one result per text, in order. ``key`` groups queries that may share a
# pass (the models they need).
Encode = Callable[[Hashable, Sequence[str]], Sequence[object]]
# Called with a query's result, or with the exception that kept it from one.
Done = Callable[[object], None]


@dataclass
class _Item:
    key: Hashable
    text: str
    done: Done
    arrived: float = field(default_factory=time.monotonic)


_STOP = object()


class Batcher:
    """One thread that encodes submitted queries in batches (see the module's docstring)."""

    def __init__(self, encode: Encode, *, max_batch: int, wait: float,
                 name: str = "contexts-encode-batches") -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._encode = encode
        self.max_batch = max_batch
        self.wait = max(0.0, wait)
        self._queue: queue.SimpleQueue[_Item | object] = queue.SimpleQueue()
        self._held: _Item | None = None  # taken off the queue, for the next batch
        self._last_size = 0
        self.batches = 0  # counters, for tests and measurements
        self.encoded = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def submit(self, key: Hashable, text: str, done: Done) -> None:
        """Encode ``text`` with the others of ``key``; ``done`` is called from the batcher's
        thread with the result or the exception."""
        self._queue.put(_Item(key, text, done))

    def close(self) -> None:
        """Stop after what was submitted before; the thread exits."""
        self._queue.put(_STOP)

    def _run(self) -> None:
        while True:
            first = self._held or self._queue.get()
            self._held = None
            if first is _STOP:
                return
            assert isinstance(first, _Item)
            batch = self._collect(first)
            if batch is None:
                return
            self._last_size = len(batch)
            self._encode_batch(batch)

    def _collect(self, first: _Item) -> list[_Item] | None:
        """``first`` and what may share its pass: the same key, up to ``max_batch``; held open
        until ``first.arrived + wait`` only after a batch of more than one. None: stop."""
        batch = [first]
        deadline = first.arrived + self.wait if self._last_size > 1 else 0.0
        while len(batch) < self.max_batch:
            timeout = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=timeout) if timeout > 0 else \
                    self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self._encode_batch(batch)
                return None
            assert isinstance(item, _Item)
            if item.key != first.key:
                self._held = item  # another model set: it starts the next batch
                break
            batch.append(item)
        return batch

    def _encode_batch(self, batch: list[_Item]) -> None:
        self.batches += 1
        self.encoded += len(batch)
        try:
            results = list(self._encode(batch[0].key, [item.text for item in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"{len(results)} results for {len(batch)} queries")
        except Exception as exc:  # noqa: BLE001 - retried one by one, then reported
            if len(batch) == 1:
                _deliver(batch[0], exc)
                return
            logger.warning("a batch of %d queries failed (%s); encoding them one by one",
                           len(batch), exc)
            for item in batch:
                self._encode_batch([item])
            return
        for item, result in zip(batch, results, strict=True):
            _deliver(item, result)


def _deliver(item: _Item, result: object) -> None:
    try:
        item.done(result)
    except Exception:  # noqa: BLE001 - one caller's failure must not stop the batcher
        logger.exception("delivering an encoded query failed")
