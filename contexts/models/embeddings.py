"""Dense vectors: per fragment version and model generation, one per passage the model can read
(passage 0 is the fragment's text as the model reads it, its head; a fragment longer than the
model's window has more, see :meth:`contexts.embedding.embedder.Embedder.passages`).

The ``contexts_embedding`` table is LIST-partitioned by organization with an HNSW index per
partition (migration 0002 and :func:`contexts.services.partitions.ensure_partition`), so a
filtered vector search touches one organization's graph only. Django does not create the table:
the model is created in migration 0002 with SeparateDatabaseAndState, so Django knows it
(tests flush it) without creating it.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

EMBEDDING_DIM = 384


class GenerationState(models.TextChoices):
    BUILDING = "building", "building"
    ACTIVE = "active", "active"
    SHADOW = "shadow", "shadow (previous, still queryable)"
    RETIRED = "retired", "retired"


class EmbeddingGeneration(models.Model):
    """One model's vectors for one namespace; retrieval only reads the active generation."""

    namespace = models.CharField(max_length=8)
    model_name = models.CharField(max_length=300)
    model_version = models.CharField(max_length=100, blank=True)
    dim = models.PositiveIntegerField(default=EMBEDDING_DIM)
    state = models.CharField(max_length=10, choices=GenerationState.choices,
                             default=GenerationState.BUILDING)
    created_at = models.DateTimeField(default=timezone.now)
    activated_at = models.DateTimeField(null=True, blank=True)
    shadow_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["namespace", "-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["namespace"], condition=models.Q(state="active"),
                                    name="one_active_generation_per_namespace")
        ]

    def __str__(self) -> str:
        return f"{self.namespace}:{self.model_name} ({self.state})"


class Embedding(models.Model):
    id = models.BigAutoField(primary_key=True)
    org_id = models.BigIntegerField()
    fragment = models.ForeignKey("contexts.Fragment", on_delete=models.DO_NOTHING,
                                 db_constraint=False, related_name="embeddings")
    fragment_version = models.PositiveIntegerField()
    generation = models.ForeignKey(EmbeddingGeneration, on_delete=models.DO_NOTHING,
                                   db_constraint=False, related_name="embeddings")
    namespace = models.CharField(max_length=8)
    scope_ids = ArrayField(models.IntegerField(), default=list)
    content_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=EMBEDDING_DIM)
    # 0: the head (what one vector per fragment used to be); 1…: later windows of a long text.
    passage = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "contexts_embedding"

    def __str__(self) -> str:
        return f"embedding of fragment {self.fragment_id} v{self.fragment_version}"


class VectorCache(models.Model):
    """Vectors by model and content hash, kept when fragments and organizations go (so an
    evaluation's second run, or re-ingesting the same text elsewhere, does not re-embed)."""

    model_name = models.CharField(max_length=300)
    content_hash = models.CharField(max_length=64)
    vector = VectorField(dimensions=EMBEDDING_DIM)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model_name", "content_hash"],
                                               name="one_cached_vector")]

    def __str__(self) -> str:
        return f"{self.model_name}:{self.content_hash[:12]}"
