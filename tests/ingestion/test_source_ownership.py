"""Each source owns what it brought (issue 38, item 2).

A folder (path job), an upload, an archive and a git source each own the documents they bring
into a scope (``SourceDocument.origin``). A job or a sync retires only documents of its own
source that are gone — never another source's. Before, a path job treated its folder as the
whole of the repository: ``manage.py ingest PATH --org ORG --repo REPO`` of a three-file folder
into a repository holding other fragments printed "3 created … N retired".

Everything here runs the real jobs and syncs (``ingestion.submit`` + ``run_inline``, the worker's
``run_job``; ``git_sync.run_sync`` against a ``git init`` repository) into real PostgreSQL.
"""

from __future__ import annotations

import importlib
import io
import shutil
import zipfile
from pathlib import Path

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from accounts.permissions import SYSTEM
from contexts.ingestion.git_sync import run_sync
from contexts.models import Fragment, FragmentStatus, IngestionJob, SourceDocument
from contexts.usecases import ingestion
from contexts.usecases.ingestion import SubmitSource
from contexts.usecases.sources import AddGitSource, add_source
from tests.connectors.conftest import GIT_IDENTITY, GitRepo
from tests.ingestion.conftest import prose

pytestmark = pytest.mark.django_db


def note(seed: str) -> str:
    """A small Markdown note: one fragment, distinct from every other seed's."""
    return f"# Note {seed}\n\n{prose(seed, 60)}\n"


def notes(prefix: str, count: int = 2) -> dict[str, str]:
    return {f"{prefix}/note-{i}.md": note(f"{prefix}-{i}") for i in range(count)}


class Sources:
    """The four kinds of source, each run for real into the same repository."""

    def __init__(self, target, tmp_path: Path, monkeypatch) -> None:
        self.t = target
        self.tmp = tmp_path
        for name, value in GIT_IDENTITY.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))

    def folder(self, name: str, files: dict[str, str]) -> Path:
        root = self.tmp / name
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    def run_folder(self, root: Path) -> IngestionJob:
        return self._run(SubmitSource(scope=self.t.repo.scope, path=str(root)))

    def upload(self, files: dict[str, str]) -> IngestionJob:
        return self._run(SubmitSource(scope=self.t.repo.scope, files=[
            SimpleUploadedFile(name, text.encode()) for name, text in files.items()]))

    def archive(self, name: str, files: dict[str, str]) -> IngestionJob:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for rel, text in files.items():
                archive.writestr(rel, text)
        return self._run(SubmitSource(scope=self.t.repo.scope, files=[
            SimpleUploadedFile(name, buffer.getvalue())]))

    def git(self, files: dict[str, str]):
        """A git repository holding ``files``, followed by the repository scope, synced."""
        root = self.tmp / "upstream"
        root.mkdir()
        repo = GitRepo(root)
        repo.git("init", "-q", "-b", "main")
        repo.commit("first", files)
        source = add_source(SYSTEM, AddGitSource(org=self.t.org.slug, repo=self.t.repo.slug,
                                                 url=str(root)))
        result = run_sync(source.pk)
        assert not result.error, result.error
        return result

    def _run(self, command: SubmitSource) -> IngestionJob:
        job = ingestion.run_inline(ingestion.submit(SYSTEM, command, queue=False))
        assert job.state == "done" and not job.errors, (job.state, job.errors)
        return job


@pytest.fixture
def src(ingest_target, tmp_path, monkeypatch) -> Sources:
    return Sources(ingest_target, tmp_path, monkeypatch)


def active_of(repo, prefix: str) -> set[int]:
    """The active fragments of the documents under ``prefix``."""
    return set(Fragment.objects.filter(
        scope=repo.scope, status=FragmentStatus.ACTIVE,
        sources__document__path__startswith=prefix).values_list("pk", flat=True))


def retired(repo) -> set[int]:
    return set(Fragment.objects.filter(scope=repo.scope, status=FragmentStatus.RETIRED)
               .values_list("pk", flat=True))


def first_then_second(src: Sources, first, second, repo) -> None:
    """Ingest ``first`` (which brings documents whose paths start with ``a``), then ``second``
    (``b``): the second leaves every fragment of the first active, and retires nothing."""
    first()
    held = active_of(repo, "a")
    assert len(held) == 2
    outcome = second()
    retired_count = getattr(outcome, "fragments_retired", None)
    if retired_count is None:
        retired_count = outcome.retired  # a sync's result
    assert retired_count == 0
    assert active_of(repo, "a") == held
    assert len(active_of(repo, "b")) == 2
    assert not retired(repo)


# --- each pair of sources --------------------------------------------------------------------
def test_a_second_folder_leaves_the_first_folders_fragments(src, ingest_target):
    a, b = src.folder("one", notes("a")), src.folder("two", notes("b"))
    first_then_second(src, lambda: src.run_folder(a), lambda: src.run_folder(b),
                      ingest_target.repo)
    # and the first folder again: the second's stay too
    assert src.run_folder(a).fragments_retired == 0
    assert len(active_of(ingest_target.repo, "b/")) == 2


def test_an_upload_leaves_a_folders_fragments(src, ingest_target):
    a = src.folder("one", notes("a"))
    first_then_second(src, lambda: src.run_folder(a), lambda: src.archive("b.zip", notes("b")),
                      ingest_target.repo)


def test_a_folder_leaves_an_uploads_fragments(src, ingest_target):
    b = src.folder("two", notes("b"))
    first_then_second(src, lambda: src.archive("a.zip", notes("a")), lambda: src.run_folder(b),
                      ingest_target.repo)


def test_a_git_source_leaves_a_folders_fragments(src, ingest_target):
    a = src.folder("one", notes("a"))
    first_then_second(src, lambda: src.run_folder(a), lambda: src.git(notes("b")),
                      ingest_target.repo)


def test_a_folder_leaves_a_git_sources_fragments(src, ingest_target):
    b = src.folder("two", notes("b"))
    first_then_second(src, lambda: src.git(notes("a")), lambda: src.run_folder(b),
                      ingest_target.repo)


def test_a_git_source_leaves_an_uploads_fragments(src, ingest_target):
    first_then_second(src, lambda: src.upload({"a-x.md": note("a-0"), "a-y.md": note("a-1")}),
                      lambda: src.git(notes("b")), ingest_target.repo)


def test_an_uploaded_file_is_a_source_of_its_own(src, ingest_target):
    """Upload jobs of single files: each names its file; a second upload keeps the first's."""
    src.upload({"first.md": note("up-1")})
    src.upload({"second.md": note("up-2")})
    origins = dict(SourceDocument.objects.filter(repository=ingest_target.repo)
                   .values_list("path", "origin"))
    assert origins == {"first.md": "upload:first.md", "second.md": "upload:second.md"}
    assert not retired(ingest_target.repo)


# --- a source retires its own, only ----------------------------------------------------------
def test_a_folder_rerun_retires_only_its_own_deleted_file(src, ingest_target):
    repo = ingest_target.repo
    a = src.folder("one", notes("a", 3))
    src.run_folder(a)
    src.archive("b.zip", notes("b"))
    gone = active_of(repo, "a/note-1.md")
    assert len(gone) == 1
    (a / "a" / "note-1.md").unlink()
    job = src.run_folder(a)
    assert job.fragments_retired == 1
    assert retired(repo) == gone
    assert len(active_of(repo, "a/")) == 2 and len(active_of(repo, "b/")) == 2


def test_an_archive_uploaded_again_replaces_its_own_pages_only(src, ingest_target):
    repo = ingest_target.repo
    src.archive("a.zip", notes("a", 3))
    src.archive("other.zip", notes("b"))
    gone = active_of(repo, "a/note-2.md")
    job = src.archive("a.zip", notes("a", 2))  # the same archive, one page fewer
    assert job.fragments_retired == 1 and retired(repo) == gone
    assert len(active_of(repo, "b/")) == 2


def test_the_latest_source_to_bring_a_path_owns_it(src, ingest_target):
    """Two folders with the same file: the later one takes the path; the first, re-run after
    deleting its copy, no longer retires it."""
    repo = ingest_target.repo
    a = src.folder("one", {"shared/notes.md": note("first copy")})
    b = src.folder("two", {"shared/notes.md": note("second copy")})
    src.run_folder(a)
    src.run_folder(b)
    document = SourceDocument.objects.get(repository=repo, path="shared/notes.md")
    assert document.origin == f"path:{b.resolve()}"
    shutil.rmtree(a / "shared")
    assert src.run_folder(a).fragments_retired == 0
    assert len(active_of(repo, "shared/")) == 1


def test_documents_of_no_known_source_are_never_pruned(src, ingest_target):
    """A document no migration could attribute (origin "") stays when a folder is re-run."""
    repo = ingest_target.repo
    a = src.folder("one", notes("a"))
    src.run_folder(a)
    SourceDocument.objects.filter(repository=repo, path="a/note-0.md").update(origin="")
    (a / "a" / "note-0.md").unlink()
    assert src.run_folder(a).fragments_retired == 0
    assert len(active_of(repo, "a/")) == 2


def test_the_issues_reproduction_retires_nothing(src, ingest_target):
    """``manage.py ingest PATH --org ORG --repo REPO`` of a three-file folder into a repository
    with other fragments: "3 created … 0 retired" (``--inline`` runs the worker's job here)."""
    repo = ingest_target.repo
    src.git(notes("b", 4))
    others = active_of(repo, "b/")
    folder = src.folder("three", {f"c/{i}.md": note(f"c-{i}") for i in range(3)})
    out = io.StringIO()
    call_command("ingest", str(folder), "--org", ingest_target.org.slug, "--repo", repo.slug,
                 "--inline", stdout=out)
    summary = out.getvalue()
    assert "3 created" in summary and " 0 retired" in summary, summary
    assert active_of(repo, "b/") == others and not retired(repo)


# --- the data migration -------------------------------------------------------------------
def test_existing_documents_are_attributed_to_the_source_that_brought_them(src,
                                                                          ingest_target):
    repo = ingest_target.repo
    a = src.folder("one", notes("a"))
    src.run_folder(a)
    result = src.git(notes("b"))
    src.archive("c.zip", notes("c", 1))
    upload_job = IngestionJob.objects.filter(source_kind="upload").get()
    (a / "a" / "note-1.md").unlink()  # the folder's walk would no longer see it
    SourceDocument.objects.filter(repository=repo).update(origin="")

    migration = importlib.import_module("contexts.migrations.0033_document_origins")
    migration.attribute(apps, None)

    origins = dict(SourceDocument.objects.filter(repository=repo)
                   .values_list("path", "origin"))
    assert origins == {
        "a/note-0.md": f"path:{a.resolve()}",
        "a/note-1.md": "",  # never pruned: no source is known to hold it
        "b/note-0.md": f"git:{result.source}", "b/note-1.md": f"git:{result.source}",
        "c/note-0.md": f"upload:{upload_job.source}",
    }
