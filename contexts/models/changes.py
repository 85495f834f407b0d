"""The change feed: every change to what retrieval can see, in order, per organization.

Written only by ``contexts.services.change_feed`` (the one door's ``notify_changed``), in the
transaction that makes the change; read by every node's index follower
(``contexts.indexes.follower``). See ADR 0015.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from accounts.models import Organization


class ChangeKind(models.TextChoices):
    CREATE = "create"
    VERSION = "version"
    RETIRE = "retire"
    RESTORE = "restore"
    SUPERSEDE = "supersede"
    MERGE = "merge"
    SCOPE = "scope"
    METADATA = "metadata"
    DELETE = "delete"
    REEMBED = "reembed"
    REINDEX = "reindex"


class ChangeHead(models.Model):
    """The last sequence number given out in an organization's feed.

    Appending takes this row's lock (``UPDATE … RETURNING``) until the transaction ends, so an
    organization's sequence numbers are gapless and become visible in order: a follower that
    has applied up to N never later sees a change numbered N or below appear."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, primary_key=True,
                               related_name="+")
    seq = models.BigIntegerField(default=0)

    class Meta:
        db_table = "contexts_change_head"

    def __str__(self) -> str:
        return f"org {self.org_id} at {self.seq}"


class Change(models.Model):
    """One fragment whose retrievable state changed: the follower re-reads the fragment from
    PostgreSQL, so the row names it and says how, not what it now holds."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    seq = models.BigIntegerField()
    # No foreign key: a deleted fragment's row is the change that removes it from the indexes.
    fragment_id = models.BigIntegerField()
    public_id = models.CharField(max_length=40)
    kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "contexts_change"
        constraints = [models.UniqueConstraint(fields=["org", "seq"], name="one_change_per_seq")]

    def __str__(self) -> str:
        return f"org {self.org_id} #{self.seq}: {self.kind} {self.public_id}"


class Follower(models.Model):
    """Where one node's index follower has got to in one organization's feed: pruning keeps
    every row a follower seen recently still needs, and ``/metrics`` reports the lag."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=200)
    seq = models.BigIntegerField(default=0)
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "contexts_follower"
        constraints = [models.UniqueConstraint(fields=["org", "node"],
                                               name="one_position_per_node")]

    def __str__(self) -> str:
        return f"{self.node} in org {self.org_id} at {self.seq}"
