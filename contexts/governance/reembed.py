"""Model upgrades: re-embed every fragment into a new generation, then switch atomically.

1. :func:`start_reembed` creates an :class:`EmbeddingGeneration` in state ``building`` (after
   checking that the model loads and has the column's dimension).
2. :func:`build` (the ``reembed_generation`` task) embeds, in batches, every fragment of the
   namespace — active, superseded and retired alike, so that ``as_of`` retrieval keeps working —
   whose *current* version and visibility are not yet in the generation. That query is the
   progress marker, so the task is idempotent and resumable: a redelivered task after a worker
   died skips what is done. An advisory lock keeps two workers off the same generation.
3. :func:`activate` switches in one transaction, and only when nothing is missing: the old
   active generation becomes ``shadow`` (``shadow_until`` = now + ``EMBEDDING_SHADOW_DAYS``),
   the new one ``active``. Retrieval reads only the active generation, so it never sees a
   half-built one. Fragments edited while building are caught up before the switch, and once
   more right after it (an edit committed in between was embedded into the old generation).
4. :func:`drop_expired_shadows` (daily) deletes the vectors of shadow generations past their
   window and marks them ``retired``. Until then, :func:`rollback` can switch back.
"""

from __future__ import annotations

import datetime as dt
import logging
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, QuerySet

from contexts.embedding.embedder import resolve_model
from contexts.governance.clock import resolve
from contexts.indexes import indexing
from contexts.models import Embedding, EmbeddingGeneration, Fragment
from contexts.models.embeddings import EMBEDDING_DIM, GenerationState
from contexts.services.errors import InvalidOperation

logger = logging.getLogger(__name__)
LOCK_NAMESPACE = zlib.crc32(b"contexts.governance.reembed") & 0x7FFFFFFF


@dataclass
class Progress:
    generation: EmbeddingGeneration
    total: int
    missing: int
    embedded_now: int = 0

    @property
    def done(self) -> int:
        return self.total - self.missing


def start_reembed(namespace: str, model: str, *, now: dt.datetime | None = None,
                  check_model: bool = True) -> EmbeddingGeneration:
    """A new ``building`` generation for ``namespace`` with ``model`` (a packaged id, a local
    path or a cached hub id). Resumes the building generation of the same model if there is one;
    refuses a second concurrent upgrade of the namespace to a different model."""
    if namespace not in indexing.NAMESPACES:
        raise InvalidOperation(f"unknown namespace {namespace!r}", field="namespace")
    spec = resolve_model(model)
    building = EmbeddingGeneration.objects.filter(namespace=namespace,
                                                  state=GenerationState.BUILDING).first()
    if building is not None:
        if building.model_name == spec.name:
            return building
        raise InvalidOperation(
            f"generation {building.pk} of {namespace} is already building with "
            f"{building.model_name}", field="model")
    generation = EmbeddingGeneration(namespace=namespace, model_name=spec.name,
                                     model_version=spec.version, dim=EMBEDDING_DIM,
                                     state=GenerationState.BUILDING, created_at=resolve(now))
    if check_model:
        # Fail now, not in the worker: the model must load offline and fit the vector column.
        dim = indexing.embedder_for(generation).dim
        if dim != EMBEDDING_DIM:
            raise InvalidOperation(f"{spec.name} produces {dim}-dimensional vectors; the "
                                   f"embedding column holds {EMBEDDING_DIM}", field="model")
    generation.save()
    logger.info("re-embedding %s with %s into generation %s", namespace, spec.name,
                generation.pk)
    return generation


def missing(generation: EmbeddingGeneration) -> QuerySet[Fragment]:
    """Fragments of the namespace whose current version (and visibility) the generation lacks."""
    current = Embedding.objects.filter(generation_id=generation.pk, fragment_id=OuterRef("pk"),
                                       fragment_version=OuterRef("version"),
                                       content_hash=OuterRef("content_hash"),
                                       scope_ids=OuterRef("scope_ids"))
    return (Fragment.objects.filter(namespace=generation.namespace)
            .exclude(Exists(current)).order_by("pk"))


def progress(generation: EmbeddingGeneration) -> Progress:
    total = Fragment.objects.filter(namespace=generation.namespace).count()
    return Progress(generation, total, missing(generation).count())


@contextmanager
def _exclusive(generation_id: int) -> Iterator[bool]:
    """A session-level advisory lock: released by PostgreSQL if the worker dies."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_NAMESPACE, generation_id])
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)",
                               [LOCK_NAMESPACE, generation_id])


def embed_missing(generation: EmbeddingGeneration, *, batch: int | None = None,
                  max_batches: int | None = None,
                  on_batch: Callable[[int], None] | None = None) -> int:
    """Embed missing fragments into ``generation`` in batches; returns how many were written."""
    batch = batch or settings.GOVERNANCE_REEMBED_BATCH
    written = batches = 0
    last_pk = 0
    while max_batches is None or batches < max_batches:
        # Walk by primary key so a fragment that fails to embed cannot stall the loop.
        group = list(missing(generation).filter(pk__gt=last_pk)[:batch])
        if not group:
            break
        indexing.embed_fragments(group, generation=generation)
        written += len(group)
        batches += 1
        last_pk = group[-1].pk
        if on_batch is not None:
            on_batch(written)
    return written


def activate(generation: EmbeddingGeneration, *, now: dt.datetime | None = None) -> bool:
    """Make ``generation`` the active one of its namespace — only if it is complete. The
    previous active generation becomes a shadow for ``EMBEDDING_SHADOW_DAYS``."""
    now = resolve(now)
    with transaction.atomic():
        # The generations' table before the embeddings' (read below), the order in which an
        # organization's new partition (migration 0039) and drop_expired_shadows take them:
        # holding only row locks here, then updating the rows after that read, deadlocked with
        # an organization being created.
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE contexts_embeddinggeneration IN ROW EXCLUSIVE MODE")
        # Lock the namespace's generations: one switch at a time, never two active.
        rows = list(EmbeddingGeneration.objects.select_for_update()
                    .filter(namespace=generation.namespace).order_by("pk"))
        target = next((g for g in rows if g.pk == generation.pk), None)
        if target is None or target.state == GenerationState.ACTIVE:
            return target is not None
        if target.state == GenerationState.RETIRED:
            raise InvalidOperation("a retired generation has no vectors left", field="state")
        if missing(target).exists():
            return False
        for old in rows:
            if old.state == GenerationState.ACTIVE:
                old.state = GenerationState.SHADOW
                old.shadow_until = now + dt.timedelta(days=settings.EMBEDDING_SHADOW_DAYS)
                old.save(update_fields=["state", "shadow_until"])
        target.state, target.activated_at, target.shadow_until = (GenerationState.ACTIVE, now,
                                                                  None)
        target.save(update_fields=["state", "activated_at", "shadow_until"])
    logger.info("generation %s (%s) is now active for %s", target.pk, target.model_name,
                target.namespace)
    # An edit committed between the last catch-up and the switch went to the old generation.
    embed_missing(target)
    return True


def build(generation_id: int, *, now: dt.datetime | None = None, batch: int | None = None,
          on_batch: Callable[[int], None] | None = None) -> Progress:
    """Embed everything into a building generation, then switch to it (the task body)."""
    generation = EmbeddingGeneration.objects.get(pk=generation_id)
    if generation.state != GenerationState.BUILDING:
        return progress(generation)
    with _exclusive(generation.pk) as acquired:
        if not acquired:
            logger.info("generation %s is being built by another worker", generation.pk)
            return progress(generation)
        written = 0
        for _ in range(10):  # edits while building keep adding work; converge, then switch
            written += embed_missing(generation, batch=batch, on_batch=on_batch)
            if activate(generation, now=now):
                break
        result = progress(EmbeddingGeneration.objects.get(pk=generation.pk))
        result.embedded_now = written
        return result


def rollback(namespace: str, *, now: dt.datetime | None = None) -> EmbeddingGeneration:
    """Switch back to the most recent shadow generation (caught up first)."""
    shadow = (EmbeddingGeneration.objects.filter(namespace=namespace,
                                                 state=GenerationState.SHADOW)
              .order_by("-activated_at", "-pk").first())
    if shadow is None:
        raise InvalidOperation(f"no shadow generation of {namespace} to go back to",
                               field="namespace")
    embed_missing(shadow)
    if not activate(shadow, now=now):
        embed_missing(shadow)
        if not activate(shadow, now=now):
            raise InvalidOperation("the shadow generation could not be caught up",
                                   field="namespace")
    return shadow


def resume_building() -> list[int]:
    """Ids of generations still building (a task lost with its worker is queued again by the
    daily housekeeping; :func:`build` is idempotent and locked, so a duplicate is harmless)."""
    return list(EmbeddingGeneration.objects.filter(state=GenerationState.BUILDING)
                .order_by("pk").values_list("pk", flat=True))


def drop_expired_shadows(now: dt.datetime | None = None) -> list[int]:
    """Delete the vectors of shadow generations past ``shadow_until``; mark them retired."""
    now = resolve(now)
    dropped = []
    for generation in EmbeddingGeneration.objects.filter(state=GenerationState.SHADOW,
                                                         shadow_until__lte=now):
        with transaction.atomic():
            changed = EmbeddingGeneration.objects.filter(
                pk=generation.pk, state=GenerationState.SHADOW).update(
                state=GenerationState.RETIRED)
            if changed:
                deleted, _ = Embedding.objects.filter(generation_id=generation.pk).delete()
                logger.info("retired shadow generation %s (%s): %d vectors deleted",
                            generation.pk, generation.model_name, deleted)
                dropped.append(generation.pk)
    return dropped
