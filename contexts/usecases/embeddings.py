"""Re-embedding a namespace with a new model (the operator's ``manage.py reembed``): a new
``building`` generation, filled by the ``reembed_generation`` task queued here, which switches
retrieval to it when complete (``contexts.governance.reembed``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from contexts.governance import reembed
from contexts.governance.tasks import reembed_generation
from contexts.models import EmbeddingGeneration


@dataclasses.dataclass(frozen=True)
class Reembed:
    namespace: str  # "prose" or "code"
    model: str      # a packaged model id, a local path or a cached hub id


def start_reembed(command: Reembed, *, queue: bool = True) -> EmbeddingGeneration:
    """The new generation, its task queued once the transaction commits; ``queue=False``: the
    caller builds it in this process (``reembed --inline``)."""
    generation = reembed.start_reembed(command.namespace, command.model)
    if queue:
        reembed_generation.delay_on_commit(generation.pk)
    return generation


def rollback(namespace: str) -> EmbeddingGeneration:
    """Retrieval back on the namespace's previous generation."""
    return reembed.rollback(namespace)


def build(generation_id: int, *, on_batch: Callable[[int], None] | None = None
          ) -> reembed.Progress:
    """Fill a building generation in this process, then switch to it."""
    return reembed.build(generation_id, on_batch=on_batch)


def progress(generation: EmbeddingGeneration) -> reembed.Progress:
    return reembed.progress(generation)
