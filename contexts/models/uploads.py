"""Uploaded files waiting for their ingestion job, kept in PostgreSQL so that any worker can
read them: a web node and a worker need share no disk (issue 21). Written and read only through
the ``uploads`` storage (``contexts.services.upload_storage``); see ``contexts.services.uploads``
for the key scheme and when a blob is deleted."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.models import Organization


class UploadBlob(models.Model):
    """One uploaded file's bytes under its storage key (``<org id>/<job public id>/<name>``).

    Transient: deleted when its job finishes, or by the hourly sweep after
    ``UPLOAD_RETENTION_HOURS`` whatever became of the job."""

    # Tenant data: the organization is part of the row and of its unique key, so the table can
    # be distributed by organization (issue 21, item 5).
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=512)
    content = models.BinaryField()
    size = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "contexts_upload"
        constraints = [models.UniqueConstraint(fields=["org", "key"], name="one_upload_per_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.size} bytes)"
