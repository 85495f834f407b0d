"""Nudges: one per fragment, escalation, orphans, answers (incl. hand over), signed links."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import PermissionDenied
from django.test import Client

from accounts.permissions import SYSTEM
from contexts.governance import nudges
from contexts.governance.staleness import scan
from contexts.models import AuditEvent, Fragment, FragmentStatus, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import edit_fragment
from tests.governance.conftest import NOW, hot

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)
# Links start with the one configured base URL (CONTEXTS_BASE_URL; docs/operations.md).
LINK = re.compile(re.escape(django_settings.BASE_URL)
                  + r"(/governance/nudges/\S+/(still-accurate|edit|retire|"
                  r"hand-over))")


def links(message) -> dict[str, str]:
    return {answer: path for path, answer in LINK.findall(message.body)}


@pytest.fixture
def stale(cast):
    return hot(cast.repo.scope, "Rate limiter", "The token bucket refills once per second.",
               owner=cast.teammate)


def test_scan_opens_one_nudge_and_emails_the_owner(cast, stale, mailoutbox):
    [report] = scan(NOW, [cast.org])
    assert report.nudges_opened == 1
    nudge = Nudge.objects.get(fragment=stale)
    assert (nudge.owner, nudge.state, nudge.created_at) == (cast.teammate, NudgeState.OPEN, NOW)
    [message] = mailoutbox
    assert message.to == [cast.teammate.email]
    assert "Rate limiter" in message.subject
    assert set(links(message)) == {"still-accurate", "edit", "retire", "hand-over"}
    assert "not edited or verified for 200 days" in message.body
    assert nudge in nudges.inbox(cast.teammate)


def test_rerunning_the_scan_never_duplicates_nudges_or_emails(cast, stale, mailoutbox):
    for days in (0, 0, 1, 3):
        scan(NOW + days * DAY, [cast.org])
    assert Nudge.objects.filter(fragment=stale).count() == 1
    assert len(mailoutbox) == 1


def test_the_database_refuses_a_second_unanswered_nudge(cast, stale):
    from django.db import IntegrityError, transaction

    Nudge.objects.create(fragment=stale, owner=cast.teammate)
    with pytest.raises(IntegrityError), transaction.atomic():
        Nudge.objects.create(fragment=stale, owner=cast.teammate, state=NudgeState.ESCALATED)
    # … and ensure_nudge treats it as existing.
    assert nudges.ensure_nudge(stale, [], now=NOW) == nudges.EXISTING


def test_unanswered_nudge_escalates_to_tech_leads_after_n_days(cast, stale, mailoutbox,
                                                               org_lead_emails, settings):
    settings.GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS = 7
    scan(NOW, [cast.org])
    mailoutbox.clear()
    [report] = scan(NOW + 6 * DAY, [cast.org])
    assert report.nudges_escalated == 0 and mailoutbox == []
    [report] = scan(NOW + 7 * DAY, [cast.org])
    nudge = Nudge.objects.get(fragment=stale)
    assert report.nudges_escalated == 1
    assert (nudge.state, nudge.escalated_at, nudge.owner) == (NudgeState.ESCALATED,
                                                              NOW + 7 * DAY, cast.teammate)
    assert {m.to[0] for m in mailoutbox} == org_lead_emails
    assert all("Unanswered" in m.subject for m in mailoutbox)
    assert nudge in nudges.inbox(cast.lead) and nudge in nudges.inbox(cast.teammate)
    assert nudge not in nudges.inbox(cast.viewer)
    mailoutbox.clear()
    scan(NOW + 8 * DAY, [cast.org])
    assert mailoutbox == [] and Nudge.objects.filter(fragment=stale).count() == 1


def test_deactivated_owner_goes_straight_to_tech_leads(cast, stale, mailoutbox,
                                                       org_lead_emails):
    cast.teammate.is_active = False
    cast.teammate.save()
    scan(NOW, [cast.org])
    nudge = Nudge.objects.get(fragment=stale)
    assert nudge.state == NudgeState.ESCALATED and nudge.escalated_at == NOW
    assert {m.to[0] for m in mailoutbox} == org_lead_emails
    assert cast.teammate.email not in {m.to[0] for m in mailoutbox}


def test_fragment_without_owner_goes_to_tech_leads(cast, mailoutbox, org_lead_emails):
    orphan = hot(cast.repo.scope, "Orphan", "Nobody owns this.", owner=None)
    scan(NOW, [cast.org])
    nudge = Nudge.objects.get(fragment=orphan)
    assert nudge.state == NudgeState.ESCALATED
    assert nudge.owner in (cast.owner, cast.lead)
    assert {m.to[0] for m in mailoutbox} == org_lead_emails


def test_owner_deactivated_while_a_nudge_is_open_escalates_it(cast, stale, mailoutbox,
                                                              org_lead_emails):
    scan(NOW, [cast.org])
    cast.teammate.is_active = False
    cast.teammate.save()
    mailoutbox.clear()
    scan(NOW + DAY, [cast.org])
    assert Nudge.objects.get(fragment=stale).state == NudgeState.ESCALATED
    assert {m.to[0] for m in mailoutbox} == org_lead_emails


def test_nobody_to_ask_is_reported_not_crashed(cast, mailoutbox):
    from accounts.models import Membership

    Membership.objects.filter(org=cast.org, role__in=nudges.LEAD_ROLES).delete()
    orphan = hot(cast.repo.scope, "Orphan", "Nobody owns this.", owner=None)
    [report] = scan(NOW, [cast.org])
    assert orphan.pk in report.stale and report.unroutable == 1
    assert not Nudge.objects.exists() and mailoutbox == []


# --- answers -------------------------------------------------------------------------------------
def _open(cast, stale) -> Nudge:
    scan(NOW, [cast.org])
    return Nudge.objects.get(fragment=stale)


def test_still_accurate_verifies_and_the_next_scan_does_not_ask_again(cast, stale,
                                                                      mailoutbox):
    nudge = nudges.answer_nudge(cast.teammate, _open(cast, stale), "still_accurate",
                                now=NOW + DAY)
    stale.refresh_from_db()
    assert stale.verified_at == NOW + DAY
    assert (nudge.state, nudge.answer, nudge.answered_by) == (
        NudgeState.ANSWERED, NudgeAnswer.STILL_ACCURATE, cast.teammate)
    assert AuditEvent.objects.filter(action="fragment.verify", actor=cast.teammate).exists()
    mailoutbox.clear()
    [report] = scan(NOW + 2 * DAY, [cast.org])
    assert stale.pk not in report.stale and mailoutbox == []
    with pytest.raises(nudges.NudgeAlreadyAnswered):
        nudges.answer_nudge(cast.teammate, nudge, "still_accurate")


def test_retire_answer_retires_the_fragment(cast, stale):
    nudges.answer_nudge(cast.teammate, _open(cast, stale), "retire", now=NOW + DAY)
    stale.refresh_from_db()
    assert stale.status == FragmentStatus.RETIRED
    event = AuditEvent.objects.get(action="fragment.retire", object_id=stale.public_id)
    assert "staleness nudge" in event.after["reason"]


def test_edit_with_a_body_writes_a_version_and_answers(cast, stale):
    nudge = nudges.answer_nudge(cast.teammate, _open(cast, stale), "edited",
                                body="The token bucket refills twice per second.")
    stale.refresh_from_db()
    assert stale.version == 2 and "twice" in stale.body
    assert nudge.answer == NudgeAnswer.EDITED and nudge.state == NudgeState.ANSWERED


def test_edit_later_closes_the_nudge_when_the_edit_lands(cast, stale,
                                                         django_capture_on_commit_callbacks):
    nudge = nudges.answer_nudge(cast.teammate, _open(cast, stale), "edited")
    assert nudge.state == NudgeState.OPEN  # nothing edited yet
    with django_capture_on_commit_callbacks(execute=True):
        edit_fragment(cast.teammate, stale, based_on_version=1,
                      body="The token bucket refills twice per second.")
    nudge.refresh_from_db()
    assert (nudge.state, nudge.answer, nudge.answered_by) == (
        NudgeState.ANSWERED, NudgeAnswer.EDITED, cast.teammate)


def test_the_scan_closes_nudges_settled_elsewhere(cast, stale):
    nudge = _open(cast, stale)
    # An edit made without the signal (e.g. by re-ingestion) is noticed by the next scan.
    Fragment.objects.filter(pk=stale.pk).update(last_edited_at=NOW + DAY, version=2)
    scan(NOW + 2 * DAY, [cast.org])
    nudge.refresh_from_db()
    assert nudge.answer == NudgeAnswer.EDITED and nudge.answered_at == NOW + DAY


def test_hand_over_reassigns_and_nudges_the_new_owner(cast, stale, mailoutbox):
    old = _open(cast, stale)
    mailoutbox.clear()
    nudges.answer_nudge(cast.teammate, old, "handed_over", new_owner=cast.viewer,
                        now=NOW + DAY)
    stale.refresh_from_db()
    old.refresh_from_db()
    assert stale.owner == cast.viewer
    assert (old.state, old.answer) == (NudgeState.ANSWERED, NudgeAnswer.HANDED_OVER)
    new = Nudge.objects.get(fragment=stale, state=NudgeState.OPEN)
    assert new.owner == cast.viewer and new.created_at == NOW + DAY
    assert new.reasons[-1]["code"] == "handed_over"
    [message] = mailoutbox
    assert message.to == [cast.viewer.email] and "handed this fragment over" in message.body
    assert AuditEvent.objects.filter(action="fragment.reassign_owner").exists()
    # The next scan sees the new owner's nudge: still one unanswered nudge.
    scan(NOW + 2 * DAY, [cast.org])
    assert Nudge.objects.filter(fragment=stale).exclude(state=NudgeState.ANSWERED).count() == 1


def test_hand_over_needs_an_active_member(cast, stale):
    nudge = _open(cast, stale)
    for person in (None, cast.stranger):
        with pytest.raises(InvalidOperation) as error:
            nudges.answer_nudge(cast.teammate, nudge, "handed_over", new_owner=person)
        assert error.value.field == "new_owner"
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.OPEN


def test_only_the_owner_leads_and_curators_may_answer(cast, stale):
    nudge = _open(cast, stale)
    for outsider in (cast.viewer, cast.stranger):
        with pytest.raises(PermissionDenied):
            nudges.answer_nudge(outsider, nudge, "still_accurate")
    nudges.answer_nudge(cast.lead, nudge, "still_accurate")


def test_viewer_owner_answers_with_the_system_acting_on_their_behalf(cast):
    owned = hot(cast.repo.scope, "Viewer's", "Owned by a viewer.", owner=cast.viewer)
    scan(NOW, [cast.org])
    nudges.answer_nudge(cast.viewer, Nudge.objects.get(fragment=owned), "retire")
    owned.refresh_from_db()
    assert owned.status == FragmentStatus.RETIRED
    assert AuditEvent.objects.filter(action="nudge.answer", actor=cast.viewer).exists()


# --- signed one-click links ----------------------------------------------------------------------
def test_signed_link_confirms_on_get_and_applies_on_post(cast, stale, mailoutbox):
    _open(cast, stale)
    path = links(mailoutbox[0])["still-accurate"]
    client = Client()
    page = client.get(path)
    assert page.status_code == 200 and b"Yes, it is still accurate" in page.content
    assert Nudge.objects.get(fragment=stale).state == NudgeState.OPEN  # GET changes nothing
    done = client.post(path)
    assert done.status_code == 200 and b"Thank you" in done.content
    stale.refresh_from_db()
    assert stale.verified_at is not None
    nudge = Nudge.objects.get(fragment=stale)
    assert (nudge.state, nudge.answered_by) == (NudgeState.ANSWERED, cast.teammate)
    again = client.post(path)  # a second click shows the answer and changes nothing
    assert again.status_code == 200 and b"Thank you" in again.content
    assert Nudge.objects.filter(fragment=stale).count() == 1


def test_hand_over_and_edit_links(cast, stale, mailoutbox):
    _open(cast, stale)
    client = Client()
    hand_over = links(mailoutbox[0])["hand-over"]
    page = client.get(hand_over)
    assert cast.viewer.username.encode() in page.content
    assert cast.stranger.username.encode() not in page.content
    assert client.post(hand_over, {"new_owner": cast.viewer.pk}).status_code == 200
    stale.refresh_from_db()
    assert stale.owner == cast.viewer
    new_mail = mailoutbox[-1]
    assert new_mail.to == [cast.viewer.email]
    edit = links(new_mail)["edit"]
    assert client.post(edit, {"body": "Refills twice per second.", "version": "1"}
                       ).status_code == 200
    stale.refresh_from_db()
    # v2 is the hand-over (an owner change is versioned, issue 20), v3 the edit; the edit was
    # based on v1 and does not conflict, since only metadata changed in between.
    assert stale.body == "Refills twice per second." and stale.version == 3
    assert list(stale.versions.values_list("metadata__owner", flat=True)) == [
        "viewer", "viewer", "teammate"]


def test_tampered_expired_and_unknown_links_are_refused(cast, stale, mailoutbox, settings):
    _open(cast, stale)
    path = links(mailoutbox[0])["retire"]
    client = Client()
    token = path.split("/")[3]
    tampered = path.replace(token, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    assert client.post(tampered).status_code == 400
    assert client.get(path.replace("/retire", "/delete")).status_code == 404
    settings.GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS = 0
    assert client.post(path).status_code == 410
    stale.refresh_from_db()
    assert stale.status == FragmentStatus.ACTIVE


def test_a_link_is_bound_to_its_person(cast, stale, mailoutbox):
    _open(cast, stale)
    token = nudges.signed_token(Nudge.objects.get(fragment=stale), cast.viewer)
    response = Client().post(f"/governance/nudges/{token}/retire")
    assert response.status_code == 403
    stale.refresh_from_db()
    assert stale.status == FragmentStatus.ACTIVE


def test_system_principal_is_never_a_nudge_answerer(cast, stale):
    with pytest.raises(PermissionDenied):
        nudges.answer_nudge(SYSTEM, _open(cast, stale), "still_accurate")


def test_one_digest_email_per_person_per_scan(cast, mailoutbox, org_lead_emails):
    mine = [hot(cast.repo.scope, f"Mine {i}", f"Fragment number {i} text.",
                owner=cast.teammate) for i in range(3)]
    orphans = [hot(cast.repo.scope, f"Orphan {i}", f"Orphan number {i} text.", owner=None)
               for i in range(2)]
    scan(NOW, [cast.org])
    to_owner = [m for m in mailoutbox if m.to == [cast.teammate.email]]
    [digest] = to_owner
    assert "3 of your fragments" in digest.subject
    assert len(links_all(digest)) == 3 * 4  # four answers for each fragment
    assert all(f.public_id in digest.body for f in mine)
    to_leads = [m for m in mailoutbox if m.to[0] in org_lead_emails]
    assert len(to_leads) == 2  # one per lead, listing both orphans
    assert all(o.public_id in m.body for o in orphans for m in to_leads)


def links_all(message) -> list[str]:
    return [path for path, _ in LINK.findall(message.body)]


def test_console_edits_first_then_answers_edited(cast, stale):
    nudge = _open(cast, stale)
    edit_fragment(cast.teammate, stale, based_on_version=1, body="Refills twice per second.")
    answered = nudges.answer_nudge(cast.teammate, nudge, NudgeAnswer.EDITED)
    assert answered.state == NudgeState.ANSWERED and answered.answer == NudgeAnswer.EDITED
