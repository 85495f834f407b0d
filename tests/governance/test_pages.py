"""The governance page, the supersession chain page, the scheduled tasks and commands."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import Client

from accounts.permissions import SYSTEM
from contexts.governance import nudges, report
from contexts.governance.staleness import scan
from contexts.governance.supersession import supersession_chain
from contexts.models import Nudge, StalenessScan
from contexts.services.fragments import supersede_fragment
from tests.governance.conftest import NOW, days_ago, hot, make

pytestmark = pytest.mark.django_db
DAY = dt.timedelta(days=1)


@pytest.fixture
def activity(cast):
    """Three stale fragments over two scans; two nudges answered (1 h and 3 days), one
    escalated (unanswered for 10 days)."""
    used = {"edited": days_ago(300), "retrieved": 10, "last_retrieved": days_ago(12)}
    a = make(cast.repo.scope, "A", "Alpha text.", owner=cast.teammate, **used)
    b = make(cast.repo.scope, "B", "Beta text.", owner=cast.teammate, **used)
    c = make(cast.repo.scope, "C", "Gamma text.", owner=cast.lead, **used)
    scan(NOW - 10 * DAY, [cast.org])
    nudges.answer_nudge(cast.teammate, Nudge.objects.get(fragment=a), "still_accurate",
                        now=NOW - 10 * DAY + dt.timedelta(hours=1))
    nudges.answer_nudge(cast.teammate, Nudge.objects.get(fragment=b), "still_accurate",
                        now=NOW - 7 * DAY)
    scan(NOW, [cast.org])
    return a, b, c


def test_report_numbers(cast, activity):
    make(cast.repo.scope, "Orphan", "Nobody owns this.", owner=None)
    gone = make(cast.repo.scope, "Gone", "Owner left.", owner=cast.viewer)
    cast.viewer.is_active = False
    cast.viewer.save()
    r = report.org_report(cast.org, NOW)
    assert r.stale == 1 and r.last_scan.now == NOW
    assert [bar.value for bar in r.trend] == [3, 1] and len(r.trend_svg) == 2
    assert r.nudges_in_window == 3 and r.answered_in_window == 2
    assert r.response_rate == pytest.approx(2 / 3)
    assert r.median_response_hours == pytest.approx((1 + 72) / 2)
    assert r.median_response == "36.5 h"
    assert (r.open_nudges, r.escalated_nudges) == (0, 1)  # 10 days unanswered
    assert r.orphaned_count == 2 and gone in r.orphaned
    load = {bar.label: (bar.value, bar.extra, bar.note) for bar in r.owner_load}
    assert load["teammate"] == (2, 0, "") and load["lead"] == (1, 1, "")
    assert load["viewer"] == (1, 0, "deactivated")
    assert max(bar.percent for bar in r.owner_load) == 100.0


def test_governance_page_requires_login_and_membership(cast, activity, monkeypatch):
    monkeypatch.setattr("contexts.console.views.governance.current_time", lambda: NOW)
    client = Client()
    assert client.get("/governance/").status_code == 302  # to the login page
    client.force_login(cast.teammate)
    page = client.get("/governance/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "acme" in html and "globex" not in html
    assert 'data-metric="stale">1<' in html and 'data-metric="response-rate">67%<' in html
    assert "<svg" in html and "gv-fill" in html
    # One console: its layout and navigation, its style sheet and scripts, nothing inline.
    assert 'aria-current="page">Governance<' in html and "<style" not in html
    assert re.findall(r"<script[^>]*>", html) == [
        '<script src="/static/vendor/htmx-2.0.10.min.js" defer>',
        '<script src="/static/js/console.js" defer>']
    client.force_login(cast.stranger)
    html = client.get("/governance/").content.decode()
    assert "globex" in html and "acme" not in html


def test_supersession_chain(cast):
    v1 = make(cast.repo.scope, "Limits v1", "Bucket holds 10.")
    v2 = make(cast.repo.scope, "Limits v2", "Bucket holds 20.")
    v3 = make(cast.repo.scope, "Limits v3", "Bucket holds 30.")
    side = make(cast.repo.scope, "Limits (ops)", "Ops says 25.")
    supersede_fragment(SYSTEM, v1, v2)
    supersede_fragment(SYSTEM, v2, v3)
    supersede_fragment(SYSTEM, side, v3)
    unrelated = make(cast.repo.scope, "Other", "Other.")
    for member in (v1, v2, v3):
        chain = supersession_chain(member)
        assert chain[0] == v1 and chain[-1] == v3 and chain.index(v2) < chain.index(v3)
        assert set(chain) == {v1, v2, v3, side}
    assert supersession_chain(unrelated) == [unrelated]

    client = Client()
    client.force_login(cast.viewer)
    page = client.get(f"/governance/fragments/{v2.public_id}/chain")
    assert page.status_code == 200
    html = page.content.decode().split('<ol class="gv-chain">')[1]
    assert html.index(v1.public_id) < html.index(v2.public_id) < html.index(v3.public_id)
    client.force_login(cast.stranger)
    assert client.get(f"/governance/fragments/{v2.public_id}/chain").status_code == 404


def test_commands_and_tasks(cast, capsys):
    hot(cast.repo.scope, "A", "Alpha text.", owner=cast.teammate)
    call_command("scan_staleness", "--org", "acme", "--now", NOW.isoformat(), "--dry-run",
                 "--verbose-reasons")
    assert not StalenessScan.objects.exists()
    out = capsys.readouterr().out
    assert "acme: 1 of 1 stale" in out and "hot_unverified" in out
    call_command("scan_staleness", "--now", "2026-06-01T12:00:00", "--dedup")
    assert StalenessScan.objects.get(org=cast.org).now == NOW
    from contexts.governance import tasks

    result = tasks.scan_staleness.apply(kwargs={"now": (NOW + DAY).isoformat()}).get()
    assert result["acme"] == {"stale": 1, "opened": 0, "escalated": 0}
    assert tasks.compute_authority.apply().get()["acme"] == 1
    assert tasks.propose_duplicates.apply().get()["acme"]["proposed"] == 0
    assert tasks.drop_shadow_generations.apply().get() == []


def test_beat_schedule_names_registered_tasks():
    from contexts.celery import app

    app.loader.import_default_modules()
    schedule = django_settings.CELERY_BEAT_SCHEDULE
    governance = {k: v for k, v in schedule.items() if k.startswith("governance-")}
    assert len(governance) == 4
    for entry in governance.values():
        assert entry["task"] in app.tasks
