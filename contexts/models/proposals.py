"""An agent's proposal: promote a session fragment to its repository or organization, or add a
new repository fragment. A tech lead approves (optionally editing), rejects with a reason, or
merges it into an existing fragment; a trusted token's proposal is accepted at once where the
scope's policy says auto-accept (``contexts.usecases.proposals``, docs/adr/0017).

Until it is approved nothing proposed is retrievable outside its session: a new fragment's
text lives here only, and a promotion points at the session fragment, which stays in its
session. Approval creates the fragment at the target scope through the one door.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization, PublicIdModel, tenant_public_id


class ProposalKind(models.TextChoices):
    PROMOTE = "promote", "promote a session fragment"
    NEW = "new", "a new fragment"


class ProposalTarget(models.TextChoices):
    REPOSITORY = "repository", "repository"
    ORGANIZATION = "organization", "organization"


class ProposalState(models.TextChoices):
    OPEN = "open", "open"
    APPROVED = "approved", "approved"
    MERGED = "merged", "merged"
    REJECTED = "rejected", "rejected"


class Proposal(PublicIdModel):
    PUBLIC_ID_PREFIX = "prop"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=ProposalKind.choices)
    target = models.CharField(max_length=12, choices=ProposalTarget.choices)
    # Composite foreign keys (org_id, x_id) → (org_id, id), migration 0030.
    target_scope = models.ForeignKey("accounts.Scope", on_delete=models.CASCADE,
                                     related_name="+", db_constraint=False)
    source_fragment = models.ForeignKey("contexts.Fragment", on_delete=models.SET_NULL,
                                        null=True, blank=True, related_name="+",
                                        db_constraint=False)
    # The text proposed (a promotion: the session fragment's, when proposed), screened for
    # secrets on the way in as every write is.
    title = models.CharField(max_length=300, blank=True)
    body = models.TextField()
    fragment_kind = models.CharField(max_length=32)
    proposed_by = models.ForeignKey("accounts.ApiToken", on_delete=models.SET_NULL, null=True,
                                    blank=True, related_name="+", db_constraint=False)
    proposed_by_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                         null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=10, choices=ProposalState.choices,
                             default=ProposalState.OPEN)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    auto_accepted = models.BooleanField(default=False)
    reason = models.TextField(blank=True, help_text="why it was rejected")
    # The fragment the approval created, or the one it was merged into.
    result_fragment = models.ForeignKey("contexts.Fragment", on_delete=models.SET_NULL,
                                        null=True, blank=True, related_name="+",
                                        db_constraint=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"], name="proposal_public_id"),
            models.UniqueConstraint(fields=["org", "id"], name="proposal_org_key"),
        ]
        indexes = [models.Index(fields=["org", "state", "created_at"],
                                name="proposal_org_state")]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.kind} → {self.target}, {self.state})"
