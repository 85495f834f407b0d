"""Git sources against real git: repositories made with ``git init`` under ``tmp_path``,
committed to with a fixed author (``GIT_*`` environment variables), synced into real
PostgreSQL through the real pipeline.

The text generators are the ingestion tests' (``tests/ingestion/conftest.py``), handed out
with the helpers here as one fixture."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from accounts.models import Organization, Repository
from accounts.permissions import SYSTEM
from contexts.models import Fragment, FragmentStatus, Source, SourceDocument, SourcePointer
from contexts.usecases.sources import AddGitSource, add_source
from tests.factories import OrganizationFactory, RepositoryFactory
from tests.ingestion.conftest import prose
from tests.ingestion.conftest import py_function as sample_function


def py_function(name: str, *, tweak: str = "") -> str:
    """A Python function of its own chunk (``tests/ingestion/conftest.py``'s generator)."""
    return sample_function(name, "value", tweak=tweak)


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def git_identity(monkeypatch, tmp_path):
    """Every commit a test makes has this author; no global configuration is read."""
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))


@dataclass
class GitRepo:
    root: Path
    commits: list[str] = field(default_factory=list)

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "commit.gpgsign=false", "-C", str(self.root), *args],
                              check=True, capture_output=True, text=True).stdout

    def commit(self, message: str, files: dict[str, str | bytes | None] | None = None,
               renames: dict[str, str] | None = None) -> str:
        """Write (str/bytes), delete (None) and rename files, commit everything; the sha."""
        for old, new in (renames or {}).items():
            (self.root / new).parent.mkdir(parents=True, exist_ok=True)
            self.git("mv", old, new)
        for rel, content in (files or {}).items():
            path = self.root / rel
            if content is None:
                self.git("rm", "-q", rel)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        sha = self.git("rev-parse", "HEAD").strip()
        self.commits.append(sha)
        return sha

    def show(self, commit: str, path: str) -> str:
        return self.git("show", f"{commit}:{path}")

    def checkout(self, directory: Path) -> Path:
        """A work tree of the current head (for a path job to walk)."""
        subprocess.run(["git", "clone", "-q", str(self.root), str(directory)], check=True,
                       capture_output=True)
        return directory


@pytest.fixture
def git_repo(tmp_path) -> GitRepo:
    root = tmp_path / "upstream"
    root.mkdir()
    repo = GitRepo(root)
    repo.git("init", "-q", "-b", "main")
    return repo


@dataclass
class World:
    org: Organization

    def repository(self, slug: str) -> Repository:
        return RepositoryFactory(org=self.org, slug=slug)

    def source(self, repo: GitRepo, slug: str, **options) -> Source:
        self.repository(slug)
        return add_source(SYSTEM, AddGitSource(org=self.org.slug, repo=slug,
                                               url=str(repo.root), **options))


@pytest.fixture
def world(settings, tmp_path) -> World:
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    return World(org=OrganizationFactory(slug="acme"))


def snapshot(repository: Repository) -> dict:
    """What a repository scope holds, without history or ids: every document's path, and for
    every source pointer of it the chunk (anchor, lines) and its fragment (kind, status,
    title, body, heading path, namespace, symbol) — plus the fragments left without a source
    (which must be retired) and whether any active fragment has none."""
    pointers = sorted(
        (p.document.path, p.anchor, p.start_line, p.end_line, p.fragment.kind,
         p.fragment.status, p.fragment.title, p.fragment.body,
         tuple(p.fragment.heading_path), p.fragment.namespace, p.fragment.symbol,
         p.fragment.negative)
        for p in SourcePointer.objects.filter(document__repository=repository)
        .select_related("document", "fragment"))
    orphans = Fragment.objects.filter(scope=repository.scope, sources__isnull=True)
    return {
        "documents": sorted(SourceDocument.objects.filter(repository=repository)
                            .values_list("path", flat=True)),
        "pointers": pointers,
        "active_without_source": orphans.filter(status=FragmentStatus.ACTIVE).count(),
    }


@pytest.fixture(scope="session")
def helpers():
    return SimpleNamespace(snapshot=snapshot, prose=prose, py_function=py_function)
