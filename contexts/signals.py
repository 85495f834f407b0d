"""Derived database structures that follow an organization's lifecycle."""

import logging

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from accounts.models import Organization
from contexts.indexing import index_path
from contexts.search import open_index
from contexts.services.fragments import fragments_changed
from contexts.services.partitions import drop_partition, ensure_partition
from contexts.tasks import reindex

logger = logging.getLogger(__name__)


@receiver(post_save, sender=Organization)
def create_derived_structures(sender, instance: Organization, created: bool, **kwargs) -> None:
    if created:
        ensure_partition(instance.pk)
        # An empty lexical index from the start: a missing one then always means a fault that
        # retrieval reports (degraded) and rebuild_index repairs, never "no fragments yet".
        open_index(index_path(instance))


@receiver(post_delete, sender=Organization)
def drop_embedding_partition(sender, instance: Organization, **kwargs) -> None:
    drop_partition(instance.pk)


@receiver(fragments_changed)
def follow_fragment_changes(sender, fragment_ids: list[int], indexed: bool = False,
                            **kwargs) -> None:
    """Derived indexes follow every change; the worker does the work (the one index writer).

    ``indexed``: the sender (ingestion) already embedded and indexed these fragments."""
    if indexed:
        return
    # The signal is sent once the change has committed (services.fragments), so the worker
    # never reads the fragments before they exist.
    try:
        reindex.delay(fragment_ids)
    except Exception:  # noqa: BLE001 - the change is committed; the index can be rebuilt
        logger.exception("could not queue reindexing of %d fragments", len(fragment_ids))
