"""Evaluation runs: how a retrieval configuration scored on a labelled dataset."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.models import PublicIdModel


class EvalRun(PublicIdModel):
    """One ``manage.py eval`` run: dataset, split, per-pipeline metrics, configuration hash."""

    PUBLIC_ID_PREFIX = "eval"
    dataset = models.CharField(max_length=200)
    split = models.CharField(max_length=40)
    config_hash = models.CharField(max_length=64, db_index=True,
                                   help_text="hash of the pipeline configuration")
    config = models.JSONField(default=dict)
    metrics = models.JSONField(default=dict, help_text="{pipeline: {metric: value}}")
    per_scope = models.JSONField(default=dict, blank=True)
    queries = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.public_id} {self.dataset}/{self.split}"
