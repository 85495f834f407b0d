"""Every change to a fragment goes through ``contexts.services.fragments``: ingestion's front
matter and chunk fields, governance's answers and merges, the admin — each writes a version
(when text or metadata changed), an audit event and fires ``fragments_changed``, as a console
edit does.

Real PostgreSQL, real pipeline, nothing mocked; the change signal is observed with a receiver
of its own and the on-commit callbacks executed (``django_capture_on_commit_callbacks``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.contrib import admin
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from accounts.permissions import SYSTEM
from contexts.governance import nudges
from contexts.governance.dedup_review import merge_duplicates
from contexts.ingestion import pipeline
from contexts.ingestion.jobs import run_job
from contexts.ingestion.normalize import normalize
from contexts.models import (
    AuditEvent,
    Fragment,
    FragmentVersion,
    IngestionJob,
    JobState,
    Nudge,
    SourceDocument,
    SourcePointer,
)
from contexts.services import fragments as fragment_service
from contexts.services.errors import EditConflict
from contexts.services.fragments import fragments_changed
from contexts.usecases.ingestion import create_job
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ADR = "docs/adr.md"
METRICS = "src/metrics.py"


@dataclass
class Signals:
    """What ``fragments_changed`` carried: every id, and whether the sender had indexed."""

    sent: list[tuple[list[int], bool]] = field(default_factory=list)

    @property
    def ids(self) -> set[int]:
        return {pk for ids, _ in self.sent for pk in ids}


@pytest.fixture
def signals() -> Iterator[Signals]:
    seen = Signals()

    def receiver(sender, fragment_ids: list[int], indexed: bool = False, **kwargs) -> None:
        seen.sent.append((list(fragment_ids), indexed))

    fragments_changed.connect(receiver, dispatch_uid="tests.one_door")
    try:
        yield seen
    finally:
        fragments_changed.disconnect(dispatch_uid="tests.one_door")


@pytest.fixture
def tree(tmp_path, write_tree, sources, ingest_target) -> Path:
    return write_tree(tmp_path / "src", {ADR: sources.adr(ingest_target.owner.username),
                                         METRICS: sources.python_module()})


def ingest(target, root: Path, capture) -> IngestionJob:
    with capture(execute=True):  # run the change signal's on-commit sends
        job = run_job(create_job(SYSTEM, target.repo.scope, str(root),
                                 created_by=target.creator).pk)
    assert job.state == JobState.DONE, job.errors
    return job


def fragments_of(target, path: str) -> list[Fragment]:
    ids = SourcePointer.objects.filter(document__repository=target.repo,
                                       document__path=path).values_list("fragment_id")
    return list(Fragment.objects.filter(pk__in=ids).select_related("owner").order_by("pk"))


def written() -> tuple[int, int]:
    """Versions and fragment audit events (a job's own creation is audited too)."""
    return (FragmentVersion.objects.count(),
            AuditEvent.objects.filter(object_type="fragment").count())


def assert_one_door(fragments: list[Fragment], before: dict[int, int], signals: Signals, *,
                    action: str, **metadata) -> None:
    """Each fragment has exactly one new version carrying ``metadata``, an audit event of
    ``action`` from its old state to the new, and was in a change signal."""
    assert fragments
    for fragment in fragments:
        assert fragment.version == before[fragment.pk] + 1, fragment.public_id
        version = fragment.versions.get(number=fragment.version)
        for key, value in metadata.items():
            assert version.metadata[key] == value, (key, version.metadata)
        event = AuditEvent.objects.filter(action=action, object_id=fragment.public_id).latest(
            "pk")
        for key, value in metadata.items():
            assert event.after[key] == value
        assert any(event.before[key] != value for key, value in metadata.items())
        assert fragment.pk in signals.ids


# --- ingestion ---------------------------------------------------------------------------------
@pytest.mark.parametrize("edit", ["kind", "negative", "owner"])
def test_a_front_matter_change_is_versioned_audited_and_signalled(
        ingest_target, tree, sources, signals, django_capture_on_commit_callbacks, edit):
    t = ingest_target
    ingest(t, tree, django_capture_on_commit_callbacks)
    adr = fragments_of(t, ADR)
    before = {f.pk: f.version for f in adr}
    untouched = {f.pk: f.version for f in fragments_of(t, METRICS)}
    assert {f.kind for f in adr} == {"adr"} and not any(f.negative for f in adr)

    text = sources.adr(t.owner.username)
    expected: dict = {}
    if edit == "kind":
        text, expected = text.replace("kind: adr", "kind: runbook"), {"kind": "runbook"}
    elif edit == "negative":  # the negative kind carries the negative flag
        text = text.replace("kind: adr", "kind: negative")
        expected = {"kind": "negative", "negative": True}
    else:
        text, expected = sources.adr(t.other_owner.username), {"owner": "adr-new-owner"}
    (tree / ADR).write_text(text)
    signals.sent.clear()
    ingest(t, tree, django_capture_on_commit_callbacks)

    adr = fragments_of(t, ADR)
    assert_one_door(adr, before, signals, action="fragment.edit_metadata", **expected)
    # The owner comes through the repository's owner chain (contexts/ingestion/owners.py).
    reason = (f"owner from the repository: front matter for {ADR}" if edit == "owner"
              else f"front matter of {ADR}")
    assert {v.reason for f in adr for v in f.versions.filter(number=f.version)} == {reason}
    # Ingestion embedded and indexed them itself: one signal for the group, marked so.
    assert signals.sent and all(indexed for _, indexed in signals.sent)
    assert {f.pk: f.version for f in fragments_of(t, METRICS)} == untouched


def test_changed_text_carries_its_chunk_fields_in_the_same_version(
        ingest_target, tree, sources, signals, django_capture_on_commit_callbacks):
    """A re-ingested chunk's SimHash, token count and chunker version are written with its
    text by the edit, not by a later update behind the version's back."""
    t = ingest_target
    ingest(t, tree, django_capture_on_commit_callbacks)
    before = {f.pk: f.version for f in fragments_of(t, METRICS)}
    (tree / METRICS).write_text(sources.python_module(tweak_latency="latency_total = 2 * x"))
    signals.sent.clear()
    ingest(t, tree, django_capture_on_commit_callbacks)

    [changed] = [f for f in fragments_of(t, METRICS) if f.version != before[f.pk]]
    assert changed.version == before[changed.pk] + 1
    version = changed.versions.get(number=changed.version)
    assert version.metadata["chunker_version"] == changed.chunker_version
    assert version.body == changed.body and "2 * x" in changed.body
    event = AuditEvent.objects.filter(action="fragment.edit",
                                      object_id=changed.public_id).latest("pk")
    assert event.after["body"] == changed.body and event.before["body"] != changed.body
    assert changed.pk in signals.ids
    # The stored chunk fields are the chunker's, for the new text.
    pointer = changed.sources.get()
    assert pointer.content_hash == fragment_service.content_hash(changed.body)
    assert changed.simhash is not None and changed.token_count > 0


def test_an_unchanged_rerun_writes_and_signals_nothing(
        ingest_target, tree, sources, signals, django_capture_on_commit_callbacks):
    t = ingest_target
    (tree / ADR).write_text(sources.adr(t.owner.username).replace("kind: adr", "kind: policy"))
    ingest(t, tree, django_capture_on_commit_callbacks)
    counts = written()
    signals.sent.clear()
    ingest(t, tree, django_capture_on_commit_callbacks)
    assert written() == counts and signals.sent == []


def test_a_body_edit_leaves_front_matter_agreeing_fragments_alone(
        ingest_target, tree, sources, signals, django_capture_on_commit_callbacks):
    """Front matter is re-applied to a changed document, but only a fragment that differs
    is written: the edited section gets its text version, its siblings nothing."""
    t = ingest_target
    ingest(t, tree, django_capture_on_commit_callbacks)
    before = {f.pk: f.version for f in fragments_of(t, ADR)}
    metadata_events = AuditEvent.objects.filter(action="fragment.edit_metadata").count()
    text = sources.adr(t.owner.username).replace("Refill happens lazily on access.",
                                                 "Refill happens eagerly on a timer.")
    (tree / ADR).write_text(text)
    ingest(t, tree, django_capture_on_commit_callbacks)
    after = {f.pk: f.version for f in fragments_of(t, ADR)}
    assert sorted(after[pk] - before[pk] for pk in before) == [0] * (len(before) - 1) + [1]
    assert AuditEvent.objects.filter(action="fragment.edit_metadata").count() == \
        metadata_events


def test_an_owner_who_may_not_curate_is_replaced_by_the_jobs_owner_through_the_door(
        ingest_target, tree, sources, signals, django_capture_on_commit_callbacks):
    """As before: a front-matter owner outside the scope's curators is not honoured and the
    fragments take the job's owner — now with a version and an audit event like any change."""
    t = ingest_target
    ingest(t, tree, django_capture_on_commit_callbacks)
    before = {f.pk: f.version for f in fragments_of(t, ADR)}
    UserFactory(username="outsider")
    (tree / ADR).write_text(sources.adr("outsider"))
    signals.sent.clear()
    job = ingest(t, tree, django_capture_on_commit_callbacks)
    assert "outsider" in str(job.warnings)
    assert_one_door(fragments_of(t, ADR), before, signals, action="fragment.edit_metadata",
                    owner=t.creator.username)


def test_front_matter_costs_one_read_when_it_agrees_and_a_few_statements_when_not(
        ingest_target, tree, sources, django_capture_on_commit_callbacks):
    """No per-fragment queries: a document whose fragments already agree with its front
    matter costs one SELECT; a change to all of them a constant handful of statements."""
    t = ingest_target
    ingest(t, tree, django_capture_on_commit_callbacks)
    document = SourceDocument.objects.get(repository=t.repo, path=ADR)
    ingestor = pipeline.Ingestor(pipeline.Target(org=t.org, scope=t.repo.scope,
                                                 repository=t.repo, default_owner=t.creator))
    agreeing = normalize(ADR, (tree / ADR).read_text())
    ingestor._apply_front_matter(document, agreeing)  # resolves the owner once (cached)
    with CaptureQueriesContext(connection) as queries:
        ingestor._apply_front_matter(document, agreeing)
    assert len(queries) == 1

    changed = normalize(ADR, (tree / ADR).read_text().replace("kind: adr", "kind: policy"))
    count = len(fragments_of(t, ADR))
    assert count >= 4
    with CaptureQueriesContext(connection) as queries:
        ingestor._apply_front_matter(document, changed)
    assert {f.kind for f in fragments_of(t, ADR)} == {"policy"}
    # read, lock, update, versions, audit events, and the savepoint around them; then the
    # change feed: the fragments' public ids, the head, the rows, and their savepoint
    assert len(queries) <= 12 < count * 4


# --- the service functions other doors use -----------------------------------------------------
@pytest.fixture
def fragment(ingest_target) -> Fragment:
    return fragment_service.create_fragment(
        ingest_target.creator, ingest_target.repo.scope, title="Limits",
        body="The bucket holds ten tokens.", heading_path=["Limits"])


def test_console_row_actions_and_hand_over_write_versions(
        ingest_target, fragment, signals, django_capture_on_commit_callbacks):
    t = ingest_target
    with django_capture_on_commit_callbacks(execute=True):
        fragment_service.mark_negative(t.creator, fragment)
    fragment.refresh_from_db()
    assert_one_door([fragment], {fragment.pk: 1}, signals, action="fragment.mark_negative",
                    negative=True)
    with django_capture_on_commit_callbacks(execute=True):
        fragment_service.reassign_owner(t.creator, fragment, t.other_owner)
    fragment.refresh_from_db()
    assert_one_door([fragment], {fragment.pk: 2}, signals, action="fragment.reassign_owner",
                    owner="adr-new-owner")
    counts = written()
    fragment_service.reassign_owner(t.creator, fragment, t.other_owner)  # already theirs
    assert written() == counts
    # Only metadata changed since version 1: an edit of its text conflicts with nothing.
    edited = fragment_service.edit_fragment(t.creator, fragment, based_on_version=1,
                                            body="The bucket holds twelve tokens.")
    assert edited.version == 4 and (edited.negative, edited.owner) == (True, t.other_owner)
    with pytest.raises(EditConflict):  # the text changed since version 1 now
        fragment_service.edit_fragment(t.creator, fragment, based_on_version=1, body="Nine.")


def test_still_accurate_is_audited_and_signalled_without_a_version(
        ingest_target, fragment, signals, django_capture_on_commit_callbacks):
    t = ingest_target
    nudge = Nudge.objects.create(fragment=fragment, owner=t.creator, reasons=[])
    with django_capture_on_commit_callbacks(execute=True):
        nudges.answer_nudge(t.creator, nudge, "still-accurate")
    fragment.refresh_from_db()
    assert fragment.verified_at is not None and fragment.version == 1
    event = AuditEvent.objects.get(action="fragment.verify", object_id=fragment.public_id)
    assert event.actor == t.creator and event.after["nudge"] == nudge.public_id
    assert fragment.pk in signals.ids


def test_a_merge_audits_and_signals_the_fragments_it_repoints(
        ingest_target, fragment, signals, django_capture_on_commit_callbacks):
    t = ingest_target
    scope = t.repo.scope
    keep = fragment_service.create_fragment(t.creator, scope, body="Ten tokens per bucket.")
    older = fragment_service.create_fragment(t.creator, scope, body="Five tokens per bucket.")
    fragment_service.supersede_fragment(t.creator, older, fragment)
    with django_capture_on_commit_callbacks(execute=True):
        merge_duplicates(t.creator, keep, fragment)
    older.refresh_from_db()
    assert older.superseded_by == keep
    event = AuditEvent.objects.filter(action="fragment.supersede",
                                      object_id=older.public_id).latest("pk")
    assert event.after["superseded_by"] == keep.public_id
    assert {keep.pk, fragment.pk, older.pk} <= signals.ids


def test_an_admin_save_goes_through_the_services(
        ingest_target, fragment, signals, django_capture_on_commit_callbacks):
    t = ingest_target
    superuser = UserFactory(username="root", is_staff=True, is_superuser=True)
    model_admin = admin.site._registry[Fragment]
    request = RequestFactory().post("/admin/")
    request.user = superuser
    form_class = model_admin.get_form(request, fragment, change=True)
    data = {"title": "Limits", "body": "The bucket holds twenty tokens.",
            "heading_path": "Limits", "kind": "policy", "owner": t.other_owner.pk,
            "language": "", "symbol": ""}
    form = form_class(data, instance=fragment)
    assert form.is_valid(), form.errors
    with django_capture_on_commit_callbacks(execute=True):
        model_admin.save_model(request, form.save(commit=False), form, change=True)

    fragment.refresh_from_db()
    assert fragment.body == "The bucket holds twenty tokens."
    assert (fragment.kind, fragment.owner, fragment.version) == ("policy", t.other_owner, 3)
    [edit] = AuditEvent.objects.filter(action="fragment.edit", object_id=fragment.public_id)
    [change] = AuditEvent.objects.filter(action="fragment.edit_metadata",
                                         object_id=fragment.public_id)
    assert edit.actor == change.actor == superuser
    assert change.after["kind"] == "policy" and change.after["owner"] == "adr-new-owner"
    assert list(fragment.versions.values_list("reason", flat=True)) == [
        "changed in the admin", "edited in the admin", "created"]
    assert fragment.pk in signals.ids
    # What has a door of its own is not editable here.
    assert {"status", "superseded_by", "scope"} <= set(
        model_admin.get_readonly_fields(request, fragment))
    assert not model_admin.has_delete_permission(request, fragment)
