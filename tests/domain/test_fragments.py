"""Fragment services: versions, optimistic concurrency, retire, supersede, pins, audit."""

import pytest
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction

from contexts.kernel.compression import compress
from contexts.kernel.tokens import count_tokens
from contexts.models import AuditEvent, Fragment, FragmentStatus, FragmentVersion, Pin
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.services.fragments import (
    create_fragment,
    edit_fragment,
    mark_negative,
    reassign_owner,
    retire_fragment,
    supersede_fragment,
)
from contexts.services.pins import move_pin, pin_fragment, reorder_pins, unpin_fragment


@pytest.fixture
def fragment(cast):
    return create_fragment(cast.teammate, cast.repo.scope, title="Rate limiter",
                           body="The limiter drops requests on burst.")


def test_create_writes_version_one_and_an_audit_event(cast, fragment):
    assert fragment.public_id.startswith("frag_")
    assert fragment.scope_ids == [cast.repo.scope_id]
    assert fragment.owner == cast.teammate
    assert list(fragment.versions.values_list("number", flat=True)) == [1]
    assert AuditEvent.objects.filter(action="fragment.create",
                                     object_id=fragment.public_id).exists()


def test_an_edit_creates_a_new_version_and_keeps_the_old(cast, fragment):
    edited = edit_fragment(cast.teammate, fragment, based_on_version=1,
                           body="The limiter queues requests on burst.", reason="fix")
    assert edited.version == 2
    bodies = dict(FragmentVersion.objects.filter(fragment=fragment)
                  .values_list("number", "body"))
    assert bodies == {1: "The limiter drops requests on burst.",
                      2: "The limiter queues requests on burst."}


def test_the_packed_token_count_follows_every_body_and_heading_change(cast):
    body = "# web/limiter.py · drop\ndef drop(request):\n\n\n\n    return burst(request)\n"
    fragment = create_fragment(cast.teammate, cast.repo.scope, title="drop", body=body)
    assert fragment.packed_tokens == count_tokens(compress(body, []))
    assert fragment.packed_tokens < count_tokens(body)  # the header line and blank run go

    edited = edit_fragment(cast.teammate, fragment, based_on_version=1, body="Short now.")
    assert edited.packed_tokens == count_tokens("Short now.")
    edited = edit_fragment(cast.teammate, edited, based_on_version=2,
                           body="Limits\nQueue on burst.", heading_path=["Limits"])
    assert edited.packed_tokens == count_tokens("Queue on burst.")  # the breadcrumb goes
    retire_fragment(cast.teammate, edited, reason="gone")  # saves other fields only
    assert Fragment.objects.get(pk=fragment.pk).packed_tokens == count_tokens("Queue on burst.")


def test_an_edit_against_a_stale_version_is_refused_and_both_texts_survive(cast, fragment):
    edit_fragment(cast.teammate, fragment, based_on_version=1, body="first editor's text")
    with pytest.raises(EditConflict) as conflict:
        edit_fragment(cast.owner, fragment, based_on_version=1, body="second editor's text")
    details = conflict.value.as_dict()
    assert details["current"]["body"] == "first editor's text"
    assert details["submitted"]["body"] == "second editor's text"
    assert details["current_version"] == 2
    fragment.refresh_from_db()
    assert fragment.body == "first editor's text" and fragment.version == 2


def test_versions_cannot_be_altered_by_the_orm_or_by_sql(fragment):
    version = fragment.versions.get()
    version.body = "rewritten history"
    with pytest.raises(ValueError, match="immutable"):
        version.save()
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        FragmentVersion.objects.filter(pk=version.pk).update(body="rewritten history")
    assert FragmentVersion.objects.get(pk=version.pk).body != "rewritten history"


def test_viewers_and_strangers_cannot_change_fragments(cast, fragment):
    for who in (cast.viewer, cast.stranger, cast.token):
        with pytest.raises(PermissionDenied):
            edit_fragment(who, fragment, based_on_version=1, body="x")
        with pytest.raises(PermissionDenied):
            retire_fragment(who, fragment)
    assert Fragment.objects.get(pk=fragment.pk).version == 1


def test_retire_and_supersede_keep_history(cast, fragment):
    new = create_fragment(cast.teammate, cast.repo.scope, body="The limiter uses a token bucket.")
    supersede_fragment(cast.teammate, fragment, new)
    fragment.refresh_from_db()
    assert fragment.status == FragmentStatus.SUPERSEDED
    assert fragment.superseded_by == new and fragment.valid_to is not None
    with pytest.raises(InvalidOperation) as cycle:
        supersede_fragment(cast.teammate, new, fragment)
    assert cycle.value.field == "superseded_by"
    retire_fragment(cast.teammate, new)
    assert Fragment.objects.get(pk=new.pk).status == FragmentStatus.RETIRED
    assert Fragment.objects.filter(pk__in=[fragment.pk, new.pk]).count() == 2


def test_mark_negative_and_reassign_owner_are_audited(cast, fragment):
    mark_negative(cast.teammate, fragment)
    reassign_owner(cast.lead, fragment, cast.viewer)
    fragment.refresh_from_db()
    assert fragment.negative and fragment.owner == cast.viewer
    actions = set(AuditEvent.objects.filter(object_id=fragment.public_id)
                  .values_list("action", flat=True))
    assert {"fragment.mark_negative", "fragment.reassign_owner"} <= actions


def test_pins_need_the_pin_permission_and_keep_their_order(cast, fragment):
    other = create_fragment(cast.teammate, cast.org.scope, body="Org-wide policy.")
    with pytest.raises(PermissionDenied):
        pin_fragment(cast.teammate, fragment, cast.repo.scope)  # curators cannot pin
    pin_fragment(cast.lead, fragment, cast.repo.scope, reason="read first")
    pin_fragment(cast.lead, other, cast.repo.scope)
    order = lambda: list(Pin.objects.filter(scope=cast.repo.scope)  # noqa: E731
                         .values_list("fragment__public_id", flat=True))
    assert order() == [fragment.public_id, other.public_id]
    move_pin(cast.lead, cast.repo.scope, other, -1)
    assert order() == [other.public_id, fragment.public_id]
    with pytest.raises(InvalidOperation):
        reorder_pins(cast.lead, cast.repo.scope, [other.public_id])
    assert unpin_fragment(cast.lead, other, cast.repo.scope)
    assert order() == [fragment.public_id]
