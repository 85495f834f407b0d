"""Red-team finding 1 (critical): an organization admin could ingest any server path.

After: server paths are for superusers only, under ``CONTEXTS_INGEST_ROOTS`` (empty: off), through
the console; the API offers no server paths at all; the CLI takes any path its operator names;
the instance's own data is never ingestable; links leaving the root are not followed; refusals
read the same whether a path exists or not; job pages show server paths to superusers only.
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from contexts.ingestion.jobs import run_job
from contexts.ingestion.server_paths import NOT_UNDER_A_ROOT, PROTECTED
from contexts.ingestion.sources import Skipped, SourceFile, walk
from contexts.models import Fragment, IngestionJob, UploadBlob
from tests.api.conftest import api  # noqa: F401 - fixture
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import UserFactory

SECRET = "the-instance-secret-key-" + "4d1f"  # composed: no secret-shaped literal here


@pytest.fixture
def disk(settings, tmp_path) -> dict[str, Path]:
    """An allowed root with a note, a secret outside it, and the instance's data dirs."""
    var = tmp_path / "allowed" / "var"
    settings.VAR_DIR = var
    settings.MEDIA_ROOT = var / "media"
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    settings.STATIC_ROOT = var / "staticfiles"
    root = tmp_path / "allowed" / "docs"
    root.mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nDeploy with care.\n")
    (var / "media" / "uploads" / "job_x").mkdir(parents=True)
    (var / "media" / "uploads" / "job_x" / "tenant.md").write_text("# Another tenant\n")
    (var / "secret_key.md").write_text(SECRET)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd.md").write_text(SECRET)
    settings.INGEST_ROOTS = [str(tmp_path / "allowed")]
    return {"root": root, "allowed": tmp_path / "allowed", "var": var, "outside": outside,
            "media": var / "media"}


@pytest.fixture
def superuser(cast):
    from accounts.models import Membership, Role

    user = UserFactory(username="root", is_superuser=True, is_staff=True)
    Membership.objects.create(user=user, org=cast.org, role=Role.ADMIN)
    return user


def post_path(user, cast, path: str):
    return client_for(user).post("/o/acme/ingest/path",
                                 {"scope": cast.repo.scope.public_id, "path": path})


# --- console ----------------------------------------------------------------------------------
def test_an_organization_admin_may_not_ingest_server_paths(cast, disk):
    for path in (str(disk["root"]), "/etc", "../../etc"):
        assert post_path(cast.owner, cast, path).status_code == 403
    page = client_for(cast.owner).get("/o/acme/ingest/").content.decode()
    assert "Register a server path" not in page
    assert not IngestionJob.objects.exists()


def test_without_ingest_roots_nobody_may(cast, disk, superuser, settings):
    settings.INGEST_ROOTS = []
    assert post_path(superuser, cast, str(disk["root"])).status_code == 403
    assert "Register a server path" not in client_for(superuser).get(
        "/o/acme/ingest/").content.decode()
    assert not IngestionJob.objects.exists()


def test_a_superuser_may_ingest_under_a_root(cast, disk, superuser):
    assert "Register a server path" in client_for(superuser).get(
        "/o/acme/ingest/").content.decode()
    assert post_path(superuser, cast, str(disk["root"])).status_code == 302
    assert IngestionJob.objects.get().source == str(disk["root"].resolve())


def test_refusals_do_not_reveal_whether_a_path_exists(cast, disk, superuser):
    (disk["allowed"] / "escape").symlink_to(disk["outside"])
    answers = {}
    for path in ("/etc", "/no/such/dir", "/etc/passwd", "../../etc", "docs",
                 str(disk["outside"]), str(disk["outside"] / "missing"),
                 str(disk["allowed"] / "escape"), str(disk["allowed"] / ".." / "outside")):
        response = post_path(superuser, cast, path)
        assert response.status_code == 400, path
        body = response.content.decode()
        assert "no such file" not in body
        answers[path] = NOT_UNDER_A_ROOT.split("(")[0].strip() in body
    assert all(answers.values()), answers
    assert not IngestionJob.objects.exists()


@pytest.mark.parametrize("which", ["var", "media"])
def test_the_instance_data_is_never_ingestable(cast, disk, superuser, which):
    response = post_path(superuser, cast, str(disk[which]))
    assert response.status_code == 400 and escape(PROTECTED) in response.content.decode()
    assert not IngestionJob.objects.exists()


def test_job_pages_show_server_paths_to_superusers_only(cast, disk, superuser):
    post_path(superuser, cast, str(disk["root"]))
    job = IngestionJob.objects.get()
    page = client_for(superuser).get(f"/jobs/{job.public_id}/")
    assert str(disk["root"]) in page.content.decode()
    page = client_for(cast.owner).get(f"/jobs/{job.public_id}/")
    assert page.status_code == 200 and str(disk["root"]) not in page.content.decode()


def test_a_failed_job_does_not_record_its_server_path(cast, disk, superuser):
    post_path(superuser, cast, str(disk["root"]))
    job = IngestionJob.objects.get()
    # The operator moved the var directory under the root after the job was queued.
    IngestionJob.objects.filter(pk=job.pk).update(source=str(disk["var"]))
    with pytest.raises(Exception, match="instance's own data"):
        run_job(job.pk)
    job.refresh_from_db()
    assert job.state == "failed" and str(disk["var"]) not in str(job.errors)


# --- the walker -------------------------------------------------------------------------------
def test_links_leaving_the_root_are_not_followed(disk):
    root = disk["root"]
    (root / "notes.md").symlink_to(disk["outside"] / "passwd.md")
    (root / "more").symlink_to(disk["outside"], target_is_directory=True)
    (root / "alias.md").symlink_to(root / "guide.md")  # inside the root: fine
    os.mkfifo(root / "pipe.md")  # would block a plain open()
    found = {item.path: item for item in walk(root, max_bytes=100_000)}
    assert isinstance(found["notes.md"], Skipped) and "link" in found["notes.md"].reason
    assert isinstance(found["pipe.md"], Skipped)
    assert isinstance(found["alias.md"], SourceFile)
    assert not any(SECRET.encode() in getattr(item, "raw", b"") for item in found.values())
    assert not any(path.startswith("more/") for path in found)


def test_the_walker_skips_the_instance_data_inside_a_root(disk):
    found = {item.path: item for item in walk(disk["allowed"], max_bytes=100_000)}
    assert "docs/guide.md" in found
    assert not any(isinstance(item, SourceFile) and item.path.startswith("var/")
                   for item in found.values())


# --- the API ----------------------------------------------------------------------------------
def test_the_api_offers_no_server_paths(api, cast, disk, superuser):
    api.force_authenticate(superuser)
    note = SimpleUploadedFile("a.md", b"# A\n\ntext\n")
    response = api.post("/api/sources", {"org_id": "acme", "repo_id": "web", "files": [note],
                                         "path": str(disk["outside"])}, format="multipart")
    assert response.status_code == 400 and response.json()["error"]["field"] == "path"
    assert not IngestionJob.objects.exists()


def test_upload_names_cannot_leave_their_folder(api, cast, disk):
    api.force_authenticate(cast.teammate)
    note = SimpleUploadedFile("../../secret_key.md", b"# Mine\n\nnot the key\n")
    response = api.post("/api/sources", {"org_id": "acme", "repo_id": "web", "files": [note]},
                        format="multipart")
    assert response.status_code == 202
    job = IngestionJob.objects.get()
    assert list(UploadBlob.objects.values_list("key", flat=True)) == [
        f"{job.org_id}/{job.public_id}/secret_key.md"]
    assert (disk["var"] / "secret_key.md").read_text() == SECRET


@pytest.mark.parametrize("elsewhere", ["outside", "another job", "another org"])
def test_an_upload_job_reads_only_its_own_uploads(api, cast, disk, elsewhere):
    api.force_authenticate(cast.teammate)
    for name in ("a.md", "b.md"):
        api.post("/api/sources", {"org_id": "acme", "repo_id": "web",
                                  "files": [SimpleUploadedFile(name, b"# A\n\ntext\n")]},
                 format="multipart")
    job, other = IngestionJob.objects.order_by("pk")
    UploadBlob.objects.create(org=cast.other_org, key=f"{cast.other_org.pk}/{job.public_id}/x.md",
                              content=SECRET.encode(), size=len(SECRET), sha256="-")
    source = {"outside": str(disk["outside"]), "another job": other.source,
              "another org": f"{cast.other_org.pk}/{job.public_id}/"}[elsewhere]
    IngestionJob.objects.filter(pk=job.pk).update(source=source)
    with pytest.raises(Exception, match="own uploads"):
        run_job(job.pk)
    assert not Fragment.objects.exists()


# --- the CLI ----------------------------------------------------------------------------------
def test_the_cli_takes_any_path_but_not_the_instance_data(cast, disk, monkeypatch, capsys):
    call_command("ingest", str(disk["outside"]), "--org", "acme", "--repo", "web", "--inline")
    assert Fragment.objects.filter(body__contains=SECRET).exists()  # the operator asked for it
    monkeypatch.chdir(disk["allowed"])
    call_command("ingest", "docs", "--org", "acme", "--repo", "web", "--inline")  # relative
    assert IngestionJob.objects.filter(source=str(disk["root"].resolve())).exists()
    for protected in (disk["var"], disk["media"] / "uploads"):
        with pytest.raises(CommandError, match="instance's own data"):
            call_command("ingest", str(protected), "--org", "acme", "--inline")


def test_the_cli_does_not_follow_links_out_of_the_named_root(cast, disk):
    (disk["root"] / "notes.md").symlink_to(disk["var"] / "secret_key.md")
    call_command("ingest", str(disk["root"]), "--org", "acme", "--repo", "web", "--inline")
    job = IngestionJob.objects.get()
    assert job.state == "done" and any(s["path"] == "notes.md" for s in job.skipped)
    assert not Fragment.objects.filter(body__contains=SECRET).exists()
