"""Owners from the repository (issue 38), end to end on a real git repository synced by a git
source: ``.github/CODEOWNERS`` assigns owners (``@login`` → a member's username, an e-mail → a
member's verified address, the last matching rule, the first owner of a line who may own here);
a changed CODEOWNERS re-assigns on the next sync; a person's choice in the console survives
syncs until they clear it; front matter, the file's recent git authors and the repository's
tech lead follow in that order; and nobody of another organization — by username, by e-mail,
by the same username as a member elsewhere — is ever an owner.

A path job of a checkout of the same commit resolves the same owners (one chain for both)."""

from __future__ import annotations

import pytest

from accounts.models import Role, VerifiedEmail
from accounts.permissions import SYSTEM
from contexts.governance.ownership import coverage
from contexts.ingestion.git_sync import run_sync
from contexts.ingestion.jobs import run_job
from contexts.models import Fragment, FragmentStatus, SourceDocument
from contexts.services import fragments as fragment_service
from contexts.usecases.ingestion import create_job
from tests.factories import MembershipFactory, OrganizationFactory, UserFactory

pytestmark = pytest.mark.django_db

CODEOWNERS = """\
# Default: the lead.
*                 @lead
/docs/            @mallory @alice        # mallory belongs to another organization
/docs/team.md     @acme/docs-team bob@example.com
/src/             @carol                 # a viewer: may not curate
/notes/           eve@evil.example
/misc/            @ghost
"""


def doc(title: str, helpers, seed: str, owner: str = "") -> str:
    front = f"---\nowner: {owner}\n---\n" if owner else ""
    return f"{front}# {title}\n\n{seed}word " + helpers.prose(seed, 80) + "\n"


@pytest.fixture
def people(world):
    org = world.org
    evil = OrganizationFactory(slug="evil")
    made = {}
    for name, role, where in [("lead", Role.TECH_LEAD, org), ("alice", Role.CURATOR, org),
                              ("bob", Role.CURATOR, org), ("carol", Role.VIEWER, org),
                              ("admin", Role.ADMIN, org), ("mallory", Role.ADMIN, evil),
                              ("eve", Role.ADMIN, evil), ("ghost", Role.ADMIN, evil)]:
        made[name] = UserFactory(username=name, email=f"{name}@example.com")
        MembershipFactory(user=made[name], org=where, role=role)
    made["eve"].email = "eve@evil.example"
    made["eve"].save()
    for name in ("bob", "eve"):  # both proved their address theirs
        VerifiedEmail.objects.create(user=made[name], email=made[name].email, how="operator")
    return made


def owners(repository) -> dict[str, tuple[str, str]]:
    """path → (owner of its active fragments, where the owner came from)."""
    found = {}
    for document in SourceDocument.objects.filter(repository=repository).select_related("owner"):
        names = {f.owner.username if f.owner_id else None for f in Fragment.objects.filter(
            sources__document=document, status=FragmentStatus.ACTIVE)}
        assert len(names) == 1, (document.path, names)
        assert document.owner is not None and document.owner.username in names
        found[document.path] = (names.pop(), document.owner_source)
    return found


def tree(helpers) -> dict[str, str]:
    return {
        ".github/CODEOWNERS": CODEOWNERS,
        "README.md": doc("Readme", helpers, "readme"),
        "docs/guide.md": doc("Guide", helpers, "guide"),
        "docs/team.md": doc("Team", helpers, "team"),
        "src/limiter.py": helpers.py_function("refill_bucket"),
        "notes/plan.md": doc("Plan", helpers, "plan", owner="alice"),
        "notes/other.md": doc("Other", helpers, "other", owner="mallory"),
        "misc/odd.md": doc("Odd", helpers, "odd"),
    }


def commit_as(monkeypatch, git_repo, email: str, message: str, files: dict) -> str:
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", email)
    try:
        return git_repo.commit(message, files)
    finally:
        monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ada@example.com")


def test_owners_follow_codeowners_then_front_matter_history_and_the_tech_lead(
        git_repo, world, helpers, people, monkeypatch):
    git_repo.commit("first", tree(helpers))
    # src/limiter.py: bob twice, alice once, and a stranger (not a member) three times.
    for n, email in enumerate(["bob@example.com", "alice@example.com", "bob@example.com",
                               "x@else.example", "x@else.example", "x@else.example"]):
        commit_as(monkeypatch, git_repo, email, f"limiter {n}", {
            "src/limiter.py": helpers.py_function("refill_bucket", tweak=f"v{n}")})
    source = world.source(git_repo, "limiter")
    result = run_sync(source.pk)
    assert not result.error, result.error

    assert owners(source.repository) == {
        "README.md": ("lead", "codeowners"),
        "docs/guide.md": ("alice", "codeowners"),       # mallory (another org) skipped
        "docs/team.md": ("bob", "codeowners"),          # the team skipped, bob's e-mail
        "src/limiter.py": ("bob", "git_author"),        # carol may not curate; history
        "notes/plan.md": ("alice", "front_matter"),     # eve's e-mail is another org's
        "notes/other.md": ("lead", "tech_lead"),        # front matter: another org's admin
        "misc/odd.md": ("lead", "tech_lead"),           # @ghost is nobody here
    }
    reasons = " | ".join(w["reason"] for w in result.warnings)
    for entry in ("'@mallory'", "'@acme/docs-team'", "'@carol'", "'eve@evil.example'",
                  "'@ghost'", "'mallory' in front matter"):
        assert entry in reasons, entry
    # An account that exists elsewhere and one that exists nowhere read alike.
    assert ("'@ghost' is not a member of this organization" in reasons
            and "'@mallory' is not a member of this organization" in reasons)
    assert source.__class__.objects.get(pk=source.pk).last_summary["warnings"]

    rows = {row.label: row for row in coverage(world.org)}
    assert rows["acme/limiter"].share == 1.0
    assert rows["acme/limiter"].by_source["codeowners"] >= 3


def test_a_changed_codeowners_re_assigns_but_a_persons_choice_stands_until_cleared(
        git_repo, world, helpers, people):
    git_repo.commit("first", tree(helpers))
    source = world.source(git_repo, "limiter")
    assert not run_sync(source.pk).error
    guide = Fragment.objects.get(sources__document__path="docs/guide.md",
                                 status=FragmentStatus.ACTIVE)
    readme = Fragment.objects.get(sources__document__path="README.md",
                                  status=FragmentStatus.ACTIVE)
    # A person hands the README's fragment to bob in the console.
    fragment_service.reassign_owner(people["lead"], readme, people["bob"])
    readme.refresh_from_db()
    assert readme.owner_set_by_person and readme.owner == people["bob"]

    # Only CODEOWNERS changes: docs/ goes to bob, everything else to admin.
    git_repo.commit("owners", {".github/CODEOWNERS": CODEOWNERS.replace(
        "@mallory @alice", "@bob").replace("*                 @lead", "* @admin")})
    result = run_sync(source.pk)
    assert not result.error and not result.full  # a diff sync of one non-document file
    guide.refresh_from_db()
    readme.refresh_from_db()
    assert guide.owner == people["bob"]
    assert guide.versions.order_by("-number").first().reason.startswith(
        "owner from the repository: .github/CODEOWNERS line")
    assert readme.owner == people["bob"]  # the person's choice, not the file's admin
    odd = SourceDocument.objects.get(repository=source.repository, path="misc/odd.md")
    assert (odd.owner, odd.owner_source) == (people["lead"], "tech_lead")
    readme_document = SourceDocument.objects.get(repository=source.repository, path="README.md")
    assert readme_document.owner == people["admin"]  # what the file says, for when it is cleared

    # Cleared: the repository decides again, now and at later syncs.
    fragment_service.follow_repository_owner(people["lead"], readme)
    readme.refresh_from_db()
    assert not readme.owner_set_by_person and readme.owner == people["admin"]
    git_repo.commit("owners again", {".github/CODEOWNERS": "* @alice\n"})
    assert not run_sync(source.pk).error
    readme.refresh_from_db()
    assert readme.owner == people["alice"]


def test_a_path_job_of_a_checkout_resolves_the_same_owners(git_repo, world, helpers, people,
                                                           tmp_path, monkeypatch):
    git_repo.commit("first", tree(helpers))
    # Three commits by alice, whose address is not verified (anybody may type it), one by bob.
    for n, email in enumerate(["alice@example.com"] * 3 + ["bob@example.com"]):
        commit_as(monkeypatch, git_repo, email, f"limiter {n}",
                  {"src/limiter.py": helpers.py_function("refill_bucket", tweak=f"a{n}")})
    source = world.source(git_repo, "synced")
    assert not run_sync(source.pk).error
    checkout = git_repo.checkout(tmp_path / "checkout")
    walked_repo = world.repository("walked")
    job = run_job(create_job(SYSTEM, walked_repo.scope, str(checkout)).pk)
    assert job.state == "done", job.errors
    walked = owners(walked_repo)
    assert walked == owners(source.repository)
    assert walked["src/limiter.py"] == ("bob", "git_author")
    assert any("'@mallory'" in w["reason"] for w in job.warnings)


def test_without_codeowners_nor_a_tech_lead_the_sources_creator_is_the_last_resort(
        git_repo, world, helpers):
    """An organization with curators only: never nobody — the one who added the source."""
    curator = UserFactory(username="cur")
    MembershipFactory(user=curator, org=world.org, role=Role.CURATOR)
    git_repo.commit("first", {"README.md": doc("Readme", helpers, "readme")})
    source = world.source(git_repo, "plain")
    source.created_by = curator
    source.save()
    assert not run_sync(source.pk).error
    assert owners(source.repository) == {"README.md": ("cur", "default")}
