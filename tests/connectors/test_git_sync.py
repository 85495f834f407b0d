"""A git source kept in sync by commit (issue 24): after every commit — files added, modified,
deleted, renamed, moved in and out of the source's patterns, a ``.contextsignore`` changed —
the repository scope a sync keeps holds exactly what a fresh full ingest of that commit into
another scope holds (paths, anchors, lines, bodies, kinds, active or retired; not history or
ids); renamed files keep their fragments; every version records its commit; citations carry
the commit and a permalink that shows those lines. And a path job walking a checkout of the
same commit ingests the same files as the sync reads from git's objects."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.ingestion.git_sync import run_sync
from contexts.ingestion.jobs import run_job
from contexts.models import (
    Fragment,
    FragmentStatus,
    FragmentVersion,
    Source,
    SourceDocument,
    SourcePointer,
    SourceState,
)
from contexts.usecases.ingestion import create_job

pytestmark = pytest.mark.django_db

TEMPLATE = "https://git.example.com/acme/limiter/blob/{commit}/{path}#L{start_line}-L{end_line}"
PATTERNS = {"include": ["docs/", "src/", "drafts/", "README.md"], "exclude": ["drafts/"]}


def guide(helpers, usage_seed: str = "usage") -> str:
    return ("# Guide\n\n## Setup\n\nsetupword " + helpers.prose("setup", 150) + "\n\n"
            "## Usage\n\nusageword " + helpers.prose(usage_seed, 150) + "\n")


def limiter(helpers, tweak: str = "") -> str:
    return (helpers.py_function("refill_bucket") + "\n\n"
            + helpers.py_function("take_token", tweak=tweak))


def pointers_of(repository, path: str) -> dict[str, int]:
    return dict(SourcePointer.objects.filter(document__repository=repository,
                                             document__path=path)
                .values_list("anchor", "fragment_id"))


def test_each_commit_synced_equals_a_fresh_full_ingest_of_it(git_repo, world, helpers):
    live = world.source(git_repo, "live", web_url_template=TEMPLATE, **PATTERNS)
    fresh_count = 0

    def sync_and_compare(expected: dict[str, int] | None = None) -> None:
        nonlocal fresh_count
        result = run_sync(live.pk)
        assert not result.error, result.error
        assert result.commit == git_repo.commits[-1]
        if expected is not None:
            assert {k: getattr(result, k) for k in expected} == expected, result.line()
        fresh_count += 1
        fresh = world.source(git_repo, f"fresh{fresh_count}", **PATTERNS)
        first = run_sync(fresh.pk)
        assert first.full and not first.error
        live.refresh_from_db()
        assert live.last_commit == git_repo.commits[-1] and live.state == SourceState.IDLE
        assert (helpers.snapshot(live.repository)
                == helpers.snapshot(fresh.repository)), f"after {result.line()}"

    git_repo.commit("first", {
        "README.md": "# Limiter\n\nreadmeword " + helpers.prose("readme", 60) + "\n",
        "docs/guide.md": guide(helpers),
        "docs/ops/restart.md": "# Restart\n\nrestartword " + helpers.prose("restart") + "\n",
        "src/limiter.py": limiter(helpers),
        "drafts/idea.md": "# Idea\n\nideaword " + helpers.prose("idea", 80) + "\n",
        "notes/todo.md": "# Todo\n\ntodoword " + helpers.prose("todo", 80) + "\n",
    })
    sync_and_compare({"added": 4, "full": True})
    assert helpers.snapshot(live.repository)["documents"] == [
        "README.md", "docs/guide.md", "docs/ops/restart.md", "src/limiter.py"]

    git_repo.commit("modify and add", {
        "docs/guide.md": guide(helpers, "usage-2"),
        "docs/new.md": "# New\n\n## One\n\noneword " + helpers.prose("one", 140) + "\n\n"
                       "## Two\n\ntwoword " + helpers.prose("two", 140) + "\n",
        "src/limiter.py": limiter(helpers, tweak="values = values[:limit]"),
    })
    setup_before = pointers_of(live.repository, "docs/guide.md")
    sync_and_compare({"added": 1, "modified": 2, "deleted": 0, "renamed": 0, "full": False})
    # The unchanged section is the same fragment; the changed one a new version of its own.
    assert pointers_of(live.repository, "docs/guide.md") == setup_before

    git_repo.commit("delete", {"docs/ops/restart.md": None})
    restart = Fragment.objects.get(scope=live.repository.scope, body__contains="restartword")
    sync_and_compare({"deleted": 1, "added": 0, "modified": 0})
    restart.refresh_from_db()
    assert restart.status == FragmentStatus.RETIRED

    code_before = pointers_of(live.repository, "src/limiter.py")
    new_before = pointers_of(live.repository, "docs/new.md")
    versions_before = dict(Fragment.objects.filter(pk__in=code_before.values())
                           .values_list("pk", "version"))
    git_repo.commit("rename", renames={"src/limiter.py": "src/rate/limiter.py",
                                       "docs/new.md": "docs/renamed.md"})
    git_repo.commit("edit the renamed", {
        "docs/renamed.md": "# New\n\n## One\n\noneword " + helpers.prose("one", 140) + "\n\n"
                           "## Two\n\ntwoword " + helpers.prose("two", 140) + "\n"
                           "And one more sentence about the second part.\n"})
    sync_and_compare({"renamed": 2, "added": 0, "deleted": 0})
    # A renamed file keeps its fragments (and their history): the code fragments got a new
    # version (their header names the path), the prose section that did not change is the
    # same fragment at the same version.
    assert pointers_of(live.repository, "src/rate/limiter.py") == code_before
    for pk, version in Fragment.objects.filter(pk__in=code_before.values()).values_list(
            "pk", "version"):
        assert version == versions_before[pk] + 1
    assert pointers_of(live.repository, "docs/renamed.md") == new_before
    assert not SourceDocument.objects.filter(repository=live.repository,
                                             path__in=["src/limiter.py", "docs/new.md"])

    git_repo.commit("in and out of the patterns", renames={
        "docs/guide.md": "drafts/guide.md",      # now excluded: retired
        "drafts/idea.md": "docs/idea.md",        # was excluded: added
        "notes/todo.md": "docs/todo.md",         # was outside the include patterns: added
    })
    guide_fragments = set(pointers_of(live.repository, "docs/guide.md").values())
    sync_and_compare({"added": 2, "deleted": 1, "renamed": 0})
    assert set(Fragment.objects.filter(pk__in=guide_fragments)
               .values_list("status", flat=True)) == {FragmentStatus.RETIRED}

    git_repo.commit("ignore one, edit another", {
        "docs/.contextsignore": "renamed.md\n",
        "README.md": "# Limiter\n\nreadmeword " + helpers.prose("readme-2", 60) + "\n",
    })
    sync_and_compare({"full": True, "modified": 1, "deleted": 1})

    git_repo.commit("back in", {"docs/.contextsignore": None, "docs/idea.md": None})
    sync_and_compare({"full": True, "added": 1, "deleted": 1})

    # A file deleted earlier comes back at its old path: its fragments (same ids) are active
    # again, as a fresh ingest's are.
    git_repo.commit("restored", {
        "docs/ops/restart.md": "# Restart\n\nrestartword " + helpers.prose("restart") + "\n"})
    sync_and_compare({"added": 1})
    restart.refresh_from_db()
    assert restart.status == FragmentStatus.ACTIVE

    # Every version the syncs wrote records its commit; every document the commit it was read
    # at, and that commit holds the file as the head does (a permalink shows today's text).
    head = git_repo.commits[-1]
    versions = FragmentVersion.objects.filter(fragment__scope=live.repository.scope)
    assert versions and {v.metadata.get("commit") for v in versions} <= set(git_repo.commits)
    for document in SourceDocument.objects.filter(repository=live.repository):
        assert document.source_commit in git_repo.commits
        assert (git_repo.show(document.source_commit, document.path)
                == git_repo.show(head, document.path))
    # A retired fragment has no source left; an active one has.
    for fragment in Fragment.objects.filter(scope=live.repository.scope):
        assert fragment.sources.exists() == (fragment.status == FragmentStatus.ACTIVE)

    # Citations through the API: the same paths, anchors and lines as the fresh scope's, with
    # the commit each file was read at and a permalink to those lines.
    fresh = Source.objects.get(repository__slug=f"fresh{fresh_count}")
    _, raw = create_token(world.org, "agent", [live.repository.scope, fresh.repository.scope])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def citations(slug: str) -> dict[tuple, dict]:
        response = api.post("/api/contexts/retrieve", json.dumps({
            "query": "how is the token bucket refilled and the guide used?",
            "scope": {"org_id": world.org.slug, "repo_id": slug},
            "budget_tokens": 100_000}), content_type="application/json")
        assert response.status_code == 200, response.json()
        return {(f["source"]["path"], f["source"]["anchor"], tuple(f["source"]["lines"]),
                 f["text"]): f["source"] for f in response.json()["fragments"]}

    ours, theirs = citations("live"), citations(fresh.repository.slug)
    assert ours.keys() == theirs.keys() and len(ours) == len(
        helpers.snapshot(live.repository)["pointers"])
    for (path, _, (start, end), _), source in ours.items():
        assert source["commit"] in git_repo.commits
        assert source["url"] == TEMPLATE.format(commit=source["commit"], path=path,
                                                start_line=start, end_line=end)
        assert theirs[next(k for k in theirs if k[0] == path)]["url"] is None  # no template
        shown = git_repo.show(source["commit"], path).split("\n")[start - 1:end]
        assert shown == git_repo.show(head, path).split("\n")[start - 1:end]


def test_a_sync_reads_what_a_path_job_of_the_same_checkout_reads(git_repo, world, helpers,
                                                                 tmp_path):
    """No patterns of its own: the tree's policy file, ignore files and the default
    exclusions decide, as they decide for a walk of a checkout — first on the whole tree, then
    after a commit that changes the kinds (a full reconcile) and one that only edits."""
    source = world.source(git_repo, "synced")
    git_repo.commit("first", {
        ".contexts.toml": '[kinds]\n"runbooks/**" = "runbook"\n',
        ".contextsignore": "private/\n",
        "README.md": "# Service\n\nservicewords " + helpers.prose("svc", 60) + "\n",
        "runbooks/restart.md": "# Restart\n\n" + helpers.prose("rb", 100) + "\n",
        "private/keys.md": "# Keys\n\nnot for agents\n",
        "src/app.py": helpers.py_function("serve_requests"),
        "tests/test_app.py": helpers.py_function("test_serve"),
        "tests/fixtures/sample.md": "# Sample\n\nfixture\n",
        "tests/notes.md": "# Notes\n\n" + helpers.prose("notes", 30) + "\n",
        "package-lock.json": "{}\n",
        "gen/client.py": "# Code generated by openapi-gen. DO NOT EDIT.\nx = 1\n",
        "logo.md": b"\x89PNG\r\n\x1a\n\x00\x00binary",
        "node_modules/left/README.md": "# left\n\nvendored\n",
    })
    steps = [None,
             {".contexts.toml": '[kinds]\n"runbooks/**" = "policy"\n'},
             {"src/app.py": helpers.py_function("serve_requests", tweak="limit += 1"),
              "runbooks/rollback.md": "# Rollback\n\n" + helpers.prose("rollback", 90) + "\n"}]
    for number, change in enumerate(steps):
        if change is not None:
            git_repo.commit(f"step {number}", change)
        result = run_sync(source.pk)
        assert not result.error, result.error
        walked = world.repository(f"walked{number}")
        job = run_job(create_job(SYSTEM, walked.scope, str(git_repo.checkout(
            tmp_path / f"checkout{number}"))).pk)
        assert job.state == "done", job.errors
        assert helpers.snapshot(source.repository) == helpers.snapshot(walked)
        kinds = dict(Fragment.objects.filter(
            scope=source.repository.scope, status=FragmentStatus.ACTIVE,
            sources__document__path="runbooks/restart.md").values_list("title", "kind"))
        assert set(kinds.values()) == {"runbook" if number == 0 else "policy"}
    documents = helpers.snapshot(source.repository)["documents"]
    assert "private/keys.md" not in documents and "tests/fixtures/sample.md" not in documents
    assert "tests/test_app.py" in documents and "logo.md" not in documents
