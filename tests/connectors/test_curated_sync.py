"""A person's edit of a source fragment meets the file's next change (issue 38 item 1, ADR 0020).

A real git repository under ``tmp_path`` as a git source; syncs through the real pipeline into
real PostgreSQL; a tech lead edits through the fragment service as herself. Then:

* an upstream change of other lines → merged three-way: one version by the system naming the
  commit and her, both texts present, state ``merged``, audited ``fragment.source_merged``;
* an upstream change of the lines she edited → her text kept, state ``conflict``, one
  ``source_conflict`` nudge to the owner with base, upstream and curated text (a further change
  refreshes it, never a second one), audited ``fragment.source_conflict``;
* the conflict answered each of the three ways (keep mine, take upstream, edit the merge), each
  moving the base so the next sync merges from there;
* the file deleted → her fragment kept active, ``gone``, nudged; an unedited one retired;
* hostile sequences: a sync during her edit (her stale edit gets the version conflict), two
  syncs at once (one merge), a force-push that rewrites the base commit (the base is text, so
  the merge still holds).
"""

from __future__ import annotations

import subprocess
import threading

import pytest
from django.db import connections

from accounts.models import Role
from accounts.permissions import SYSTEM
from contexts.ingestion.git_sync import run_sync
from contexts.models import (
    AuditEvent,
    Fragment,
    FragmentSourceState,
    FragmentStatus,
    FragmentVersion,
    Nudge,
    SourcePointer,
)
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services import fragments as fragment_service
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases import source_conflicts
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

PATH = "docs/limits.md"
LIMITS = ("# Limits\n\n"
          "Each key gets 100 requests a minute.\n\n"
          "Bursts of 20 requests are allowed.\n\n"
          "Limits reset at midnight UTC.\n\n"
          "Exceeding the limit returns HTTP 429.\n")
OTHER = "# Glossary\n\nA bucket holds tokens; a refill adds them back.\n"
EXEMPT = "Internal callers are exempt."


@pytest.fixture
def team(world, git_repo):
    """A source with two files synced once; Ada, the tech lead, owns the limits fragment (she
    chose it in the console, so no file overrides it)."""
    ada = UserFactory(username="ada")
    MembershipFactory(user=ada, org=world.org, role=Role.TECH_LEAD)
    git_repo.commit("first", {PATH: LIMITS, "docs/glossary.md": OTHER})
    source = world.source(git_repo, "limiter")
    sync(source)
    fragment = fragment_at(source, PATH)
    fragment_service.reassign_owner(SYSTEM, fragment, ada)
    Fragment.objects.filter(pk=fragment.pk).update(owner_set_by_person=True)

    class Team:
        pass

    team = Team()
    team.ada, team.source, team.repo, team.fragment_id = ada, source, git_repo, fragment.pk
    return team


def sync(source):
    result = run_sync(source.pk, wait=True)
    assert result is not None and not result.error, result and result.error
    return result


def fragment_at(source, path: str) -> Fragment:
    return SourcePointer.objects.get(document__repository=source.repository,
                                     document__path=path).fragment


def pointer_of(fragment_id: int) -> SourcePointer:
    return SourcePointer.objects.get(fragment_id=fragment_id)


def edit(user, fragment_id: int, old: str, new: str) -> Fragment:
    fragment = Fragment.objects.get(pk=fragment_id)
    assert old in fragment.body
    return fragment_service.edit_fragment(user, fragment, based_on_version=fragment.version,
                                          body=fragment.body.replace(old, new),
                                          reason="curated")


def upstream(team, message: str, old: str, new: str) -> str:
    text = team.repo.show("HEAD", PATH).replace(old, new)
    return team.repo.commit(message, {PATH: text})


def ada_edits_bursts(team) -> Fragment:
    """Her edit: a sentence after the bursts paragraph."""
    return edit(team.ada, team.fragment_id, "Bursts of 20 requests are allowed.",
                f"Bursts of 20 requests are allowed. {EXEMPT}")


def open_nudges(fragment_id: int, kind: str) -> list[Nudge]:
    return list(Nudge.objects.filter(fragment_id=fragment_id, kind=kind)
                .exclude(state=NudgeState.ANSWERED))


def test_a_fresh_sync_records_the_base_and_in_sync(team):
    fragment = Fragment.objects.get(pk=team.fragment_id)
    pointer = pointer_of(fragment.pk)
    assert fragment.source_state == FragmentSourceState.IN_SYNC
    assert pointer.base_text == fragment.body and "100 requests" in pointer.base_text
    assert pointer.base_commit == team.repo.commits[-1]
    assert f"at {team.repo.commits[-1][:12]}" in FragmentVersion.objects.get(
        fragment=fragment, number=1).reason


def test_an_unedited_fragment_follows_its_source(team):
    sha = upstream(team, "more requests", "100 requests", "120 requests")
    result = sync(team.source)
    fragment = Fragment.objects.get(pk=team.fragment_id)
    assert "120 requests" in fragment.body and "100 requests" not in fragment.body
    assert fragment.source_state == FragmentSourceState.IN_SYNC
    assert pointer_of(fragment.pk).base_text == fragment.body
    latest = FragmentVersion.objects.get(fragment=fragment, number=fragment.version)
    assert latest.editor is None and sha[:12] in latest.reason
    assert latest.metadata["commit"] == sha
    assert result.updated == 1


def test_an_edit_and_an_upstream_change_of_other_lines_merge(team):
    ada_edits_bursts(team)
    sha = upstream(team, "more requests", "100 requests", "120 requests")
    sync(team.source)
    fragment = Fragment.objects.get(pk=team.fragment_id)
    # Both texts present: hers and the file's.
    assert EXEMPT in fragment.body and "120 requests" in fragment.body
    assert "100 requests" not in fragment.body
    assert fragment.source_state == FragmentSourceState.MERGED
    merged = FragmentVersion.objects.get(fragment=fragment, number=fragment.version)
    assert merged.editor is None
    assert merged.reason == f"merged upstream at {sha[:12]} of {PATH} with ada's edit"
    assert merged.metadata["commit"] == sha
    pointer = pointer_of(fragment.pk)
    assert "120 requests" in pointer.base_text and EXEMPT not in pointer.base_text
    assert pointer.base_commit == sha
    event = AuditEvent.objects.get(action="fragment.source_merged",
                                   object_id=fragment.public_id)
    assert event.after["commit"] == sha and event.after["editor"] == "ada"
    assert not open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)

    # The next change merges from the new base: her sentence survives again.
    upstream(team, "reset", "midnight UTC", "midnight in Reykjavik")
    sync(team.source)
    fragment.refresh_from_db()
    assert EXEMPT in fragment.body and "Reykjavik" in fragment.body
    assert "120 requests" in fragment.body


def conflict(team) -> tuple[Fragment, str]:
    """Ada rewrites the bursts line; upstream rewrites it too."""
    edit(team.ada, team.fragment_id, "Bursts of 20 requests are allowed.",
         "Bursts of 20 requests are allowed; internal callers may burst to 50.")
    sha = upstream(team, "smaller bursts", "Bursts of 20 requests", "Bursts of 10 requests")
    sync(team.source)
    return Fragment.objects.get(pk=team.fragment_id), sha


def test_overlapping_changes_keep_the_edit_and_ask_the_owner(team):
    before = Fragment.objects.get(pk=team.fragment_id)
    fragment, sha = conflict(team)
    curated = before.body.replace("Bursts of 20 requests are allowed.",
                                  "Bursts of 20 requests are allowed; internal callers may "
                                  "burst to 50.")
    assert fragment.body == curated  # still serving her text
    assert fragment.version == before.version + 1  # her edit; the sync wrote none
    assert fragment.source_state == FragmentSourceState.CONFLICT
    pointer = pointer_of(fragment.pk)
    first = FragmentVersion.objects.get(fragment=fragment, number=1).body  # the chunk's text
    assert pointer.base_text == first and pointer.base_commit == team.repo.commits[0]
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    assert nudge.owner == team.ada == fragment.owner
    assert nudge.detail["base"] == first
    assert nudge.detail["curated"] == curated
    assert "Bursts of 10 requests" in nudge.detail["upstream"]
    assert nudge.detail["commit"] == sha and nudge.detail["path"] == PATH
    assert nudge.detail["start_line"] and nudge.detail["end_line"]
    assert AuditEvent.objects.filter(action="fragment.source_conflict",
                                     object_id=fragment.public_id).count() == 1

    # Changed again upstream: the same nudge, with the new upstream text and commit.
    sha2 = upstream(team, "even smaller", "Bursts of 10 requests", "Bursts of 5 requests")
    result = sync(team.source)
    [again] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    assert again.pk == nudge.pk
    assert "Bursts of 5 requests" in again.detail["upstream"] and again.detail["commit"] == sha2
    fragment.refresh_from_db()
    assert fragment.body == curated and pointer_of(fragment.pk).base_text == first
    assert result.updated == 0  # nothing written: her text stands

    # Her next edit does not settle the question (the base has not moved).
    edit(team.ada, fragment.pk, "HTTP 429", "HTTP 429 with Retry-After")
    assert open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    # Nor does a generic "still accurate".
    from contexts.governance.nudges import answer_nudge
    with pytest.raises(InvalidOperation) as refused:
        answer_nudge(team.ada, nudge, "still_accurate")
    assert refused.value.field == "answer"


def test_keep_mine_moves_the_base_so_the_next_change_merges(team):
    fragment, sha = conflict(team)
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    kept = source_conflicts.resolve_conflict(team.ada, nudge, "keep_mine")
    assert kept.body == fragment.body and kept.version == fragment.version
    assert kept.source_state == FragmentSourceState.MERGED
    pointer = pointer_of(fragment.pk)
    assert "Bursts of 10 requests" in pointer.base_text and pointer.base_commit == sha
    nudge.refresh_from_db()
    assert (nudge.state, nudge.answer, nudge.answered_by) == (
        NudgeState.ANSWERED, NudgeAnswer.KEPT_MINE, team.ada)
    event = AuditEvent.objects.get(action="fragment.source_resolved",
                                   object_id=fragment.public_id)
    assert event.after["choice"] == "keep_mine" and event.after["commit"] == sha
    assert event.actor == team.ada

    upstream(team, "more requests", "100 requests", "120 requests")
    sync(team.source)
    kept.refresh_from_db()
    assert "internal callers may burst to 50" in kept.body and "120 requests" in kept.body
    assert kept.source_state == FragmentSourceState.MERGED
    assert not open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)


def test_take_upstream_writes_the_upstream_text_and_follows_it(team):
    fragment, sha = conflict(team)
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    taken = source_conflicts.resolve_conflict(team.ada, nudge, "take_upstream",
                                              upstream_hash=fragment_service.content_hash(
                                                  nudge.detail["upstream"]))
    assert taken.body == nudge.detail["upstream"] and taken.version == fragment.version + 1
    assert taken.source_state == FragmentSourceState.IN_SYNC
    version = FragmentVersion.objects.get(fragment=taken, number=taken.version)
    assert version.editor == team.ada and sha[:12] in version.reason
    nudge.refresh_from_db()
    assert nudge.answer == NudgeAnswer.TOOK_UPSTREAM

    upstream(team, "more requests", "100 requests", "120 requests")
    sync(team.source)
    taken.refresh_from_db()
    assert "120 requests" in taken.body and "Bursts of 10 requests" in taken.body
    assert "burst to 50" not in taken.body
    assert taken.body == pointer_of(taken.pk).base_text  # the file's text, nothing else
    assert taken.source_state == FragmentSourceState.IN_SYNC


def test_edit_the_merge_writes_the_persons_merge(team):
    fragment, sha = conflict(team)
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    view = source_conflicts.conflict_of(nudge)
    assert "<<<<<<< curated" in view.attempt and ">>>>>>> upstream" in view.attempt
    # The markers left in are refused, naming the field.
    with pytest.raises(InvalidOperation) as refused:
        source_conflicts.resolve_conflict(team.ada, nudge, "edit_merge", view.attempt)
    assert refused.value.field == "text"
    merged_by_hand = view.upstream.replace("Bursts of 10 requests are allowed.",
                                           "Bursts of 10 requests are allowed; internal "
                                           "callers may burst to 50.")
    result = source_conflicts.resolve_conflict(team.ada, nudge, "edit_merge", merged_by_hand,
                                               upstream_hash=view.upstream_hash,
                                               based_on_version=fragment.version)
    assert result.body == merged_by_hand and result.source_state == FragmentSourceState.MERGED
    assert pointer_of(fragment.pk).base_text == view.upstream
    nudge.refresh_from_db()
    assert nudge.answer == NudgeAnswer.EDITED_MERGE
    with pytest.raises(Exception) as twice:  # answered once only
        source_conflicts.resolve_conflict(team.ada, nudge, "keep_mine")
    assert "already been answered" in str(twice.value)

    upstream(team, "reset", "midnight UTC", "midnight in Reykjavik")
    sync(team.source)
    result.refresh_from_db()
    assert "burst to 50" in result.body and "Reykjavik" in result.body


def test_an_answer_on_an_upstream_text_replaced_since_is_refused(team):
    fragment, _ = conflict(team)
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    seen = source_conflicts.conflict_of(nudge).upstream_hash
    upstream(team, "even smaller", "Bursts of 10 requests", "Bursts of 5 requests")
    sync(team.source)
    with pytest.raises(InvalidOperation) as refused:
        source_conflicts.resolve_conflict(team.ada, nudge, "take_upstream", upstream_hash=seen)
    assert refused.value.field == "upstream"
    assert Fragment.objects.get(pk=fragment.pk).body == fragment.body


def test_only_the_owner_or_a_curator_may_answer(team, world):
    fragment, _ = conflict(team)
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    viewer = UserFactory(username="vic")
    MembershipFactory(user=viewer, org=world.org, role=Role.VIEWER)
    from django.core.exceptions import PermissionDenied
    with pytest.raises(PermissionDenied):
        source_conflicts.resolve_conflict(viewer, nudge, "take_upstream")
    with pytest.raises(InvalidOperation) as bad:
        source_conflicts.resolve_conflict(team.ada, nudge, "both")
    assert bad.value.field == "choice"
    assert Fragment.objects.get(pk=fragment.pk).source_state == FragmentSourceState.CONFLICT


def test_a_deleted_file_keeps_an_edited_fragment_and_retires_an_unedited_one(team):
    ada_edits_bursts(team)
    glossary = fragment_at(team.source, "docs/glossary.md")
    sha = team.repo.commit("drop both", {PATH: None, "docs/glossary.md": None})
    sync(team.source)
    kept = Fragment.objects.get(pk=team.fragment_id)
    assert kept.status == FragmentStatus.ACTIVE and EXEMPT in kept.body
    assert kept.source_state == FragmentSourceState.GONE
    [nudge] = open_nudges(kept.pk, NudgeKind.SOURCE_GONE)
    assert nudge.owner == team.ada and nudge.detail["path"] == PATH
    assert nudge.detail["commit"] == sha
    event = AuditEvent.objects.get(action="fragment.source_gone", object_id=kept.public_id)
    assert event.after["commit"] == sha
    glossary.refresh_from_db()
    assert glossary.status == FragmentStatus.RETIRED
    assert sha[:12] in AuditEvent.objects.get(action="fragment.retire",
                                              object_id=glossary.public_id).after["reason"]


def test_a_sync_during_an_edit_gets_the_edit_a_version_conflict(team):
    """She opens version N; a sync writes N+1 from the file; her save based on N is refused
    with both texts (the console's and the API's 409), not silently lost."""
    opened = Fragment.objects.get(pk=team.fragment_id)
    upstream(team, "more requests", "100 requests", "120 requests")
    sync(team.source)
    with pytest.raises(EditConflict) as conflict_:
        fragment_service.edit_fragment(team.ada, opened, based_on_version=opened.version,
                                       body=opened.body + "\nMine.\n", reason="curated")
    assert "120 requests" in conflict_.value.current_body
    assert Fragment.objects.get(pk=opened.pk).version == opened.version + 1


def test_a_force_push_that_rewrites_the_base_commit_still_merges(team):
    ada_edits_bursts(team)
    first = team.repo.commits[0]
    # Upstream rewrites history: the commit her base was read at is gone from the branch.
    team.repo.git("commit", "-q", "--amend", "-m", "first, reworded")
    rewritten = team.repo.git("rev-parse", "HEAD").strip()
    assert rewritten != first
    sha = upstream(team, "more requests", "100 requests", "120 requests")
    # The commit the base was read at is no longer in the branch's history.
    assert subprocess.run(["git", "-C", str(team.repo.root), "merge-base", "--is-ancestor",
                           first, "HEAD"], check=False).returncode == 1
    sync(team.source)
    fragment = Fragment.objects.get(pk=team.fragment_id)
    assert EXEMPT in fragment.body and "120 requests" in fragment.body
    assert fragment.source_state == FragmentSourceState.MERGED
    assert pointer_of(fragment.pk).base_commit == sha


@pytest.mark.django_db(transaction=True)
def test_two_syncs_at_once_merge_once(team):
    ada_edits_bursts(team)
    upstream(team, "more requests", "100 requests", "120 requests")
    start = threading.Barrier(2)
    results: list = []

    def one() -> None:
        try:
            start.wait(timeout=30)
            results.append(run_sync(team.source.pk, wait=True))
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            results.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 2 and all(r is not None and not isinstance(r, BaseException)
                                     and not r.error for r in results), results
    fragment = Fragment.objects.get(pk=team.fragment_id)
    assert EXEMPT in fragment.body and "120 requests" in fragment.body
    assert FragmentVersion.objects.filter(fragment=fragment,
                                          reason__startswith="merged").count() == 1
    assert AuditEvent.objects.filter(action="fragment.source_merged",
                                     object_id=fragment.public_id).count() == 1


# --- the console ---------------------------------------------------------------------------------
def test_the_console_shows_the_three_texts_and_takes_each_answer(team, world, client):
    fragment, sha = conflict(team)
    fid = fragment.public_id
    url = f"/inbox/{fid}/conflict"
    client.force_login(team.ada)
    inbox = client.get("/inbox/").content.decode()
    assert url in inbox and "changed in the lines a person edited" in inbox
    detail = client.get(f"/fragments/{fid}/").content.decode()
    assert "Against its source: <strong>conflict</strong>" in detail and url in detail

    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    for element in ("conflict-base", "conflict-upstream", "conflict-curated", "merge-text"):
        assert f'id="{element}"' in html
    assert "Bursts of 10 requests" in html and "internal callers may burst to 50" in html
    assert "&lt;&lt;&lt;&lt;&lt;&lt;&lt; curated" in html  # the attempt, escaped, prefilled
    assert sha[:12] in html
    for choice in ("keep_mine", "take_upstream", "edit_merge"):
        assert f'value="{choice}"' in html

    # Markers left in: 400, the reason shown, nothing changed.
    [nudge] = open_nudges(fragment.pk, NudgeKind.SOURCE_CONFLICT)
    view = source_conflicts.conflict_of(nudge)
    refused = client.post(url, {"choice": "edit_merge", "text": view.attempt,
                                "version": fragment.version,
                                "upstream_hash": view.upstream_hash})
    assert refused.status_code == 400 and "conflict markers" in refused.content.decode()
    # A stale version: 409.
    stale = client.post(url, {"choice": "take_upstream", "version": fragment.version - 1,
                              "upstream_hash": view.upstream_hash})
    assert stale.status_code == 409
    assert Fragment.objects.get(pk=fragment.pk).source_state == FragmentSourceState.CONFLICT

    taken = client.post(url, {"choice": "take_upstream", "version": fragment.version,
                              "upstream_hash": view.upstream_hash})
    assert taken.status_code == 302 and taken["Location"] == f"/fragments/{fid}/"
    fragment.refresh_from_db()
    assert fragment.body == view.upstream
    assert fragment.source_state == FragmentSourceState.IN_SYNC
    assert "Against its source: <strong>in sync</strong>" in client.get(
        f"/fragments/{fid}/").content.decode()
    assert client.get(url).status_code == 404  # answered: no open conflict any more


def test_the_console_conflict_page_is_not_for_everyone(team, world, client):
    fragment, _ = conflict(team)
    url = f"/inbox/{fragment.public_id}/conflict"
    viewer = UserFactory(username="vic")
    MembershipFactory(user=viewer, org=world.org, role=Role.VIEWER)
    client.force_login(viewer)
    assert client.get(url).status_code == 403
    assert client.post(url, {"choice": "take_upstream"}).status_code == 403
    stranger = UserFactory(username="mallory")
    MembershipFactory(user=stranger, role=Role.ADMIN)  # of another organization
    client.force_login(stranger)
    assert client.get(url).status_code == 404
    assert Fragment.objects.get(pk=fragment.pk).source_state == FragmentSourceState.CONFLICT


def test_the_owner_is_emailed_a_link_to_the_conflict_not_one_click_answers(team, mailoutbox,
                                                                           django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        fragment, _ = conflict(team)
    [message] = [m for m in mailoutbox if m.to == [team.ada.email]]
    assert f"/inbox/{fragment.public_id}/conflict" in message.body
    assert "Still accurate:" not in message.body
