"""Where fragments come from: source documents and the pointers into them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Organization, Repository
from accounts.tenancy import OrgFromParent


class FragmentOrigin(models.TextChoices):
    """Where a fragment came from, as every answer's ``source.kind`` says it (docs/api.md): a file
    (read from a folder or an upload), a git source's file, a file of an uploaded archive — or,
    for a fragment no file brought, where it was written: by a person (the console, or a
    member's script), in an agent's session, or as an approved proposal."""

    FILE = "file", "a file"
    GIT = "git", "a git source's file"
    ARCHIVE = "archive", "a file of an uploaded archive"
    CONSOLE = "console", "written by a person"
    SESSION = "session", "written in a session"
    PROPOSAL = "proposal", "an approved proposal"


def document_origin(origin: str, commit: str | None) -> str:
    """The :class:`FragmentOrigin` of a document's fragments, from what brought the document
    (``SourceDocument.origin``: ``git:…``, ``archive:…``, ``path:…``, ``upload:…``)."""
    if origin.startswith("git:") or commit:
        return FragmentOrigin.GIT
    if origin.startswith("archive:"):
        return FragmentOrigin.ARCHIVE
    return FragmentOrigin.FILE


def written_origin(scope_kind: str, proposal_id: str | None) -> str:
    """The :class:`FragmentOrigin` of a fragment no file brought."""
    if proposal_id:
        return FragmentOrigin.PROPOSAL
    if scope_kind == "session":
        return FragmentOrigin.SESSION
    return FragmentOrigin.CONSOLE


class SourceDocument(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="documents")
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, null=True, blank=True,
                                   related_name="documents", db_constraint=False)
    path = models.CharField(max_length=1000)
    language = models.CharField(max_length=32, blank=True)
    author = models.CharField(max_length=200, blank=True)
    authored_at = models.DateTimeField(null=True, blank=True)
    content_hash = models.CharField(max_length=64)
    size_bytes = models.PositiveIntegerField(default=0)
    ingested_at = models.DateTimeField(default=timezone.now)
    changed_at = models.DateTimeField(null=True, blank=True,
                                      help_text="when the content last differed from before")
    links = models.JSONField(default=list, blank=True, help_text="link targets in the text")
    front_links = models.JSONField(default=list, blank=True,
                                   help_text="link targets from front matter")
    # A git source's document (contexts.models.sources_git): the commit its content was last
    # read at — the commit its citations' permalinks name. None for every other document.
    source_commit = models.CharField(max_length=64, null=True, blank=True)
    # Which source brought it (issue 38): ``git:<source public id>``, ``path:<root>``,
    # ``upload:<name>``, ``archive:<name>``. A job or sync retires only its own documents.
    origin = models.CharField(max_length=1100, blank=True, default="", db_index=True)
    # Who the repository says owns it (contexts/ingestion/owners.py), re-resolved at every
    # ingest and sync: the member, and from what — CODEOWNERS, front matter, git history, the
    # scope's tech lead. Its fragments follow unless a person chose their owner.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="+")
    owner_source = models.CharField(max_length=16, blank=True, default="")
    declared_owner = models.CharField(max_length=150, blank=True, default="",
                                      help_text="the front matter's owner: as written")

    class Meta:
        ordering = ["path"]
        constraints = [
            models.UniqueConstraint(fields=["org", "repository", "path"],
                                    name="one_document_per_path",
                                    nulls_distinct=False),
            models.UniqueConstraint(fields=["org", "id"], name="sourcedocument_org_key"),
        ]

    def __str__(self) -> str:
        return self.path


class SourcePointer(OrgFromParent):
    """Fragment ↔ document at an anchor; a deduplicated fragment keeps one per source."""

    ORG_FROM = ("document", "fragment")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                            db_index=False, editable=False)  # the unique key leads
    fragment = models.ForeignKey("contexts.Fragment", on_delete=models.CASCADE,
                                 related_name="sources", db_constraint=False)
    document = models.ForeignKey(SourceDocument, on_delete=models.CASCADE,
                                 related_name="pointers", db_constraint=False)
    anchor = models.CharField(max_length=500)
    start_line = models.PositiveIntegerField(null=True, blank=True)
    end_line = models.PositiveIntegerField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, blank=True,
                                    help_text="hash of the chunk text at this anchor")
    # The source text the fragment was last written from (the base of a three-way merge when a
    # person has edited the fragment since), and the commit it was read at.
    base_text = models.TextField(blank=True, default="")
    base_commit = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["document__path", "start_line"]
        constraints = [
            models.UniqueConstraint(fields=["org", "document", "anchor"],
                                    name="one_pointer_per_anchor")
        ]

    def __str__(self) -> str:
        return f"{self.document.path}#{self.anchor}"
