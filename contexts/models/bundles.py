"""Contexts: named bundles of fragments in a scope, which other scopes may subscribe to."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import SLUG_VALIDATOR, Organization, Scope, ScopedObject, ScopeKind


class Context(ScopedObject):
    """A named bundle (e.g. "payments runbooks") defined in a home scope.

    It owns a scope row of kind ``context``: its fragments carry that scope id, so a subscriber
    reads exactly the bundle and nothing else of the publisher's scope.
    """

    PUBLIC_ID_PREFIX = "cx"
    SCOPE_KIND = ScopeKind.CONTEXT
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="contexts")
    home = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="defined_contexts")
    slug = models.SlugField(max_length=63, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owners = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True,
                                    related_name="owned_contexts")
    published = models.BooleanField(default=False,
                                    help_text="other scopes may subscribe to a published context")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["org", "slug"], name="context_slug_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.slug}"

    def scope_parent(self) -> Scope:
        return self.home

    def scope_org(self) -> Organization:
        return self.org

    def scope_label(self) -> str:
        return f"{self.org.slug}/context:{self.slug}"


class ContextSubscription(models.Model):
    """``subscriber`` reads ``context`` without copying it (only while it is published)."""

    context = models.ForeignKey(Context, on_delete=models.CASCADE, related_name="subscriptions")
    subscriber = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="subscriptions")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["context", "subscriber"], name="one_subscription")
        ]

    def __str__(self) -> str:
        return f"{self.subscriber} ← {self.context}"
