"""Owner inbox: one-click answers to staleness nudges."""

import pytest

from contexts.models import Nudge
from tests.console.conftest import HTMX, client_for


@pytest.fixture
def nudge(cast, notes):
    return Nudge.objects.create(fragment=notes.limiter, owner=cast.teammate,
                                reasons=[{"code": "source_changed",
                                          "detail": "limiter.py changed 3 times"}])


def answer(client, nudge, value, **data):
    return client.post(f"/inbox/{nudge.fragment.public_id}/answer", {"answer": value, **data},
                       **HTMX)


def test_the_inbox_lists_my_nudges_and_my_fragments(cast, notes, nudge):
    page = client_for(cast.teammate).get("/inbox/").content.decode()
    assert "limiter.py changed 3 times" in page and "Still accurate" in page
    assert page.count("Rate limiter") >= 2  # the nudge and "fragments you own"
    assert "limiter.py" not in client_for(cast.lead).get("/inbox/").content.decode()


def test_still_accurate_verifies_the_fragment(cast, notes, nudge):
    response = answer(client_for(cast.teammate), nudge, "still_accurate")
    assert b"Answered: still accurate" in response.content
    nudge.refresh_from_db()
    notes.limiter.refresh_from_db()
    assert nudge.state == "answered" and nudge.answered_by == cast.teammate
    assert notes.limiter.verified_at is not None


def test_retire_retires_the_fragment(cast, notes, nudge):
    answer(client_for(cast.teammate), nudge, "retired")
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "retired"


def test_hand_over_reassigns_the_owner(cast, notes, nudge):
    answer(client_for(cast.teammate), nudge, "handed_over", new_owner="lead")
    nudge.refresh_from_db()
    notes.limiter.refresh_from_db()
    assert notes.limiter.owner == cast.lead and nudge.answer == "handed_over"


def test_hand_over_to_a_stranger_is_refused(cast, notes, nudge):
    response = answer(client_for(cast.teammate), nudge, "handed_over", new_owner="stranger")
    assert b"Choose a member of the organization" in response.content
    nudge.refresh_from_db()
    assert nudge.state == "open"


def test_editing_answers_the_nudge(cast, notes, nudge):
    client_for(cast.teammate).post(f"/fragments/{notes.limiter.public_id}/edit",
                                   {"title": "Rate limiter", "body": "Refreshed.",
                                    "based_on_version": 1})
    nudge.refresh_from_db()
    assert nudge.state == "answered" and nudge.answer == "edited"


def test_a_viewer_cannot_answer_someone_else_s_nudge(cast, notes, nudge):
    assert answer(client_for(cast.viewer), nudge, "retired").status_code == 403
    notes.limiter.refresh_from_db()
    assert notes.limiter.status == "active"
