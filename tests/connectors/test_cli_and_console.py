"""The adapters: ``manage.py source add / sync --wait / list`` print what the issue says they
print, and the console's Sources page shows a source's state to tech leads and administrators
only, whose "sync now" (a CSRF-checked POST) queues the sync that a worker runs."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from contexts.celery import app
from contexts.models import Source, SourceState
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - the console's cast of people

pytestmark = pytest.mark.django_db
SHA = "[0-9a-f]{40}"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("source", *args, stdout=out)
    return out.getvalue()


def test_source_add_sync_and_list_print_what_they_did(git_repo, world, helpers):
    world.repository("web")
    git_repo.commit("first", {
        "docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n",
        "docs/b.md": "# B\n\nbetaword " + helpers.prose("b") + "\n",
        "src/tool.py": helpers.py_function("run_tool"),
        "notes/skip.md": "# Skip\n\nleft out\n",
    })
    source_id = run("add", "--git", str(git_repo.root), "--org", "acme", "--repo", "web",
                    "--branch", "main", "--include", "docs/", "--include", "src/",
                    "--exclude", "docs/b.md", "--interval", "600",
                    "--web-url", "https://example.com/blob/{commit}/{path}#L{start_line}"
                    ).strip()
    source = Source.objects.get(public_id=source_id)
    assert re.fullmatch(r"src_[0-9a-z]{14}", source_id)
    assert (source.include, source.exclude, source.interval_seconds) == (
        ["docs/", "src/"], ["docs/b.md"], 600)

    first = run("sync", source_id, "--wait")
    line, detail = first.splitlines()
    assert re.fullmatch(f"commit {git_repo.commits[-1]}: 2 added, 0 modified, 0 deleted, "
                        r"0 renamed, \d+ fragments changed", line), first
    assert re.fullmatch(r"  2 files, \d+ fragments, whole tree; \d+\.\d\ds elapsed", detail)

    git_repo.commit("second", {"docs/a.md": "# A\n\nalphaword " + helpers.prose("a2") + "\n",
                               "docs/c.md": "# C\n\ngammaword " + helpers.prose("c") + "\n",
                               "src/tool.py": None},
                    renames={"docs/b.md": "docs/d.md"})  # from excluded to included
    second = run("sync", source_id, "--wait").splitlines()[0]
    assert re.fullmatch(f"commit {git_repo.commits[-1]}: 2 added, 1 modified, 1 deleted, "
                        r"0 renamed, \d+ fragments changed", second), second
    assert run("sync", source_id, "--wait").splitlines()[0] == (
        f"commit {git_repo.commits[-1]}: 0 added, 0 modified, 0 deleted, 0 renamed, "
        "0 fragments changed")

    listing = run("list", "--org", "acme")
    assert source_id in listing and "idle" in listing and git_repo.commits[-1][:12] in listing
    assert "3 files" in listing

    # Failing: the line says why, the command exits non-zero.
    Source.objects.filter(pk=source.pk).update(branch="gone")
    out = io.StringIO()
    with pytest.raises(CommandError, match="failing"):
        call_command("source", "sync", source_id, "--wait", stdout=out)
    assert out.getvalue().startswith("failing: ") and "gone" in out.getvalue()
    assert "last error:" in run("list", "--org", "acme")


def test_source_add_refuses_what_it_cannot_follow(world, tmp_path):
    world.repository("web")
    with pytest.raises(CommandError, match="branch name"):
        run("add", "--git", "https://example.com/r.git", "--org", "acme", "--repo", "web",
            "--branch=bad..name")
    with pytest.raises(CommandError, match="no repository"):
        run("add", "--git", "https://example.com/r.git", "--org", "acme", "--repo", "nope")
    run("add", "--git", "https://example.com/r.git", "--org", "acme", "--repo", "web")
    with pytest.raises(CommandError, match="already follows"):
        run("add", "--git", "https://example.com/s.git", "--org", "acme", "--repo", "web")
    assert run("sync", Source.objects.get().public_id).startswith("queued a sync of src_")
    for hostile in ("src_\x00abc", "src_nosuchsource1", "../etc"):
        with pytest.raises(CommandError, match="no such source|among those you manage"):
            run("sync", hostile, "--wait")


@pytest.fixture
def followed(cast, git_repo, tmp_path, settings):  # noqa: F811
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    git_repo.commit("first", {"docs/a.md": "# A\n\nSome words about the limiter.\n"})
    from accounts.permissions import SYSTEM
    from contexts.usecases.sources import AddGitSource, add_source

    return add_source(SYSTEM, AddGitSource(org="acme", repo="web", url=str(git_repo.root)))


def test_the_sources_page_is_for_tech_leads_and_administrators(cast, followed):  # noqa: F811
    Source.objects.filter(pk=followed.pk).update(state=SourceState.FAILING,
                                                 last_error="fatal: couldn't find remote ref")
    for person in (cast.owner, cast.lead):
        page = client_for(person).get("/o/acme/sources/")
        assert page.status_code == 200
        text = page.content.decode()
        assert followed.public_id in text and "failing" in text and "Sync now" in text
        assert "couldn&#x27;t find remote ref" in text and 'aria-current="page">Sources' in text
    for person in (cast.teammate, cast.viewer):
        assert client_for(person).get("/o/acme/sources/").status_code == 403
        assert client_for(person).post(
            f"/o/acme/sources/{followed.public_id}/sync").status_code == 403
        assert "/sources/" not in client_for(person).get("/o/acme/").content.decode()
    assert client_for(cast.stranger).get("/o/acme/sources/").status_code == 404
    # Another organization's source is not synced from this one's page.
    assert client_for(cast.stranger).post(
        f"/o/globex/sources/{followed.public_id}/sync").status_code == 403


def test_sync_now_is_a_csrf_checked_post_that_queues_the_sync(
        cast, followed, git_repo, django_capture_on_commit_callbacks):  # noqa: F811
    url = f"/o/acme/sources/{followed.public_id}/sync"
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(cast.lead)
    assert strict.post(url).status_code == 403  # no CSRF token
    assert client_for(cast.lead).get(url).status_code == 405
    always_eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the queued task runs here, as a worker would run it
    try:
        with django_capture_on_commit_callbacks(execute=True) as queued:
            response = client_for(cast.lead).post(url)
    finally:
        app.conf.task_always_eager = always_eager
    assert response.status_code == 302 and response["Location"] == "/o/acme/sources/"
    assert queued[0].func.__name__ == "publish_sync"  # then the sync's own (the feed's)
    row = Source.objects.get(pk=followed.pk)
    assert (row.state, row.last_commit, row.files_count) == (SourceState.IDLE,
                                                             git_repo.commits[-1], 1)
    page = client_for(cast.lead).get("/o/acme/sources/").content.decode()
    assert git_repo.commits[-1][:12] in page and "idle" in page
