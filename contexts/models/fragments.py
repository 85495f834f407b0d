"""Fragments — the unit of knowledge — and what hangs directly off them."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils import timezone

from accounts.models import Organization, Scope, tenant_public_id
from accounts.tenancy import OrgFromParent
from contexts.kernel.compression import packed_tokens


class FragmentKind(models.TextChoices):
    PROSE = "prose", "prose"
    CODE = "code", "code"
    ADR = "adr", "ADR"
    RUNBOOK = "runbook", "runbook"
    POLICY = "policy", "policy"
    NEGATIVE = "negative", "negative context"
    SESSION_SUMMARY = "session-summary", "session summary"
    TEST = "test", "test code"  # ingestion's default for test files (contexts/ingestion/policy.py)


class FragmentStatus(models.TextChoices):
    ACTIVE = "active", "active"
    RETIRED = "retired", "retired"
    SUPERSEDED = "superseded", "superseded"


class FragmentSourceState(models.TextChoices):
    """How a fragment a source file brought stands against that file (issue 38, ADR 0020).

    Empty for a fragment no file brought (written in the console, proposed, a session note)."""

    IN_SYNC = "in_sync", "in sync"  # its text is the file's (or a person's, merged in cleanly)
    MERGED = "merged", "merged"  # a person's edit and an upstream change merged three-way
    CONFLICT = "conflict", "conflict"  # they overlap: the person's text is served, owner asked
    GONE = "gone", "gone"  # its source text was deleted; kept because a person edited it


class EvidenceState(models.TextChoices):
    CURRENT = "current", "current"
    CHANGED = "changed", "changed"
    MISSING = "missing", "missing"


class Namespace(models.TextChoices):
    PROSE = "prose", "prose"
    CODE = "code", "code"


def fragment_public_id(uid: uuid.UUID) -> str:
    return f"frag_{uid.hex[:20]}"


class Fragment(models.Model):
    """A small, owned, versioned piece of knowledge living in one home scope.

    ``scope_ids`` is the denormalized set of scope ids the fragment is visible in (its home scope
    plus the scopes of the contexts it belongs to). Row-level security and the lexical index
    filter on it; :mod:`contexts.services.fragments` keeps it in step.
    """

    # Unique with the organization (as every key of a tenant table), indexed alone.
    uid = models.UUIDField(default=uuid.uuid4, editable=False, db_index=True,
                           help_text="UUID5 of source + anchor for ingested fragments")
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="fragments")
    # RESTRICT, not PROTECT: deleting the organization deletes both, deleting a scope alone
    # with fragments in it is refused. Foreign keys between tenant tables are composite in the
    # database, (org_id, scope_id) → (org_id, id) (migration 0024, docs/scale-out.md):
    # Django's single-column constraint is left out, Django still does the on_delete part.
    scope = models.ForeignKey(Scope, on_delete=models.RESTRICT, related_name="fragments",
                              db_constraint=False)
    scope_ids = ArrayField(models.IntegerField(), default=list)
    contexts = models.ManyToManyField("contexts.Context", blank=True, related_name="fragments",
                                      through="contexts.FragmentContext")

    kind = models.CharField(max_length=20, choices=FragmentKind.choices,
                            default=FragmentKind.PROSE)
    namespace = models.CharField(max_length=8, choices=Namespace.choices,
                                 default=Namespace.PROSE)
    negative = models.BooleanField(default=False, help_text="a known anti-pattern or trap")
    title = models.CharField(max_length=300, blank=True)
    heading_path = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    body = models.TextField()
    language = models.CharField(max_length=32, blank=True)
    natural_language = models.CharField(max_length=8, blank=True)
    symbol = models.CharField(max_length=300, blank=True)
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True,
                      help_text="labels people give it (the console's New fragment form)")
    token_count = models.PositiveIntegerField(default=0)
    packed_tokens = models.PositiveIntegerField(
        null=True, blank=True, editable=False,
        help_text="tokens of the text a bundle carries (contexts.kernel.compression); set on save")
    content_hash = models.CharField(max_length=64, db_index=True)
    simhash = models.BigIntegerField(null=True, blank=True, db_index=True)
    chunker_version = models.CharField(max_length=32, blank=True)
    version = models.PositiveIntegerField(default=1)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="owned_fragments")
    status = models.CharField(max_length=12, choices=FragmentStatus.choices,
                              default=FragmentStatus.ACTIVE, db_index=True)
    superseded_by = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="supersedes", db_constraint=False)
    # Bitemporal: valid_* is when the knowledge held in the world, recorded_at when we learnt it.
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    last_edited_at = models.DateTimeField(default=timezone.now)
    verified_at = models.DateTimeField(null=True, blank=True)
    verified_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                    null=True, blank=True, related_name="+")
    # Curation on a living codebase (issue 38): where the fragment stands against the file
    # that brought it, whether its owner was chosen by a person (then no file overrides it),
    # and what its text rests on — [{ref, kind, path, symbol, fragment, hash, commit, state}],
    # with the paths alone in ``evidence_paths`` so a sync finds the fragments it touches.
    source_state = models.CharField(max_length=10, choices=FragmentSourceState.choices, blank=True,
                                    default="")
    owner_set_by_person = models.BooleanField(default=False)
    evidence = models.JSONField(default=list, blank=True)
    evidence_paths = ArrayField(models.CharField(max_length=1000), default=list, blank=True)
    evidence_state = models.CharField(max_length=10, choices=EvidenceState.choices, blank=True,
                                      default="")

    retrieved_count = models.PositiveIntegerField(default=0)
    cited_count = models.PositiveIntegerField(default=0)
    helped_count = models.PositiveIntegerField(default=0)
    hurt_count = models.PositiveIntegerField(default=0)
    last_retrieved_at = models.DateTimeField(null=True, blank=True)
    authority = models.FloatField(default=0.0, help_text="PageRank over the citation graph, 0–1")

    class Meta:
        ordering = ["-last_edited_at"]
        indexes = [
            GinIndex(fields=["scope_ids"], name="fragment_scope_ids_gin"),
            models.Index(fields=["org", "status", "kind"]),
            models.Index(fields=["owner", "status"]),
            GinIndex(fields=["evidence_paths"], name="fragment_evidence_paths_gin"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["org", "id"], name="fragment_org_key"),
            models.UniqueConstraint(fields=["org", "uid"], name="fragment_uid"),
            models.UniqueConstraint(fields=["org", "public_id"], name="fragment_public_id"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.title[:60]}"

    def save(self, *args, **kwargs) -> None:
        if not self.public_id:
            self.public_id = fragment_public_id(self.uid)
        update_fields = kwargs.get("update_fields")
        if update_fields is None or {"body", "heading_path"} & set(update_fields):
            # Counted here, where every body is written, so retrieval need not count it.
            self.packed_tokens = packed_tokens(self.body, self.heading_path)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "packed_tokens"}
        super().save(*args, **kwargs)

    @property
    def is_retrievable(self) -> bool:
        return self.status == FragmentStatus.ACTIVE


class ImmutableModel(models.Model):
    """Rows written once; a database trigger refuses UPDATE as well (see migration 0002)."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not self._state.adding:
            raise ValueError(f"{type(self).__name__} rows are immutable")
        super().save(*args, **kwargs)


class FragmentContext(OrgFromParent):
    """A fragment's membership of a context (the table Django created for
    ``Fragment.contexts``, with the organization added)."""

    ORG_FROM = ("fragment", "context")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    fragment = models.ForeignKey(Fragment, on_delete=models.CASCADE, related_name="+",
                                 db_constraint=False)
    context = models.ForeignKey("contexts.Context", on_delete=models.CASCADE, related_name="+",
                                db_constraint=False)

    class Meta:
        db_table = "contexts_fragment_contexts"
        constraints = [models.UniqueConstraint(fields=["org", "fragment", "context"],
                                               name="one_fragment_context")]

    def __str__(self) -> str:
        return f"{self.fragment_id} in {self.context_id}"


class FragmentVersion(OrgFromParent, ImmutableModel):
    ORG_FROM = ("fragment",)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    fragment = models.ForeignKey(Fragment, on_delete=models.CASCADE, related_name="versions",
                                 db_constraint=False)
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=300, blank=True)
    body = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    editor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                               blank=True, related_name="+")
    reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["fragment", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["org", "fragment", "number"],
                                    name="one_version_number")
        ]

    def __str__(self) -> str:
        return f"{self.fragment.public_id} v{self.number}"


class Pin(OrgFromParent):
    """Puts a fragment at the top of a scope's retrievals, in ``position`` order."""

    ORG_FROM = ("fragment", "scope")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    fragment = models.ForeignKey(Fragment, on_delete=models.CASCADE, related_name="pins",
                                 db_constraint=False)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="pins",
                              db_constraint=False)
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                  null=True, blank=True, related_name="+")
    reason = models.CharField(max_length=300, blank=True)
    position = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["scope", "position", "created_at"]
        constraints = [models.UniqueConstraint(fields=["org", "fragment", "scope"],
                                               name="one_pin")]

    def __str__(self) -> str:
        return f"pin {self.fragment.public_id} in {self.scope}"

    @property
    def is_active(self) -> bool:
        return self.expires_at is None or self.expires_at > timezone.now()


class LinkKind(models.TextChoices):
    FRONT_MATTER = "front-matter", "front-matter link"
    MARKDOWN = "markdown", "Markdown link"
    REFERENCE = "reference", "reference"
    SUPERSEDES = "supersedes", "supersedes"


class Link(OrgFromParent):
    """A citation edge: ``source`` cites ``target``; authority is computed over these."""

    ORG_FROM = ("source", "target")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    source = models.ForeignKey(Fragment, on_delete=models.CASCADE, related_name="links_out",
                               db_constraint=False)
    target = models.ForeignKey(Fragment, on_delete=models.CASCADE, related_name="links_in",
                               db_constraint=False)
    kind = models.CharField(max_length=16, choices=LinkKind.choices, default=LinkKind.REFERENCE)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "source", "target", "kind"],
                                    name="one_link")
        ]

    def __str__(self) -> str:
        return f"{self.source.public_id} → {self.target.public_id}"
