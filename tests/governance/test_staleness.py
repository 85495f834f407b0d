"""Staleness rules (a) hot-but-unverified, (b) source changed, (c) contradicted — on a fixed
clock, with per-kind thresholds."""

from __future__ import annotations

import datetime as dt

import pytest

from contexts.governance.staleness import (
    CONTRADICTED,
    HOT_UNVERIFIED,
    SOURCE_CHANGED,
    find_stale,
    scan,
)
from contexts.models import IngestionJob, Link, Nudge, StalenessScan
from contexts.models.fragments import LinkKind
from tests.governance.conftest import NOW, days_ago, hot, make, point

pytestmark = pytest.mark.django_db

BASE = ("The payments service retries failed card charges with exponential backoff. "
        "The token bucket holds 10 requests and refills once per second. "
        "Alerts go to the payments on-call rotation in PagerDuty.")


def codes(stale: dict, fragment) -> list[str]:
    return [reason.code for reason in stale.get(fragment.pk, [])]


# --- (a) --------------------------------------------------------------------------------------
def test_hot_fragment_not_touched_for_longer_than_its_kind_allows_is_stale(cast):
    stale_prose = hot(cast.repo.scope, "Limiter", "The limiter refills every second.",
                      owner=cast.teammate, age_days=181)
    fresh_prose = hot(cast.repo.scope, "Retries", "Billing retries charges.",
                      owner=cast.teammate, age_days=179)
    young_policy = hot(cast.org.scope, "Deploys", "Deploy on weekdays.", owner=cast.teammate,
                       kind="policy", age_days=300)
    old_policy = hot(cast.org.scope, "Access", "Production access needs approval.",
                     owner=cast.teammate, kind="policy", age_days=366)
    stale = find_stale(cast.org, NOW)
    assert codes(stale, stale_prose) == [HOT_UNVERIFIED]
    assert codes(stale, old_policy) == [HOT_UNVERIFIED]
    assert fresh_prose.pk not in stale and young_policy.pk not in stale
    detail = stale[stale_prose.pk][0].detail
    assert "10 uses" in detail and "181 days" in detail and "prose limit 180 days" in detail


def test_rarely_or_not_recently_used_fragments_are_not_nudged(cast):
    rare = make(cast.repo.scope, "Rare", "Rarely read.", owner=cast.teammate,
                edited=days_ago(400), retrieved=4, last_retrieved=days_ago(1))
    cited = make(cast.repo.scope, "Cited", "Cited more than retrieved.", owner=cast.teammate,
                 edited=days_ago(400), retrieved=2, cited=3, last_retrieved=days_ago(1))
    forgotten = make(cast.repo.scope, "Old", "Nobody reads it any more.", owner=cast.teammate,
                     edited=days_ago(400), retrieved=50, last_retrieved=days_ago(31))
    never = make(cast.repo.scope, "Never", "Never retrieved.", owner=cast.teammate,
                 edited=days_ago(400), retrieved=0)
    stale = find_stale(cast.org, NOW)
    assert codes(stale, cited) == [HOT_UNVERIFIED]  # retrievals + citations ≥ 5
    assert not {rare.pk, forgotten.pk, never.pk} & set(stale)


def test_verification_resets_the_clock(cast):
    verified = hot(cast.repo.scope, "Verified", "Checked recently.", owner=cast.teammate,
                   age_days=400, verified=days_ago(10))
    long_ago = hot(cast.repo.scope, "Verified long ago", "Checked long ago.",
                   owner=cast.teammate, age_days=400, verified=days_ago(200))
    stale = find_stale(cast.org, NOW)
    assert verified.pk not in stale
    assert codes(stale, long_ago) == [HOT_UNVERIFIED]
    assert "since 2025-11-13" in stale[long_ago.pk][0].detail  # the verification date


def test_thresholds_are_settings_per_kind(cast, settings):
    settings.GOVERNANCE_STALE_AFTER_DAYS = {"default": 180, "policy": 365, "runbook": 30}
    settings.GOVERNANCE_HOT_MIN_USES = {"default": 5, "adr": 50}
    runbook = hot(cast.repo.scope, "Runbook", "Restart the worker.", owner=cast.teammate,
                  kind="runbook", age_days=31)
    adr = hot(cast.repo.scope, "ADR", "We chose PostgreSQL.", owner=cast.teammate, kind="adr",
              age_days=400)  # 10 uses < 50 for ADRs
    stale = find_stale(cast.org, NOW)
    assert codes(stale, runbook) == [HOT_UNVERIFIED] and adr.pk not in stale
    settings.GOVERNANCE_HOT_WINDOW_DAYS = 1  # last retrieval 2 days ago is now too old
    assert runbook.pk not in find_stale(cast.org, NOW)


def test_the_clock_is_the_one_passed_in(cast):
    fragment = hot(cast.repo.scope, "Limiter", "The limiter refills.", owner=cast.teammate,
                   age_days=170)
    assert fragment.pk not in find_stale(cast.org, NOW)
    assert fragment.pk in find_stale(cast.org, NOW + dt.timedelta(days=11))


# --- (b) --------------------------------------------------------------------------------------
def test_source_changed_after_last_edit_or_verification(cast):
    behind = make(cast.repo.scope, "Behind", "Stale copy.", owner=cast.teammate,
                  edited=days_ago(30))
    point(behind, "docs/deploy.md", changed=days_ago(5), repository=cast.repo)
    caught_up = make(cast.repo.scope, "Caught up", "Edited after the change.",
                     owner=cast.teammate, edited=days_ago(1))
    point(caught_up, "docs/limits.md", changed=days_ago(5), repository=cast.repo)
    verified = make(cast.repo.scope, "Verified", "Verified after the change.",
                    owner=cast.teammate, edited=days_ago(30), verified=days_ago(2))
    point(verified, "docs/oncall.md", changed=days_ago(5), repository=cast.repo)
    future = make(cast.repo.scope, "Future", "Source changes after NOW.", owner=cast.teammate,
                  edited=days_ago(30))
    point(future, "docs/later.md", changed=NOW + dt.timedelta(days=1), repository=cast.repo)
    stale = find_stale(cast.org, NOW)
    assert codes(stale, behind) == [SOURCE_CHANGED]
    assert "docs/deploy.md" in stale[behind.pk][0].detail
    assert not {caught_up.pk, verified.pk, future.pk} & set(stale)


def test_every_changed_source_is_a_reason(cast):
    merged = make(cast.repo.scope, "Merged", "Two sources.", owner=cast.teammate,
                  edited=days_ago(30))
    point(merged, "a.md", changed=days_ago(3), repository=cast.repo)
    point(merged, "b.md", changed=days_ago(4), repository=cast.repo)
    point(merged, "c.md", changed=days_ago(40), repository=cast.repo)
    reasons = find_stale(cast.org, NOW)[merged.pk]
    assert [r.code for r in reasons] == [SOURCE_CHANGED, SOURCE_CHANGED]
    assert "a.md" in reasons[0].detail and "b.md" in reasons[1].detail


# --- (c) ----------------------------------------------------------------------------------------
def section(scope, title: str, body: str, *, path: str = "runbooks/limits.md",
            heading=("Limits", "Token bucket"), anchor: str, changed=None, **fields):
    """A fragment ingested from ``path`` under ``heading`` (its source changed long ago, so
    only rule (c) can fire)."""
    fragment = make(scope, title, body, heading_path=list(heading), **fields)
    point(fragment, path, changed=changed or days_ago(400), anchor=anchor)
    return fragment


def test_a_newer_fragment_of_the_same_section_with_a_different_number_contradicts(cast):
    older = section(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, anchor="a1",
                    edited=days_ago(100))
    newer = section(cast.repo.scope, "Limiter (cont.)", BASE.replace("holds 10", "holds 20"),
                    owner=cast.lead, anchor="a2", edited=days_ago(5))
    stale = find_stale(cast.org, NOW)
    assert codes(stale, older) == [CONTRADICTED]
    assert newer.pk not in stale  # the newer one is not contradicted by the older one
    [reason] = stale[older.pk]
    assert newer.public_id in reason.detail and "10 → 20" in reason.detail
    assert "the same section (runbooks/limits.md › Limits › Token bucket)" in reason.detail
    # Both passages, side by side, for the pages.
    [passage] = reason.extra["passages"]
    assert "holds 10" in passage["older"] and "holds 20" in passage["newer"]
    assert passage["what"] == "a number changed (10 → 20)"
    assert reason.extra["other"] == newer.public_id


def test_look_alike_fragments_of_different_files_are_never_compared(cast):
    older = section(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, anchor="a1",
                    edited=days_ago(100))
    section(cast.repo.scope, "Limiter", BASE.replace("holds 10", "holds 20"), owner=cast.lead,
            path="runbooks/other-limits.md", anchor="a1", edited=days_ago(5))
    make(cast.repo.scope, "Limiter (console)", BASE.replace("holds 10", "holds 30"),
         owner=cast.lead, edited=days_ago(4))
    # Same file, another section: not the same subject either.
    section(cast.repo.scope, "Limiter", BASE.replace("holds 10", "holds 40"), owner=cast.lead,
            heading=("Limits", "Leaky bucket"), anchor="a3", edited=days_ago(3))
    assert older.pk not in find_stale(cast.org, NOW)


def test_links_and_supersession_are_lineages_too(cast):
    cited = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    citing = make(cast.repo.scope, "Limiter notes", BASE.replace("holds 10", "holds 20"),
                  owner=cast.lead, edited=days_ago(5))
    Link.objects.create(source=citing, target=cited, kind=LinkKind.MARKDOWN)
    old_policy = make(cast.org.scope, "Deploys", "Never deploy on Friday afternoon.",
                      owner=cast.teammate, kind="policy", edited=days_ago(100))
    new_policy = make(cast.org.scope, "Deploys (2026)", "Deploy on Friday afternoon if the "
                      "change is small.", owner=cast.lead, kind="policy", edited=days_ago(5))
    Link.objects.create(source=new_policy, target=old_policy, kind=LinkKind.SUPERSEDES)
    stale = find_stale(cast.org, NOW)
    assert codes(stale, cited) == [CONTRADICTED] and codes(stale, old_policy) == [CONTRADICTED]
    assert "linked with it" in stale[cited.pk][0].detail
    assert "supersession chain" in stale[old_policy.pk][0].detail
    assert "opposite" in stale[old_policy.pk][0].detail


def test_a_link_across_home_scopes_is_not_compared(cast):
    """The nudge would quote the other fragment to an owner who may not read its scope."""
    cited = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    citing = make(cast.other_repo.scope, "Limiter notes", BASE.replace("holds 10", "holds 20"),
                  owner=cast.lead, edited=days_ago(5))
    Link.objects.create(source=citing, target=cited, kind=LinkKind.MARKDOWN)
    assert cited.pk not in find_stale(cast.org, NOW)


def test_code_tests_generated_files_and_logs_are_not_contradicted(cast):
    pairs = [
        ("contexts/migrations/0003_nudges.py", "code",
         "field=models.CharField(max_length=200)", "field=models.CharField(max_length=300)"),
        ("contexts/limits.py", "code", "def allowed(n: int) -> None:\n    return n < 100",
         "def allowed(n: int) -> bool:\n    return n < 200"),
        ("tests/test_limits.py", "code", "The bucket holds 10 requests.",
         "The bucket holds 20 requests."),
        ("docs/performance.md", "prose", "| 7 | WSGI | 30.8–35.8 ms | 1.44–1.59 |",
         "| 8 | WSGI | 31.1–34.8 ms | 1.34–1.47 |"),
    ]
    olders = []
    for n, (path, kind, old, new) in enumerate(pairs):
        heading = ("Retrieval", "History") if path.endswith(".md") else ()
        olders.append(section(cast.repo.scope, f"old {n}", old, kind=kind, path=path,
                              heading=heading or (path,), anchor="a1", edited=days_ago(100)))
        section(cast.repo.scope, f"new {n}", new, kind=kind, path=path,
                heading=heading or (path,), anchor="a2", edited=days_ago(5))
    stale = find_stale(cast.org, NOW)
    assert not {f.pk for f in olders} & set(stale)


def test_fragments_last_written_by_one_ingestion_run_are_one_snapshot(cast):
    older = section(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, anchor="a1",
                    edited=days_ago(10, NOW) - dt.timedelta(minutes=5))
    section(cast.repo.scope, "Limiter (cont.)", BASE.replace("holds 10", "holds 20"),
            owner=cast.lead, anchor="a2", edited=days_ago(10))
    job = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source="/src",
                                      started_at=days_ago(10, NOW) - dt.timedelta(minutes=6),
                                      finished_at=days_ago(10, NOW) + dt.timedelta(minutes=1))
    assert older.pk not in find_stale(cast.org, NOW)
    # A later run rewrote only the newer one: now the older one is behind.
    IngestionJob.objects.filter(pk=job.pk).update(finished_at=days_ago(10, NOW)
                                                  - dt.timedelta(minutes=2))
    assert codes(find_stale(cast.org, NOW), older) == [CONTRADICTED]


def test_contradiction_needs_a_newer_edit_than_the_last_verification(cast):
    settled = section(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, anchor="a1",
                      edited=days_ago(100), verified=days_ago(1))
    section(cast.repo.scope, "Limiter (cont.)", BASE.replace("holds 10", "holds 20"),
            owner=cast.lead, anchor="a2", edited=days_ago(5))
    assert settled.pk not in find_stale(cast.org, NOW)


# --- the scan -----------------------------------------------------------------------------------
def test_reasons_accumulate_and_the_scan_is_recorded(cast, mailoutbox):
    fragment = hot(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, age_days=200,
                   heading_path=["Limits"])
    point(fragment, "docs/limits.md", changed=days_ago(3), repository=cast.repo)
    newer = make(cast.repo.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
                 owner=cast.lead, edited=days_ago(2), heading_path=["Limits"])
    point(newer, "docs/limits.md", changed=days_ago(3), repository=cast.repo, anchor="next")
    [report] = scan(NOW, [cast.org])
    assert codes(report.stale, fragment) == [HOT_UNVERIFIED, SOURCE_CHANGED, CONTRADICTED]
    nudge = Nudge.objects.get(fragment=fragment)
    assert [r["code"] for r in nudge.reasons] == [HOT_UNVERIFIED, SOURCE_CHANGED, CONTRADICTED]
    assert all(r["detail"] for r in nudge.reasons)
    assert nudge.reasons[2]["passages"][0]["newer"].endswith("holds 20 requests and refills "
                                                             "once per second.")
    record = StalenessScan.objects.get(org=cast.org)
    assert record.now == NOW and record.stale == 1 and record.nudges_opened == 1
    assert record.by_reason == {HOT_UNVERIFIED: 1, SOURCE_CHANGED: 1, CONTRADICTED: 1}
    assert len(mailoutbox) == 1


def test_dry_run_writes_nothing(cast, mailoutbox):
    hot(cast.repo.scope, "Limiter", "The limiter refills.", owner=cast.teammate)
    [report] = scan(NOW, [cast.org], nudge=False)
    assert len(report.stale) == 1
    assert not Nudge.objects.exists() and not StalenessScan.objects.exists()
    assert mailoutbox == []


def test_retired_and_superseded_fragments_are_not_scanned(cast):
    from accounts.permissions import SYSTEM
    from contexts.services.fragments import retire_fragment

    fragment = hot(cast.repo.scope, "Limiter", "The limiter refills.", owner=cast.teammate)
    retire_fragment(SYSTEM, fragment)
    assert find_stale(cast.org, NOW) == {}
