"""Secrets found in text on its way in (``contexts.services.secrets``; ADR 0016).

A row says where a secret was and what became of it — never the secret itself, nor a hash of
it (a hash of a short password is the password to anyone with a word list).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization, PublicIdModel, tenant_public_id


class SecretAction(models.TextChoices):
    REDACTED = "redacted", "stored with the secret replaced by a placeholder"
    REFUSED = "refused", "not stored"


class SecretOrigin(models.TextChoices):
    INGESTION = "ingestion", "ingested from a path"
    UPLOAD = "upload", "uploaded"
    WRITE = "write", "written (API, MCP)"
    EDIT = "edit", "edited (console, nudge, admin)"
    # Text stored before the scan existed, found by ``manage.py scan_secrets --stored``.
    RESCAN = "rescan", "stored before the scan (rescan)"


class SecretFinding(PublicIdModel):
    PUBLIC_ID_PREFIX = "sec"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=80, help_text="the detector's name for it, e.g. "
                            "'AWS Access Key'")
    action = models.CharField(max_length=10, choices=SecretAction.choices)
    origin = models.CharField(max_length=10, choices=SecretOrigin.choices)
    path = models.CharField(max_length=1000, blank=True,
                            help_text="the file, for ingested and uploaded text")
    line = models.PositiveIntegerField(help_text="1-based, in the file (or in the body "
                                       "written)")
    # Composite foreign keys (org_id, x_id) → (org_id, id), migration 0026; Django does the
    # on_delete itself, as for every reference between tenant tables.
    job = models.ForeignKey("contexts.IngestionJob", on_delete=models.SET_NULL, null=True,
                            blank=True, related_name="secret_findings", db_constraint=False)
    document = models.ForeignKey("contexts.SourceDocument", on_delete=models.SET_NULL,
                                 null=True, blank=True, related_name="secret_findings",
                                 db_constraint=False)
    fragment = models.ForeignKey("contexts.Fragment", on_delete=models.SET_NULL, null=True,
                                 blank=True, related_name="secret_findings",
                                 db_constraint=False)
    fragment_version = models.PositiveIntegerField(null=True, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "path", "line"]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"],
                                    name="secretfinding_public_id"),
        ]
        indexes = [models.Index(fields=["org", "created_at"], name="secretfinding_org_time")]

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.path else f"line {self.line}"
        return f"{self.kind} at {where} ({self.action})"
