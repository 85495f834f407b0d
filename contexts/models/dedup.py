"""Governance records: near-duplicate pairs proposed to curators, and staleness scan runs.

Ingestion collapses near-duplicates automatically only at SimHash distance ≤ 3. Pairs a little
further apart (or close in embedding space) may be the same knowledge said twice, or two
different facts that happen to look alike — a person decides, so they are stored as proposals
and never merged by a job.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization


class DedupState(models.TextChoices):
    PROPOSED = "proposed", "proposed"
    MERGED = "merged", "merged"
    DISMISSED = "dismissed", "dismissed"


class DedupCandidate(models.Model):
    """Two active fragments of one home scope that are probably the same knowledge.

    The pair is stored once, ordered by primary key (``fragment_a`` < ``fragment_b``), so a
    rescan updates the row instead of proposing the pair again — and a dismissed pair stays
    dismissed.
    """

    org = models.ForeignKey(Organization, on_delete=models.CASCADE,
                            related_name="dedup_candidates")
    fragment_a = models.ForeignKey("contexts.Fragment", on_delete=models.CASCADE,
                                   related_name="+", db_constraint=False)
    fragment_b = models.ForeignKey("contexts.Fragment", on_delete=models.CASCADE,
                                   related_name="+", db_constraint=False)
    distance = models.PositiveSmallIntegerField(null=True, blank=True,
                                                help_text="SimHash Hamming distance")
    cosine = models.FloatField(null=True, blank=True,
                               help_text="cosine similarity in the active generation")
    state = models.CharField(max_length=10, choices=DedupState.choices,
                             default=DedupState.PROPOSED, db_index=True)
    proposed_at = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    kept = models.ForeignKey("contexts.Fragment", on_delete=models.SET_NULL, null=True,
                             blank=True, related_name="+", db_constraint=False,
                             help_text="the canonical fragment, once merged")

    class Meta:
        ordering = ["-proposed_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "fragment_a", "fragment_b"],
                                    name="one_dedup_pair"),
            models.CheckConstraint(condition=models.Q(fragment_a__lt=models.F("fragment_b")),
                                   name="dedup_pair_ordered"),
        ]
        indexes = [models.Index(fields=["org", "state"])]

    def __str__(self) -> str:
        return f"dedup {self.fragment_a_id}~{self.fragment_b_id} ({self.state})"


class StalenessScan(models.Model):
    """One staleness scan of one organization: what it found and what it did (the governance
    page's stale count and its trend come from these rows, not from rescanning on page view)."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE,
                            related_name="staleness_scans")
    now = models.DateTimeField(help_text="the clock the scan ran with")
    finished_at = models.DateTimeField(default=timezone.now)
    scanned = models.PositiveIntegerField(default=0, help_text="active fragments examined")
    stale = models.PositiveIntegerField(default=0)
    by_reason = models.JSONField(default=dict, blank=True, help_text="{reason code: count}")
    nudges_opened = models.PositiveIntegerField(default=0)
    nudges_escalated = models.PositiveIntegerField(default=0)
    unroutable = models.PositiveIntegerField(
        default=0, help_text="stale fragments nobody could be asked about (no owner, no lead)")

    class Meta:
        ordering = ["-now", "-pk"]
        indexes = [models.Index(fields=["org", "-now"])]

    def __str__(self) -> str:
        return f"scan {self.org_id} @ {self.now:%Y-%m-%d}: {self.stale} stale"
