"""Derived database structures that follow an organization's lifecycle."""

import logging

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from accounts.models import Organization
from contexts.governance import source_nudges
from contexts.indexes import follower
from contexts.ingestion.upstream import source_nudge
from contexts.services.change_feed import changes_committed
from contexts.services.fragments import fragments_changed
from contexts.services.partitions import drop_partition, ensure_partition
from contexts.tasks import reindex

logger = logging.getLogger(__name__)


@receiver(post_save, sender=Organization)
def create_derived_structures(sender, instance: Organization, created: bool, **kwargs) -> None:
    if created:
        ensure_partition(instance.pk)
        # Until this transaction ends, no follower takes the directory below for a deleted
        # organization's (an import keeps it open while it embeds).
        follower.hold_while_creating(instance.pk)
        # An empty lexical index from the start on this node (the other nodes' followers make
        # theirs): a missing one then always means a fault that retrieval reports (degraded)
        # and the follower repairs, never "no fragments yet".
        follower.catch_up(instance.pk)


@receiver(post_delete, sender=Organization)
def drop_embedding_partition(sender, instance: Organization, **kwargs) -> None:
    drop_partition(instance.pk)


@receiver(fragments_changed)
def follow_fragment_changes(sender, fragment_ids: list[int], indexed: bool = False,
                            **kwargs) -> None:
    """Vectors follow every change; the worker computes them. (The text follows the change
    feed: :func:`apply_own_changes` here, every node's follower elsewhere.)

    ``indexed``: the sender (ingestion) already embedded these fragments."""
    if indexed:
        return
    # The signal is sent once the change has committed (services.fragments), so the worker
    # never reads the fragments before they exist.
    try:
        reindex.delay(fragment_ids)
    except Exception:  # noqa: BLE001 - the change is committed; the index can be rebuilt
        logger.exception("could not queue reindexing of %d fragments", len(fragment_ids))


@receiver(changes_committed)
def apply_own_changes(sender, org_ids: list[int], **kwargs) -> None:
    """Read-your-writes: a process on a node that keeps an index applies the changes it has
    just committed before answering (the node's follower would within its interval)."""
    for org_id in org_ids:
        try:
            follower.catch_up(org_id)
        except Exception:  # noqa: BLE001 - committed; the node's follower applies it anyway
            logger.exception("could not apply the committed changes of org %s", org_id)



@receiver(source_nudge, dispatch_uid="governance.source_nudges")
def follow_upstream(sender, **kwargs) -> None:
    """A person's edit meeting its source file opens (or settles) a nudge, inside the sync's
    transaction (contexts/ingestion/upstream.py → contexts/governance/source_nudges.py)."""
    source_nudges.follow_source(sender, **kwargs)
