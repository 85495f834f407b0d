"""Every retrieval leaves a trace that explains every score."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import ApiToken, Organization, PublicIdModel


class RetrievalTrace(PublicIdModel):
    """Who asked what, in which scopes, with which parameters — and for every candidate its
    rank and score at each stage (bm25, dense, rrf, rerank, freshness, authority, pin, final).
    """

    PUBLIC_ID_PREFIX = "tr"
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="traces")
    token = models.ForeignKey(ApiToken, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="traces")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                             blank=True, related_name="+")
    query = models.TextField()
    scope_ids = models.JSONField(default=list, help_text="the effective scope set")
    requested_scope = models.JSONField(default=dict)
    parameters = models.JSONField(default=dict)
    reranker = models.CharField(max_length=200, default="none")
    candidates = models.JSONField(default=list)
    returned = models.JSONField(default=list, help_text="[{id, version, score, tokens}]")
    versions = models.JSONField(default=dict, help_text="chunker and embedding models")
    timings_ms = models.JSONField(default=dict)
    degraded = models.JSONField(
        default=dict, blank=True,
        help_text="leg → why it did not run (e.g. the lexical index is missing); empty when "
                  "every requested leg ran")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["org", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.public_id} {self.query[:60]!r}"
