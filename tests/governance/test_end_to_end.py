"""End to end: a stale fragment → scan → email → the owner clicks "still accurate" → verified,
nudge closed → the next scan leaves it alone."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from contexts.governance import tasks
from contexts.governance.staleness import find_stale
from contexts.models import Fragment, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from tests.governance.conftest import make

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_still_accurate_link_closes_the_loop(cast, mailoutbox):
    # The clock is fixed at the start; the click happens (in real time) just after it.
    t0 = timezone.now().replace(microsecond=0)
    used = {"owner": cast.teammate, "retrieved": 12, "last_retrieved": t0 - dt.timedelta(days=2),
            "edited": t0 - dt.timedelta(days=400)}
    fragment = make(cast.repo.scope, "Rate limiter", "The bucket refills once per second.",
                    **used)
    control = make(cast.repo.scope, "Billing retries", "Billing retries charges three times.",
                   **used)

    call_command("scan_staleness", "--now", t0.isoformat())
    assert Nudge.objects.filter(state=NudgeState.OPEN).count() == 2
    [message] = mailoutbox  # one digest per owner, one entry per fragment
    assert message.to == [cast.teammate.email] and "2 of your fragments" in message.subject
    entry = next(part for part in message.body.split("\n* ") if part.startswith("Rate limiter"))
    path = re.search(r"Still accurate: +" + re.escape(settings.BASE_URL)
                     + r"(/governance/nudges/\S+)", entry).group(1)
    assert path.endswith("/still-accurate")

    client = Client()  # the owner is not logged in: the signed link is the credential
    confirm = client.get(path)
    assert confirm.status_code == 200 and b"Yes, it is still accurate" in confirm.content
    done = client.post(path)
    assert done.status_code == 200 and b"Thank you" in done.content

    fragment.refresh_from_db()
    assert fragment.verified_at is not None and fragment.verified_at >= t0
    nudge = Nudge.objects.get(fragment=fragment)
    assert (nudge.state, nudge.answer, nudge.answered_by) == (
        NudgeState.ANSWERED, NudgeAnswer.STILL_ACCURATE, cast.teammate)

    mailoutbox.clear()
    tomorrow = t0 + dt.timedelta(days=1)
    result = tasks.scan_staleness.apply(kwargs={"now": tomorrow.isoformat()}).get()
    assert result["acme"]["stale"] == 1 and result["acme"]["opened"] == 0
    stale = find_stale(cast.org, tomorrow)
    assert fragment.pk not in stale and control.pk in stale  # only the verified one is settled
    assert Nudge.objects.filter(fragment=fragment).count() == 1
    assert Nudge.objects.filter(fragment=control).count() == 1
    assert mailoutbox == []
    assert Fragment.objects.get(pk=fragment.pk).version == 1  # verifying is not editing
