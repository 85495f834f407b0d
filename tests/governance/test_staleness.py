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
from contexts.indexing import embed_fragments
from contexts.models import Nudge, StalenessScan
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


# --- (c) --------------------------------------------------------------------------------------
def test_newer_similar_fragment_with_a_different_number_contradicts_the_older(cast):
    older = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    newer = make(cast.repo.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
                 owner=cast.lead, edited=days_ago(5))
    stale = find_stale(cast.org, NOW)
    assert codes(stale, older) == [CONTRADICTED]
    assert newer.pk not in stale  # the newer one is not contradicted by the older one
    detail = stale[older.pk][0].detail
    assert newer.public_id in detail and "SimHash distance" in detail and "10 → 20" in detail


def test_near_identical_but_consistent_fragment_is_not_flagged(cast):
    older = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    make(cast.repo.scope, "Limiter (more)", BASE + " Dashboards live in Grafana.",
         owner=cast.lead, edited=days_ago(5))
    make(cast.repo.scope, "Limiter (same)", BASE, owner=cast.lead, edited=days_ago(4))
    assert older.pk not in find_stale(cast.org, NOW)


def test_contradiction_needs_the_same_home_scope_and_a_newer_edit(cast):
    older = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    make(cast.other_repo.scope, "Elsewhere", BASE.replace("holds 10", "holds 20"),
         owner=cast.lead, edited=days_ago(5))
    assert older.pk not in find_stale(cast.org, NOW)
    # Verified after the newer one was written: the owner already settled it.
    settled = make(cast.persona.scope, "Limiter", BASE, owner=cast.teammate,
                   edited=days_ago(100), verified=days_ago(1))
    make(cast.persona.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
         owner=cast.lead, edited=days_ago(5))
    assert settled.pk not in find_stale(cast.org, NOW)


def test_contradiction_found_by_embedding_cosine(cast):
    """SimHash distance 14 (> 12): only the vectors say these are about the same thing."""
    older = make(cast.repo.scope, "Deploys",
                 "Deploys happen on weekdays only; never deploy on Friday afternoon.",
                 owner=cast.teammate, edited=days_ago(100))
    newer = make(cast.repo.scope, "Deploys (new)",
                 "Deploys happen on weekdays only; deploying on Friday afternoon is fine now.",
                 owner=cast.lead, edited=days_ago(5))
    assert older.pk not in find_stale(cast.org, NOW)  # no vectors yet: not similar enough
    embed_fragments([older, newer])
    stale = find_stale(cast.org, NOW)
    assert codes(stale, older) == [CONTRADICTED]
    assert "cosine 0.9" in stale[older.pk][0].detail and "negation" in stale[older.pk][0].detail


def test_contradiction_thresholds_are_settings_per_kind(cast, settings):
    settings.GOVERNANCE_CONTRADICTION_MAX_HAMMING = {"default": 12, "prose": 4}
    older = make(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, edited=days_ago(100))
    make(cast.repo.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
         owner=cast.lead, edited=days_ago(5))
    assert older.pk not in find_stale(cast.org, NOW)
    runbook = make(cast.persona.scope, "Limiter", BASE, owner=cast.teammate, kind="runbook",
                   edited=days_ago(100))
    make(cast.persona.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
         owner=cast.lead, kind="runbook", edited=days_ago(5))
    assert codes(find_stale(cast.org, NOW), runbook) == [CONTRADICTED]


# --- the scan -----------------------------------------------------------------------------------
def test_reasons_accumulate_and_the_scan_is_recorded(cast, mailoutbox):
    fragment = hot(cast.repo.scope, "Limiter", BASE, owner=cast.teammate, age_days=200)
    point(fragment, "docs/limits.md", changed=days_ago(3), repository=cast.repo)
    make(cast.repo.scope, "Limiter (new)", BASE.replace("holds 10", "holds 20"),
         owner=cast.lead, edited=days_ago(5))
    [report] = scan(NOW, [cast.org])
    assert codes(report.stale, fragment) == [HOT_UNVERIFIED, SOURCE_CHANGED, CONTRADICTED]
    nudge = Nudge.objects.get(fragment=fragment)
    assert [r["code"] for r in nudge.reasons] == [HOT_UNVERIFIED, SOURCE_CHANGED, CONTRADICTED]
    assert all(set(r) == {"code", "detail"} and r["detail"] for r in nudge.reasons)
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
