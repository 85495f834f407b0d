"""Evidence (issue 38, item 4): a fragment a person writes rests on what its text cites, and a
git sync that changes exactly that re-opens it.

A tech lead writes a fragment citing ``src/x.py`` and ``refill_bucket`` in it. The function
shares its chunk with ``take_token`` (small functions are merged into one chunk), so what the
fragment rests on is the *definition*, not the chunk: a commit changing another file, or
``take_token`` in the same file, flags nothing; a commit changing ``refill_bucket`` turns the
evidence ``changed`` and sends the owner an ``evidence_changed`` nudge carrying the diff;
verifying records who and when, re-snapshots the evidence as current and answers the nudge;
deleting the function afterwards makes the evidence ``missing``. The sync is the real one
(``git init`` in a temporary directory, the real pipeline, the real database).
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from accounts.models import Role
from accounts.permissions import SYSTEM
from contexts.governance import evidence, staleness
from contexts.ingestion.git_sync import run_sync
from contexts.models import AuditEvent, Fragment, Nudge, SourceDocument
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services.fragments import create_fragment, edit_fragment
from contexts.usecases.curation import verify
from contexts.usecases.sources import AddGitSource, add_source
from tests.connectors.conftest import GitRepo, git_identity  # noqa: F401 - autouse fixture
from tests.console.conftest import client_for
from tests.factories import MembershipFactory, OrganizationFactory, RepositoryFactory

pytestmark = pytest.mark.django_db

REFILL = '''def refill_bucket(bucket, now):
    """Top the bucket up with what the elapsed time earned."""
    elapsed = now - bucket.at
    bucket.tokens = min(bucket.size, bucket.tokens + elapsed * bucket.rate)
    bucket.at = now
    return bucket
'''
REFILL_CHANGED = REFILL.replace("elapsed * bucket.rate", "elapsed * bucket.rate * 2")
TAKE = '''def take_token(bucket):
    """One token, if there is one."""
    if bucket.tokens < 1:
        return False
    bucket.tokens -= 1
    return True
'''
TAKE_CHANGED = TAKE.replace("bucket.tokens < 1", "bucket.tokens <= 0")
OTHER = '''def backoff(attempt):
    """Seconds to wait before the next attempt."""
    return min(60, 2 ** attempt)
'''
TEXT = ("Internal callers are never throttled: `refill_bucket` in src/x.py tops a bucket up "
        "by the elapsed time times the rate, so a bucket refills at most to its size.")


@pytest.fixture
def setup(tmp_path, settings):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    root = tmp_path / "upstream"
    root.mkdir()
    repo = GitRepo(root)
    repo.git("init", "-q", "-b", "main")
    org = OrganizationFactory(slug="acme")
    repository = RepositoryFactory(org=org, slug="limiter")
    lead = MembershipFactory(org=org, role=Role.TECH_LEAD, user__username="lead").user
    source = add_source(SYSTEM, AddGitSource(org=org.slug, repo=repository.slug,
                                             url=str(root)))
    return repo, source, repository, lead


def sync(source, callbacks) -> None:
    # The re-check runs once the sync's writes commit (tests run in one transaction).
    with callbacks(execute=True):
        result = run_sync(source.pk)
    assert not result.error, result.error


def test_cited_function_changes_flag_the_fragment_and_nothing_else_does(
        setup, django_capture_on_commit_callbacks):
    repo, source, repository, lead = setup
    repo.commit("first", {"src/x.py": REFILL + "\n\n" + TAKE, "src/other.py": OTHER})
    sync(source, django_capture_on_commit_callbacks)

    fragment = create_fragment(lead, repository.scope, title="Rate limits", body=TEXT,
                               kind="policy")
    fragment.refresh_from_db()
    # The path is narrowed to the one definition the text cites in it.
    assert [(e["ref"], e["kind"], e["path"], e["symbol"], e["state"])
            for e in fragment.evidence] == [
        ("refill_bucket", "symbol", "src/x.py", "refill_bucket", "current")]
    assert fragment.evidence[0]["commit"] == repo.commits[-1]
    assert fragment.evidence_paths == ["src/x.py"] and fragment.evidence_state == "current"

    # Another file changes: nothing to re-open.
    repo.commit("other file", {"src/other.py": OTHER.replace("60", "120")})
    sync(source, django_capture_on_commit_callbacks)
    # Another function of the same file (and of the same chunk) changes: nothing either.
    repo.commit("other function", {"src/x.py": REFILL + "\n\n" + TAKE_CHANGED})
    sync(source, django_capture_on_commit_callbacks)
    fragment.refresh_from_db()
    assert fragment.evidence_state == "current"
    assert not Nudge.objects.filter(fragment=fragment).exists()

    # The cited function changes.
    repo.commit("refill twice as fast", {"src/x.py": REFILL_CHANGED + "\n\n" + TAKE_CHANGED})
    sync(source, django_capture_on_commit_callbacks)
    fragment.refresh_from_db()
    assert fragment.evidence_state == "changed"
    assert fragment.evidence[0]["state"] == "changed"
    nudge = Nudge.objects.get(fragment=fragment, kind=NudgeKind.EVIDENCE_CHANGED)
    assert nudge.owner == lead and nudge.state == NudgeState.OPEN
    [ref] = nudge.detail["refs"]
    assert ref["ref"] == "refill_bucket" and ref["state"] == "changed"
    assert ref["commit"] == repo.commits[-1]
    assert "-    bucket.tokens = min(bucket.size, bucket.tokens + elapsed * bucket.rate)" \
        in ref["diff"]
    assert "+    bucket.tokens = min(bucket.size, bucket.tokens + elapsed * bucket.rate * 2)" \
        in ref["diff"]
    assert "take_token" not in ref["diff"]

    # Verifying: who and when, the evidence current again at the new text, the nudge answered.
    verify(lead, fragment)
    fragment.refresh_from_db()
    nudge.refresh_from_db()
    assert fragment.verified_by == lead and fragment.verified_at is not None
    assert fragment.evidence_state == "current" and fragment.evidence[0]["state"] == "current"
    assert nudge.state == NudgeState.ANSWERED and nudge.answer == NudgeAnswer.STILL_ACCURATE
    assert nudge.answered_by == lead
    assert AuditEvent.objects.filter(action="fragment.verify", actor=lead,
                                     object_id=fragment.public_id).exists()

    # Re-snapshotted: the same text synced again flags nothing; deleting the function does.
    repo.commit("refill goes away", {"src/x.py": TAKE_CHANGED})
    sync(source, django_capture_on_commit_callbacks)
    fragment.refresh_from_db()
    assert fragment.evidence_state == "missing"
    nudge = Nudge.objects.exclude(state=NudgeState.ANSWERED).get(
        fragment=fragment, kind=NudgeKind.EVIDENCE_CHANGED)
    assert nudge.detail["refs"][0]["state"] == "missing"


def test_an_edit_re_resolves_and_settles(setup, django_capture_on_commit_callbacks):
    repo, source, repository, lead = setup
    repo.commit("first", {"src/x.py": REFILL + "\n\n" + TAKE, "src/other.py": OTHER})
    sync(source, django_capture_on_commit_callbacks)
    fragment = create_fragment(lead, repository.scope, title="Limits", body=TEXT)
    repo.commit("change", {"src/x.py": REFILL_CHANGED + "\n\n" + TAKE})
    sync(source, django_capture_on_commit_callbacks)
    fragment.refresh_from_db()
    assert fragment.evidence_state == "changed"
    # Rewritten to cite another function instead (and a path alone: the whole file).
    with django_capture_on_commit_callbacks(execute=True):
        edit_fragment(lead, fragment, based_on_version=fragment.version,
                      body="Retries wait `backoff()` seconds; see src/other.py.")
    fragment.refresh_from_db()
    assert {(e["ref"], e["kind"], e["state"]) for e in fragment.evidence} == {
        ("backoff", "symbol", "current")}
    assert fragment.evidence_state == "current"
    assert not Nudge.objects.filter(fragment=fragment).exclude(
        state=NudgeState.ANSWERED).exists()


def test_what_a_fragment_cannot_read_is_not_evidence(setup):
    """A path of another repository, a fragment id of another organization, a common English
    word: none is evidence; the system's own writes (ingestion) resolve nothing."""
    repo, source, repository, lead = setup
    other_org = OrganizationFactory(slug="other")
    foreign = create_fragment(SYSTEM, other_org.scope, title="x", body="secret text")
    elsewhere = RepositoryFactory(org=repository.org, slug="elsewhere")
    SourceDocument.objects.create(org=repository.org, repository=elsewhere,
                                  path="src/hidden.py", content_hash="h")
    fragment = create_fragment(
        lead, repository.scope, title="t",
        body=f"See src/hidden.py and {foreign.public_id}; save the file.")
    fragment.refresh_from_db()
    assert fragment.evidence == [] and fragment.evidence_state == ""
    by_system = create_fragment(SYSTEM, repository.scope, title="t", body=TEXT)
    assert Fragment.objects.get(pk=by_system.pk).evidence == []


def test_verify_by_intervals_per_kind(setup, settings):
    """A policy a person wrote is due sooner than an ADR; the scan asks its owner once."""
    repo, source, repository, lead = setup
    settings.GOVERNANCE_VERIFY_AFTER_DAYS = {"policy": 90, "adr": 365, "default": 180}
    now = timezone.now()
    old = now - dt.timedelta(days=100)
    policy = create_fragment(lead, repository.scope, title="p", body="Policy text.",
                             kind="policy")
    adr = create_fragment(lead, repository.scope, title="a", body="Decision text.",
                          kind="adr")
    Fragment.objects.filter(pk__in=[policy.pk, adr.pk]).update(last_edited_at=old)
    due = evidence.verify_due(repository.org_id, now)
    assert set(due) == {policy.pk} and "90 days" in due[policy.pk]
    staleness.scan(now, [repository.org])
    staleness.scan(now, [repository.org])  # a rerun asks nothing twice
    nudge = Nudge.objects.get(fragment=policy, kind=NudgeKind.VERIFY_DUE)
    assert nudge.owner == lead and not Nudge.objects.filter(fragment=adr).exists()
    verify(lead, policy)
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.ANSWERED
    assert evidence.verify_due(repository.org_id, now) == {}


def test_the_fragment_page_shows_and_verifies(setup, django_capture_on_commit_callbacks):
    """The console's fragment page: "Verified: never", the evidence with its state, and a
    Verify button that records who; a viewer may not verify."""
    repo, source, repository, lead = setup
    repo.commit("first", {"src/x.py": REFILL + "\n\n" + TAKE})
    sync(source, django_capture_on_commit_callbacks)
    fragment = create_fragment(lead, repository.scope, title="Limits", body=TEXT)
    page = client_for(lead).get(f"/fragments/{fragment.public_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="verified">never' in html and "<code>refill_bucket</code> in <code>src/x.py</code>" \
        in html
    viewer = MembershipFactory(org=repository.org, role=Role.VIEWER, user__username="v").user
    assert client_for(viewer).post(
        f"/fragments/{fragment.public_id}/verify").status_code in (403, 404)
    fragment.refresh_from_db()
    assert fragment.verified_at is None
    answer = client_for(lead).post(f"/fragments/{fragment.public_id}/verify")
    assert answer.status_code == 302
    fragment.refresh_from_db()
    assert fragment.verified_by == lead
    html = client_for(lead).get(f"/fragments/{fragment.public_id}/").content.decode()
    assert f"{fragment.verified_at:%Y-%m-%d}</time> by lead" in html
