"""Who may read what: organizations, their repositories, personas and sessions, members, scopes
and agent tokens.

Every object a fragment can be scoped to owns exactly one :class:`Scope` row. Fragments, pins,
ACLs and tokens refer to scope ids only, so the visibility rule (``accounts.scopes``) works on one
kind of id everywhere — in PostgreSQL row-level security, in the tantivy filter, in the API.

Public ids (``org_…``, ``repo_…``) are random, stable strings; integer ids never leave the server.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import connection, models, transaction
from django.utils import timezone

from accounts.tenancy import OrgFromParent

SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,62}$",
    "lowercase letters, digits, '-' or '_' (at most 63 characters, starting alphanumeric)",
)
PUBLIC_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_public_id(prefix: str) -> str:
    return prefix + "_" + "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(14))


class PublicIdModel(models.Model):
    """A model with a stable public id of the form ``<prefix>_<14 base32 chars>``."""

    PUBLIC_ID_PREFIX = ""
    public_id = models.CharField(max_length=32, unique=True, editable=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if not self.public_id:
            self.public_id = new_public_id(self.PUBLIC_ID_PREFIX)
        super().save(*args, **kwargs)


class ScopeKind(models.TextChoices):
    ORG = "org", "organization"
    REPO = "repo", "repository"
    PERSONA = "persona", "persona"
    SESSION = "session", "session"
    CONTEXT = "context", "context"


def tenant_public_id(max_length: int = 32, **kwargs) -> models.CharField:
    """A public id in a tenant table: unique with the organization (a ``UniqueConstraint``
    on ``(org, public_id)`` beside it — a distributed database enforces only keys that hold
    the distribution column) and indexed alone for lookups by public id. Across
    organizations it is unique by its randomness (70 bits), not by a constraint."""
    return models.CharField(max_length=max_length, db_index=True, **kwargs)


class Scope(models.Model):
    """One row per organization, repository, persona, session and context.

    ``parent`` makes the hierarchy explicit (org → repo/persona/context, repo → session), so
    "this scope and everything under it" is a walk over one table.
    """

    # An organization's own scope is written before its row (ScopedObject.save takes the id
    # first): the foreign key is checked at commit.
    org = models.ForeignKey("Organization", on_delete=models.CASCADE, related_name="scopes")
    kind = models.CharField(max_length=8, choices=ScopeKind.choices)
    # Foreign keys between tenant tables are composite in the database, (org_id, parent_id)
    # → (org_id, id) (accounts migration 0003; docs/scale-out.md): Django's own single-column
    # constraint is left out (db_constraint=False) and Django still does the cascading.
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="children", db_constraint=False)
    public_id = tenant_public_id(max_length=40)
    label = models.CharField(max_length=200)

    class Meta:
        indexes = [models.Index(fields=["org", "kind"])]
        constraints = [
            models.UniqueConstraint(fields=["org", "id"], name="scope_org_key"),
            models.UniqueConstraint(fields=["org", "public_id"], name="scope_public_id_per_org"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.label}"


class ScopedObject(PublicIdModel):
    """An object that owns a scope row, created with it in one transaction.

    In a tenant table (every subclass but :class:`Organization`) the scope is one per
    ``(org, scope)`` and the public id one per ``(org, public_id)`` — each subclass declares
    those constraints — and the foreign key to the scope is the composite one of the
    migrations."""

    SCOPE_KIND = ScopeKind.ORG
    public_id = tenant_public_id(editable=False)
    scope = models.ForeignKey(Scope, on_delete=models.RESTRICT, editable=False,
                              related_name="+", db_constraint=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        with transaction.atomic():
            if not self.public_id:
                self.public_id = new_public_id(self.PUBLIC_ID_PREFIX)
            adding = self._state.adding and self.pk is None
            if self.scope_id is None:
                self.scope = Scope.objects.create(
                    org_id=self.scope_org_id(), kind=self.SCOPE_KIND,
                    parent=self.scope_parent(), public_id=self.public_id,
                    label=self.scope_label(),
                )
            elif self.scope.label != self.scope_label():
                Scope.objects.filter(pk=self.scope_id).update(label=self.scope_label())
            if adding and self.pk is not None:  # an organization took its id first
                kwargs["force_insert"] = True
            super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        scope_id = self.scope_id
        with transaction.atomic():
            result = super().delete(*args, **kwargs)
            Scope.objects.filter(pk=scope_id).delete()
        return result

    def scope_parent(self) -> Scope | None:
        return None

    def scope_label(self) -> str:
        raise NotImplementedError

    def scope_org(self) -> Organization:
        raise NotImplementedError

    def scope_org_id(self) -> int:
        return self.scope_org().pk


class ProposalPolicy(models.TextChoices):
    """What happens to an agent's proposal for a scope (docs/adr/0017): a tech lead reviews
    it, or it is accepted at once when the proposing token is trusted (``auto_accept``)."""

    REVIEW = "review", "review"
    AUTO_ACCEPT = "auto-accept", "auto-accept (trusted tokens)"


class Organization(ScopedObject):
    """The root of the tenancy: a reference table, not distributed (docs/scale-out.md) — its
    slug and public id are unique across the installation, and every tenant table refers to
    it by ``org_id``."""

    PUBLIC_ID_PREFIX = "org"
    SCOPE_KIND = ScopeKind.ORG
    public_id = models.CharField(max_length=32, unique=True, editable=False)
    # A reference table may not hold a foreign key into a distributed one, so this one has no
    # database constraint; the scope points back with its org_id (NOT NULL, a foreign key).
    scope = models.OneToOneField(Scope, on_delete=models.RESTRICT, editable=False,
                                 related_name="+", db_constraint=False)
    slug = models.SlugField(max_length=63, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    proposal_policy = models.CharField(max_length=12, choices=ProposalPolicy.choices,
                                       default=ProposalPolicy.REVIEW)

    class Meta:
        ordering = ["slug"]
        permissions = [
            ("curate_organization", "Curate fragments in the organization"),
            ("pin_organization", "Pin fragments in the organization"),
            ("administer_organization", "Administer the organization"),
        ]

    def __str__(self) -> str:
        return self.slug

    def scope_label(self) -> str:
        return self.slug

    def scope_org_id(self) -> int:
        """The organization's own id, taken from its sequence before the row is written, so
        that its scope row carries it from the start (org_id is NOT NULL there)."""
        if self.pk is None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))",
                               [self._meta.db_table])
                self.pk = cursor.fetchone()[0]
        return self.pk


class Repository(ScopedObject):
    PUBLIC_ID_PREFIX = "repo"
    SCOPE_KIND = ScopeKind.REPO
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="repositories")
    slug = models.SlugField(max_length=63, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    url = models.CharField(max_length=500, blank=True)
    default_branch = models.CharField(max_length=100, default="main")
    proposal_policy = models.CharField(max_length=12, choices=ProposalPolicy.choices,
                                       default=ProposalPolicy.REVIEW)

    class Meta:
        ordering = ["org__slug", "slug"]
        verbose_name_plural = "repositories"
        constraints = [
            models.UniqueConstraint(fields=["org", "slug"], name="repo_slug_per_org"),
            models.UniqueConstraint(fields=["org", "id"], name="repository_org_key"),
            models.UniqueConstraint(fields=["org", "public_id"], name="repository_public_id"),
            models.UniqueConstraint(fields=["org", "scope"], name="repository_scope"),
        ]
        permissions = [
            ("curate_repository", "Curate fragments in the repository"),
            ("pin_repository", "Pin fragments in the repository"),
            ("administer_repository", "Administer the repository"),
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.slug}"

    def scope_parent(self) -> Scope:
        return self.org.scope

    def scope_org(self) -> Organization:
        return self.org

    def scope_label(self) -> str:
        return f"{self.org.slug}/{self.slug}"


def default_halflives() -> dict:
    return {}


class Persona(ScopedObject):
    """A role agents act in (e.g. backend SRE) with its own ranking weights.

    The weights blend the compose stage's signals:
    ``w_r·relevance + w_f·freshness + w_c·authority + w_p·pinned``.
    """

    PUBLIC_ID_PREFIX = "persona"
    SCOPE_KIND = ScopeKind.PERSONA
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="personas")
    slug = models.SlugField(max_length=63, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    w_r = models.FloatField(default=0.7, validators=[MinValueValidator(0.0)])
    w_f = models.FloatField(default=0.15, validators=[MinValueValidator(0.0)])
    w_c = models.FloatField(default=0.1, validators=[MinValueValidator(0.0)])
    w_p = models.FloatField(default=0.05, validators=[MinValueValidator(0.0)])
    # Per-kind freshness half-lives in days, e.g. {"policy": 365, "default": 90}; missing kinds
    # fall back to settings.FRESHNESS_HALFLIFE_DAYS.
    halflife_days = models.JSONField(default=default_halflives, blank=True)

    class Meta:
        ordering = ["org__slug", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["org", "slug"], name="persona_slug_per_org"),
            models.UniqueConstraint(fields=["org", "id"], name="persona_org_key"),
            models.UniqueConstraint(fields=["org", "public_id"], name="persona_public_id"),
            models.UniqueConstraint(fields=["org", "scope"], name="persona_scope"),
        ]
        permissions = [
            ("curate_persona", "Curate fragments in the persona"),
            ("pin_persona", "Pin fragments in the persona"),
            ("administer_persona", "Administer the persona"),
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.slug}"

    def scope_parent(self) -> Scope:
        return self.org.scope

    def scope_org(self) -> Organization:
        return self.org

    def scope_label(self) -> str:
        return f"{self.org.slug}/persona:{self.slug}"


class Session(ScopedObject):
    """An agent's work session; its fragments are visible only inside it."""

    PUBLIC_ID_PREFIX = "sess"
    SCOPE_KIND = ScopeKind.SESSION
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="sessions")
    repository = models.ForeignKey(Repository, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="sessions", db_constraint=False)
    persona = models.ForeignKey(Persona, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="sessions", db_constraint=False)
    external_id = models.CharField(max_length=120, help_text="e.g. iss_2026-03-19-A91")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Closed by a person (the console's Sessions page): no more writes; its fragments stay.
    closed_at = models.DateTimeField(null=True, blank=True)
    # The agent token that opened it by naming a new session_id in a write (None: created by
    # a person). Such a session expires after CONTEXTS_SESSION_IDLE_MINUTES without a write;
    # composite foreign key (org_id, opened_by_id) → (org_id, id), migration 0005.
    opened_by = models.ForeignKey("ApiToken", on_delete=models.SET_NULL, null=True,
                                  blank=True, related_name="opened_sessions",
                                  db_constraint=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "external_id"], name="session_id_per_org"),
            models.UniqueConstraint(fields=["org", "public_id"], name="session_public_id"),
            models.UniqueConstraint(fields=["org", "scope"], name="session_scope"),
        ]
        permissions = [
            ("curate_session", "Curate fragments in the session"),
            ("pin_session", "Pin fragments in the session"),
            ("administer_session", "Administer the session"),
        ]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.external_id}"

    def scope_parent(self) -> Scope:
        return self.repository.scope if self.repository_id else self.org.scope

    def scope_org(self) -> Organization:
        return self.org

    def scope_label(self) -> str:
        return f"{self.org.slug}/session:{self.external_id}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def state(self) -> str:
        """``closed``, ``expired`` or ``open``: only an open session takes writes."""
        if self.closed_at is not None:
            return "closed"
        return "expired" if self.is_expired else "open"


class Role(models.TextChoices):
    VIEWER = "viewer", "viewer"
    CURATOR = "curator", "curator"
    TECH_LEAD = "tech_lead", "tech lead"
    ADMIN = "admin", "admin"


# What each role may do in its organization; ordered, each role includes the ones before it.
ROLE_ACTIONS: dict[str, frozenset[str]] = {
    Role.VIEWER: frozenset({"view"}),
    Role.CURATOR: frozenset({"view", "curate"}),
    Role.TECH_LEAD: frozenset({"view", "curate", "pin"}),
    Role.ADMIN: frozenset({"view", "curate", "pin", "administer"}),
}


def higher_role(*roles: str | None) -> str | None:
    """The role that allows the most of ``roles`` (None when none is given)."""
    ranked = [role for role in Role.values if role in roles]
    return ranked[-1] if ranked else None


class Membership(models.Model):
    """A person's role in an organization.

    ``role`` is what the person may do, the one value permissions read. It is the higher of
    two grants kept apart (issue 26): ``hand_role``, given in the console (or by a command),
    and ``mapped_role``, given by the single-sign-on group mapping on each login. The mapping
    changes only its own grant, so it never takes away a role an administrator gave by hand;
    a membership with neither grant is deleted.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    hand_role = models.CharField(max_length=16, choices=Role.choices, null=True, blank=True)
    mapped_role = models.CharField(max_length=16, choices=Role.choices, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="one_role_per_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.org} as {self.role}"

    def save(self, *args, **kwargs) -> None:
        if self.hand_role is None and self.mapped_role is None:
            self.hand_role = self.role  # written with a role alone: a grant by hand
        self.role = higher_role(self.hand_role, self.mapped_role)
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "role", "hand_role"}
        super().save(*args, **kwargs)


TOKEN_PREFIX = "ctx"


class ApiToken(PublicIdModel):
    """An agent's credential, bound to a fixed set of scopes; stored hashed, shown once."""

    PUBLIC_ID_PREFIX = "tok"
    public_id = tenant_public_id(editable=False)
    name = models.CharField(max_length=120)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="tokens")
    # Unique with the organization, like the public id; authentication looks it up alone.
    prefix = models.CharField(max_length=16, db_index=True, help_text="visible part of the token")
    secret_hash = models.CharField(max_length=64)
    scopes = models.ManyToManyField(Scope, related_name="tokens", through="TokenScope")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Proposals (docs/adr/0017): may it propose new repository fragments directly (promoting
    # a session fragment needs no flag), and is it trusted where a scope's policy is
    # auto-accept.
    may_propose = models.BooleanField(default=False, help_text="may propose new repository "
                                      "fragments directly")
    auto_accept = models.BooleanField(default=False, help_text="trusted: its proposals are "
                                      "accepted at once where the scope's policy is auto-accept")
    # A personal token (issue 38: scripts of a team): it acts as this member, with their roles
    # in the token's organization only, for as long as they are an active member there. None:
    # an agent's token, bound to its scopes.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                             blank=True, related_name="personal_tokens")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "id"], name="apitoken_org_key"),
            models.UniqueConstraint(fields=["org", "public_id"], name="apitoken_public_id"),
            models.UniqueConstraint(fields=["org", "prefix"], name="apitoken_prefix"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    # DRF treats request.user as a principal; these keep permission code uniform.
    is_authenticated = True
    is_superuser = False
    is_anonymous = False

    @staticmethod
    def split(raw: str) -> tuple[str, str] | None:
        """``ctx_<prefix>_<secret>`` → (prefix, secret), or None when malformed."""
        parts = raw.strip().split("_")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
            return None
        return parts[1], parts[2]


class TokenScope(OrgFromParent):
    """A token's binding to one scope (the table Django created for ``ApiToken.scopes``,
    with the organization added)."""

    ORG_FROM = ("apitoken", "scope")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    apitoken = models.ForeignKey(ApiToken, on_delete=models.CASCADE, related_name="bindings",
                                 db_constraint=False)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="+",
                              db_constraint=False)

    class Meta:
        db_table = "accounts_apitoken_scopes"
        constraints = [models.UniqueConstraint(fields=["org", "apitoken", "scope"],
                                               name="one_token_scope")]

    def __str__(self) -> str:
        return f"{self.apitoken_id} → {self.scope_id}"


class ExternalIdentity(models.Model):
    """An account's identity at an OpenID Connect provider: the provider's issuer and its
    subject for the person, never the e-mail alone (issue 26, ADR 0019).

    Not a tenant table: like the account itself, an identity spans every organization the
    person belongs to. The refresh token is stored sealed (``contexts.sso.oidc``) and
    lets the periodic check ask the provider whether the person is still there.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="external_identities")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    email = models.EmailField(blank=True)
    email_verified = models.BooleanField(default=False)
    groups = models.JSONField(default=list, blank=True)
    sealed_refresh_token = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_login_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    deprovisioned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"],
                                               name="one_account_per_subject")]
        indexes = [models.Index(fields=["checked_at"])]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class VerifiedEmail(models.Model):
    """An account's e-mail address as its owner proved it theirs (security issue 37).

    An address typed by an administrator proves nothing about who reads that mailbox, so it
    is not verified. It becomes verified when the person sets their password through the link
    e-mailed to it (reading the mail proves the mailbox), when the identity provider states
    ``email_verified`` for it at a sign-in, or when the operator records it in the admin
    site. The verification holds for ``email`` only: an account whose address changes is
    unverified again until the new one is proved (``accounts.emails.is_verified``).
    Single sign-on links a first sign-in to an existing account only through such an address.

    Not a tenant table: like the account itself, it spans the person's organizations.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="verified_email")
    email = models.EmailField()
    how = models.CharField(max_length=40, help_text="how the owner proved it: the e-mailed "
                           "set-password link, the identity provider, the operator")
    verified_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.email} ({self.how})"


class InvitationState(models.TextChoices):
    PENDING = "pending", "pending"
    ACCEPTED = "accepted", "accepted"
    DECLINED = "declined", "declined"
    WITHDRAWN = "withdrawn", "withdrawn"


class Invitation(PublicIdModel):
    """An organization administrator's invitation of an existing account (security issue 37):
    the account becomes a member only when its owner accepts it in the console.

    ``identifier`` is what the administrator typed (a username or an e-mail address), the only
    thing their pages show of it. ``user`` is the account it names — none when no account
    matched, so that the administrator's answer and pages read the same either way.
    """

    PUBLIC_ID_PREFIX = "inv"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                             blank=True, related_name="invitations")
    identifier = models.CharField(max_length=254)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    state = models.CharField(max_length=12, choices=InvitationState.choices,
                             default=InvitationState.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"], name="invitation_public_id"),
        ]
        indexes = [models.Index(fields=["user", "state"])]

    def __str__(self) -> str:
        return f"{self.identifier} to {self.org} as {self.role} ({self.state})"
