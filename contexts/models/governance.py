"""Staleness nudges: a question to a fragment's owner, answered in the console or by email."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization, new_public_id, tenant_public_id
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
    # A source conflict's answers (ADR 0020), and one the source itself gives: a later
    # upstream text merged cleanly, or a deleted source text came back.
    KEPT_MINE = "kept_mine", "kept the curated text"
    TOOK_UPSTREAM = "took_upstream", "took the upstream text"
    EDITED_MERGE = "edited_merge", "edited the merge"
    SOURCE_SETTLED = "source_settled", "settled by the source"


class NudgeKind(models.TextChoices):
    STALE = "stale", "stale"  # the staleness scan's signals (contexts/governance/staleness.py)
    SOURCE_CONFLICT = "source_conflict", "source conflict"  # a person's edit meets upstream
    SOURCE_GONE = "source_gone", "source gone"  # the edited fragment's source text was deleted
    EVIDENCE_CHANGED = "evidence_changed", "evidence changed"  # what it rests on changed
    VERIFY_DUE = "verify_due", "verification due"  # its kind's verify-by interval passed


def nudge_public_id() -> str:
    """A new nudge's public id (``nud_`` and 14 random characters): what the API and any link
    name it by; its integer key never leaves the server (docs/data-model.md)."""
    return new_public_id("nud")


class Nudge(OrgFromParent):
    ORG_FROM = ("fragment",)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            editable=False)
    # A field default rather than save(): bulk creation (an organization's restore) fills it too.
    public_id = tenant_public_id(default=nudge_public_id, editable=False)
    fragment = models.ForeignKey("contexts.Fragment", on_delete=models.CASCADE,
                                 related_name="nudges", db_constraint=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="nudges")
    kind = models.CharField(max_length=20, choices=NudgeKind.choices, default=NudgeKind.STALE)
    reasons = models.JSONField(default=list, help_text="[{code, detail}] — why it is stale")
    # What the owner needs to answer it: for a source conflict the base, upstream and curated
    # texts and the commit; for changed evidence each reference's diff.
    detail = models.JSONField(default=dict, blank=True)
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
            models.UniqueConstraint(fields=["org", "public_id"], name="nudge_public_id"),
            models.UniqueConstraint(fields=["org", "fragment", "kind"],
                                    condition=~models.Q(state="answered"),
                                    name="one_open_nudge_per_fragment_kind")
        ]

    def __str__(self) -> str:
        return f"nudge {self.fragment.public_id} → {self.owner} ({self.state})"
