"""Staleness nudges: a question to a fragment's owner, answered in the console or by email."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization
from accounts.tenancy import OrgFromParent


class NudgeState(models.TextChoices):
    OPEN = "open", "open"
    ESCALATED = "escalated", "escalated to tech leads"
    ANSWERED = "answered", "answered"


class NudgeAnswer(models.TextChoices):
    STILL_ACCURATE = "still_accurate", "still accurate"
    EDITED = "edited", "edited"
    RETIRED = "retired", "retired"
    HANDED_OVER = "handed_over", "handed over"


class Nudge(OrgFromParent):
    ORG_FROM = ("fragment",)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            editable=False)
    fragment = models.ForeignKey("contexts.Fragment", on_delete=models.CASCADE,
                                 related_name="nudges", db_constraint=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="nudges")
    reasons = models.JSONField(default=list, help_text="[{code, detail}] — why it is stale")
    state = models.CharField(max_length=10, choices=NudgeState.choices,
                             default=NudgeState.OPEN)
    answer = models.CharField(max_length=16, choices=NudgeAnswer.choices, blank=True)
    answered_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                    null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    escalated_at = models.DateTimeField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "fragment"],
                                    condition=~models.Q(state="answered"),
                                    name="one_open_nudge_per_fragment")
        ]

    def __str__(self) -> str:
        return f"nudge {self.fragment.public_id} → {self.owner} ({self.state})"
