"""Contexts: named bundles of fragments in a scope, which other scopes may subscribe to."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import SLUG_VALIDATOR, Organization, Scope, ScopedObject, ScopeKind
from accounts.tenancy import OrgFromParent


class Context(ScopedObject):
    """A named bundle (e.g. "payments runbooks") defined in a home scope.

    It owns a scope row of kind ``context``: its fragments carry that scope id, so a subscriber
    reads exactly the bundle and nothing else of the publisher's scope.
    """

    PUBLIC_ID_PREFIX = "cx"
    SCOPE_KIND = ScopeKind.CONTEXT
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="contexts")
    home = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="defined_contexts",
                             db_constraint=False)
    slug = models.SlugField(max_length=63, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owners = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True,
                                    related_name="owned_contexts",
                                    through="contexts.ContextOwner")
    published = models.BooleanField(default=False,
                                    help_text="other scopes may subscribe to a published context")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["org__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["org", "slug"], name="context_slug_per_org"),
            models.UniqueConstraint(fields=["org", "id"], name="context_org_key"),
            models.UniqueConstraint(fields=["org", "public_id"], name="context_public_id"),
            models.UniqueConstraint(fields=["org", "scope"], name="context_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.slug}"

    def scope_parent(self) -> Scope:
        return self.home

    def scope_org(self) -> Organization:
        return self.org

    def scope_label(self) -> str:
        return f"{self.org.slug}/context:{self.slug}"


class ContextOwner(OrgFromParent):
    """One owner of a context (the table Django created for ``Context.owners``, with the
    organization added)."""

    ORG_FROM = ("context",)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    context = models.ForeignKey(Context, on_delete=models.CASCADE, related_name="ownerships",
                                db_constraint=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")

    class Meta:
        db_table = "contexts_context_owners"
        constraints = [models.UniqueConstraint(fields=["org", "context", "user"],
                                               name="one_context_owner")]

    def __str__(self) -> str:
        return f"{self.user_id} owns {self.context_id}"


class ContextSubscription(OrgFromParent):
    """``subscriber`` reads ``context`` without copying it (only while it is published).

    The row belongs to the subscriber's organization. The context may be another
    organization's (subscribed across organizations, ``accounts.scopes``): the one reference
    between tenants, so it has no database constraint — a distributed database cannot check a
    foreign key across organizations (docs/scale-out.md) — and Django's cascade removes the
    subscriptions of a deleted context."""

    ORG_FROM = ("subscriber",)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    context = models.ForeignKey(Context, on_delete=models.CASCADE, related_name="subscriptions",
                                db_constraint=False)
    subscriber = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="subscriptions",
                                   db_constraint=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "context", "subscriber"],
                                    name="one_subscription")
        ]

    def __str__(self) -> str:
        return f"{self.subscriber} ← {self.context}"
