"""Background ingestion jobs and their observable progress."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization, PublicIdModel, Scope, tenant_public_id


class JobState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"


# How many created (and updated) fragments a job remembers by id; the counters say how many
# there were in all.
FRAGMENT_IDS_KEPT = 200


class IngestionJob(PublicIdModel):
    """One run of the ingestion pipeline over a directory or a set of uploaded files.

    Progress counters are updated as files complete, so the console and ``GET /api/jobs/{id}``
    show live progress. ``errors`` lists per-file failures with reasons; ``skipped`` lists
    files left out on purpose (binary, vendored, generated, too large) with the reason.
    """

    PUBLIC_ID_PREFIX = "job"
    public_id = tenant_public_id(editable=False)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="jobs")
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="jobs",
                              help_text="home scope of the fragments this job writes",
                              db_constraint=False)
    context = models.ForeignKey("contexts.Context", on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="jobs", db_constraint=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="+",
                              help_text="default owner of new fragments")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    source = models.CharField(max_length=1000, help_text="directory path, or the key prefix of "
                              "the job's files in the uploads storage")
    source_kind = models.CharField(max_length=10, default="path",
                                   choices=[("path", "path"), ("upload", "upload")])
    # In a git work tree a path job reads tracked files only unless this is set
    # (contexts/ingestion/git_tree.py): an untracked file is nobody's published knowledge.
    include_untracked = models.BooleanField(default=False)
    state = models.CharField(max_length=8, choices=JobState.choices, default=JobState.QUEUED)
    files_total = models.PositiveIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0)
    fragments_created = models.PositiveIntegerField(default=0)
    fragments_updated = models.PositiveIntegerField(default=0)
    fragments_unchanged = models.PositiveIntegerField(default=0)
    fragments_retired = models.PositiveIntegerField(default=0)
    duplicates_collapsed = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    skipped = models.JSONField(default=list, blank=True)
    # Files ingested, but not quite as written (e.g. an owner in front matter not honoured).
    warnings = models.JSONField(default=list, blank=True)
    # The public ids of the fragments the job created and updated ({"created": [...],
    # "updated": [...]}, at most FRAGMENT_IDS_KEPT each): the job page links them.
    fragment_ids = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    # Renewed by the worker while the job runs, and set when the job is re-queued: the lease
    # that contexts/services/job_leases.py checks to find jobs whose worker or message is gone.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["org", "public_id"], name="ingestionjob_public_id"),
            # What composite foreign keys to a job refer to (secret findings; tenancy).
            models.UniqueConstraint(fields=["org", "id"], name="ingestionjob_org_key"),
        ]

    def __str__(self) -> str:
        return f"{self.public_id} {self.source} ({self.state})"

    @property
    def error_kind(self) -> str:
        """Why a failed job failed: ``transient`` when the database stayed unavailable past
        the retry budget (``JOB_DATABASE_RETRY_SECONDS``: run it again once PostgreSQL is
        back), ``permanent`` for anything else (its error says what); ``""`` unless failed.
        Shorter outages do not fail a job: it resumes, and a warning says so."""
        if self.state != JobState.FAILED:
            return ""
        own = [e for e in self.errors if isinstance(e, dict) and not e.get("path")]
        return "transient" if own and own[-1].get("kind") == "transient" else "permanent"

    @property
    def progress(self) -> float:
        if self.state == JobState.DONE:
            return 1.0
        return self.files_done / self.files_total if self.files_total else 0.0
