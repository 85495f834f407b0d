"""Uploaded zips are read without trusting them (contexts/ingestion/archives.py): every hostile
archive is refused with its reason before anything is written — through the archive reader,
the use case and ``POST /api/sources`` (400 naming ``files``) — and leaves no job, fragment,
stored upload or audit event behind."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from contexts.ingestion import archives
from contexts.ingestion.archives import Limits, open_archive
from contexts.ingestion.doc_exports import CONFLUENCE, NOTION, PLAIN, detect_layout
from contexts.models import Fragment, IngestionJob, SourceDocument, UploadBlob
from contexts.models.audit import AuditEvent
from contexts.services.errors import InvalidOperation
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource
from tests.ingestion import doc_export_samples as samples

LIMITS = Limits(max_bytes=2_000_000, max_files=50, max_ratio=100)

# (archive, the error class, words of the reason): each is refused whatever its layout.
HOSTILE = {
    "parent": (lambda: samples.with_names(["../x.md"]), archives.UnsafeName, "'..'"),
    "deep parent": (lambda: samples.with_names(["docs/../../x.md"]), archives.UnsafeName,
                    "'..'"),
    "absolute": (lambda: samples.with_names(["/etc/x"]), archives.UnsafeName, "absolute"),
    "backslashes": (lambda: samples.with_names(["a\\..\\b"]), archives.UnsafeName,
                    "backslash"),
    "drive letter": (lambda: samples.with_names(["C:/x.md"]), archives.UnsafeName, "drive"),
    "NUL": (samples.with_nul_name, archives.UnsafeName, "control character"),
    "symlink": (samples.with_symlink, archives.LinkMember, "symbolic link"),
    "bomb (ratio)": (lambda: samples.bomb(1_500_000), archives.CompressionRatio,
                     "expands"),
    "too many files": (lambda: samples.many_files(51), archives.TooManyFiles, "more than 50"),
    "not a zip": (lambda: b"# Meeting notes\n\nnot an archive at all\n", archives.NotAZip,
                  "not a zip"),
    "truncated zip": (lambda: samples.bomb(10_000)[:60], archives.NotAZip, "not a readable"),
}


@pytest.fixture
def bounds(settings):
    settings.ARCHIVE_MAX_BYTES = LIMITS.max_bytes
    settings.ARCHIVE_MAX_FILES = LIMITS.max_files
    settings.ARCHIVE_MAX_RATIO = LIMITS.max_ratio
    return LIMITS


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_it_refuses_a_hostile_archive_naming_the_reason(case):
    build, error, words = HOSTILE[case]
    with pytest.raises(error) as refused:
        open_archive(build(), limits=LIMITS)
    assert words in str(refused.value)


def test_it_refuses_members_larger_than_the_bound_uncompressed_whatever_the_ratio():
    lenient = Limits(max_bytes=2_000_000, max_files=50, max_ratio=10**9)
    raw = samples.bomb(3_000_000)
    assert len(raw) < 100_000  # small on the wire
    with pytest.raises(archives.TooLarge, match="2 MB uncompressed"):
        open_archive(raw, limits=lenient)
    with pytest.raises(archives.TooLarge, match="archive larger"):
        open_archive(raw, limits=Limits(max_bytes=len(raw) - 1, max_files=50, max_ratio=10**9))


def test_a_member_bigger_than_its_header_says_is_refused_when_read():
    raw = samples.understated(b"a" * 200_000, declared=1_000)
    archive = open_archive(raw, limits=LIMITS)  # the directory looks harmless
    with pytest.raises(archives.UnreadableMember) as refused:
        archive.verify(["page.md"])
    assert refused.value.member == "page.md"


def test_ordinary_text_compresses_well_below_the_ratio_and_is_read(sources):
    raw = samples.zip_bytes({f"docs/{i}.md": f"# Page {i}\n\n{sources.prose(i, 3000)}\n"
                             for i in range(3)})
    archive = open_archive(raw, limits=LIMITS)
    assert [m.name for m in archive.members] == ["docs/0.md", "docs/1.md", "docs/2.md"]
    assert archive.read("docs/1.md").startswith(b"# Page 1")


def test_the_layout_is_told_by_the_member_names(sources):
    def names(raw: bytes) -> list[str]:
        return [m.name for m in open_archive(raw, limits=LIMITS).members]

    assert detect_layout(names(samples.confluence_export(sources.prose))) == CONFLUENCE
    assert detect_layout(names(samples.notion_export(sources.prose))) == NOTION
    assert detect_layout(["docs/index.html", "docs/guide.md", "notes.txt"]) == PLAIN


# -- nothing is written: the use case and the API ---------------------------------------------
def nothing_written(target) -> bool:
    return not (IngestionJob.objects.exists() or Fragment.objects.exists()
                or SourceDocument.objects.exists() or UploadBlob.objects.exists()
                or AuditEvent.objects.filter(action="job.create").exists())


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_the_api_answers_400_naming_files_and_writes_nothing(case, ingest_target, bounds):
    t = ingest_target
    build, _, words = HOSTILE[case]
    api = APIClient()
    api.force_authenticate(t.creator)
    upload = SimpleUploadedFile("export.zip", build())
    note = SimpleUploadedFile("note.md", b"# Note\n\nA good file beside the bad archive.\n")
    response = api.post("/api/sources", {"org_id": t.org.slug, "repo_id": t.repo.slug,
                                         "files": [note, upload]}, format="multipart")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["field"] == "files"
    assert "export.zip: archive refused" in error["message"] and words in error["message"]
    assert nothing_written(t)


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["parent", "symlink", "bomb (ratio)", "not a zip"])
def test_the_use_case_refuses_before_the_job_exists(case, ingest_target, bounds):
    t = ingest_target
    upload = SimpleUploadedFile("export.zip", HOSTILE[case][0]())
    with pytest.raises(InvalidOperation) as refused:
        ingestion.submit(SYSTEM, SubmitSource(scope=t.repo.scope, files=[upload]))
    assert refused.value.field == "files"
    assert nothing_written(t)


@pytest.mark.django_db
def test_an_archive_over_the_upload_bound_is_refused_by_its_size(ingest_target, bounds):
    t = ingest_target
    api = APIClient()
    api.force_authenticate(t.creator)
    upload = SimpleUploadedFile("export.zip", samples.many_files(1) + b"\0" * LIMITS.max_bytes)
    response = api.post("/api/sources", {"org_id": t.org.slug, "files": [upload]},
                        format="multipart")
    assert response.status_code == 400 and response.json()["error"]["field"] == "files"
    assert "larger than 2 MB" in response.json()["error"]["message"]
    assert nothing_written(t)
