"""Sources Contexts follows: a git repository (any URL git can clone, or a local path) whose
branch is kept in sync, by commit, with one repository scope (``docs/sources.md``).

The sync itself is ``contexts.ingestion.git_sync``; this row is its state: the commit applied
last, when it ran and runs next, whether it is failing and why, and what it holds. A tenant
table (``org_id`` NOT NULL, its keys with the organization, composite foreign keys — migration
0031). Retrieval reads one column of it, the permalink template, under row-level security.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from accounts.models import Organization, PublicIdModel, Repository, tenant_public_id


class SourceKind(models.TextChoices):
    GIT = "git", "git repository"


class SourceState(models.TextChoices):
    IDLE = "idle", "idle"
    SYNCING = "syncing", "syncing"
    FAILING = "failing", "failing"


# The placeholders a permalink template may use (``Source.permalink``).
PERMALINK_FIELDS = ("commit", "path", "start_line", "end_line")
MIN_INTERVAL_SECONDS = 60


class Source(PublicIdModel):
    PUBLIC_ID_PREFIX = "src"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="sources")
    # The repository scope its files are ingested into; one source per repository, since a
    # sync reconciles the repository's documents with the branch's tree. Composite foreign
    # key (org_id, repository_id) → (org_id, id), migration 0031.
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE,
                                   related_name="sources", db_constraint=False)
    kind = models.CharField(max_length=8, choices=SourceKind.choices, default=SourceKind.GIT)
    url = models.CharField(max_length=1000, help_text="a local path or any URL git can clone")
    branch = models.CharField(max_length=255, default="main")
    include = models.JSONField(default=list, blank=True,
                               help_text="gitignore-style patterns; empty: every file")
    exclude = models.JSONField(default=list, blank=True,
                               help_text="gitignore-style patterns left out")
    interval_seconds = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(MIN_INTERVAL_SECONDS)])
    web_url_template = models.CharField(
        max_length=1000, blank=True,
        help_text="a permalink per citation, e.g. "
                  "https://github.com/o/r/blob/{commit}/{path}#L{start_line}-L{end_line}")
    last_commit = models.CharField(max_length=64, blank=True,
                                   help_text="the commit applied completely, last")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    next_sync_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    state = models.CharField(max_length=8, choices=SourceState.choices,
                             default=SourceState.IDLE)
    last_error = models.TextField(blank=True)
    # What the last sync did: commit, added, modified, deleted, renamed, fragments, seconds.
    last_summary = models.JSONField(default=dict, blank=True)
    files_count = models.PositiveIntegerField(default=0)
    fragments_count = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"], name="source_public_id"),
            models.UniqueConstraint(fields=["org", "id"], name="source_org_key"),
            models.UniqueConstraint(fields=["org", "repository"],
                                    name="one_source_per_repository"),
        ]
        indexes = [models.Index(fields=["next_sync_at"], name="source_next_sync")]

    def __str__(self) -> str:
        return f"{self.public_id} {self.kind} {self.display_url} ({self.branch})"

    @property
    def display_url(self) -> str:
        return redact_url(self.url)

    @property
    def interval(self) -> dt.timedelta:
        return dt.timedelta(seconds=max(self.interval_seconds, MIN_INTERVAL_SECONDS))

    def permalink(self, commit: str | None, path: str, start_line: int | None,
                  end_line: int | None) -> str | None:
        return permalink(self.web_url_template, commit, path, start_line, end_line)


def permalink(template: str | None, commit: str | None, path: str, start_line: int | None,
              end_line: int | None) -> str | None:
    """The template filled in for one citation, or None without a template or a commit (a
    document not read from the source). A template naming another field is refused when the
    source is added (``contexts.usecases.sources``); here it would give None, not an error."""
    if not template or not commit:
        return None
    try:
        return template.format(commit=commit, path=path,
                               start_line=start_line if start_line is not None else 1,
                               end_line=end_line if end_line is not None else start_line or 1)
    except (KeyError, IndexError, ValueError, AttributeError):
        return None


def redact_url(url: str) -> str:
    """``url`` with the password of its user part — between ``:`` and ``@`` after the
    scheme — replaced by ``***``, a user part with no password by ``***`` (shown on pages,
    in logs and errors)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    if "@" not in authority:
        return url
    userinfo, _, host = authority.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user + ':***' if ':' in userinfo else '***'}@{host}{slash}{path}"
