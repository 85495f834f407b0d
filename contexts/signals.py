"""Derived database structures that follow an organization's lifecycle."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from accounts.models import Organization
from contexts.services.partitions import drop_partition, ensure_partition


@receiver(post_save, sender=Organization)
def create_embedding_partition(sender, instance: Organization, created: bool, **kwargs) -> None:
    if created:
        ensure_partition(instance.pk)


@receiver(post_delete, sender=Organization)
def drop_embedding_partition(sender, instance: Organization, **kwargs) -> None:
    drop_partition(instance.pk)
