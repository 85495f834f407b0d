"""The numbers on the governance page, per organization (plain data; the view renders it)."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, Q, QuerySet

from accounts.models import Organization
from contexts.governance.clock import resolve
from contexts.governance.ownership import Coverage, coverage
from contexts.governance.staleness import REASON_LABELS
from contexts.models import (
    DedupCandidate,
    DedupState,
    EmbeddingGeneration,
    Fragment,
    FragmentStatus,
    Nudge,
    StalenessScan,
)
from contexts.models.embeddings import GenerationState
from contexts.models.governance import NudgeAnswer, NudgeState


@dataclass
class Bar:
    label: str
    value: float
    percent: float = 0.0      # of the largest bar in the chart (CSS width)
    note: str = ""
    extra: float = 0.0        # a second series (e.g. unanswered nudges of an owner)
    extra_percent: float = 0.0


@dataclass
class OrgReport:
    org: Organization
    now: dt.datetime
    window_days: int
    last_scan: StalenessScan | None = None
    stale: int | None = None
    stale_reasons: list[Bar] = field(default_factory=list)
    trend: list[Bar] = field(default_factory=list)
    trend_svg: list[dict] = field(default_factory=list)  # precomputed <rect> geometry
    nudges_in_window: int = 0
    answered_in_window: int = 0
    response_rate: float | None = None          # 0–1
    median_response_hours: float | None = None
    answers: list[Bar] = field(default_factory=list)
    open_nudges: int = 0
    escalated_nudges: int = 0
    orphaned_count: int = 0
    orphaned: list[Fragment] = field(default_factory=list)
    owner_load: list[Bar] = field(default_factory=list)
    dedup_proposed: int = 0
    active_fragments: int = 0
    ownership: list[Coverage] = field(default_factory=list)  # per repository (issue 38)

    @property
    def median_response(self) -> str:
        return humanize_hours(self.median_response_hours)


def humanize_hours(hours: float | None) -> str:
    if hours is None:
        return "—"
    if hours < 1:
        return f"{round(hours * 60)} min"
    if hours < 48:
        return f"{hours:.1f} h"
    return f"{hours / 24:.1f} days"


def _scale(bars: list[Bar]) -> list[Bar]:
    top = max([b.value for b in bars] + [b.extra for b in bars] + [0]) or 1
    for bar in bars:
        bar.percent = round(100 * bar.value / top, 1)
        bar.extra_percent = round(100 * bar.extra / top, 1)
    return bars


def svg_columns(bars: list[Bar], width: float = 300, height: float = 80,
                gap: float = 2) -> list[dict]:
    """Column-chart geometry for an inline SVG (the template only prints numbers)."""
    if not bars:
        return []
    step = width / len(bars)
    columns = []
    for i, bar in enumerate(bars):
        h = round(height * bar.percent / 100, 2)
        columns.append({"x": round(i * step, 2), "y": round(height - h, 2),
                        "width": round(max(step - gap, 1), 2), "height": h,
                        "label": bar.label, "value": bar.value})
    return columns


def orphaned(org: Organization, fragments: QuerySet[Fragment] | None = None):
    """Active fragments nobody can be asked about: no owner, or a deactivated one."""
    fragments = Fragment.objects.all() if fragments is None else fragments
    return (fragments.filter(org=org, status=FragmentStatus.ACTIVE)
            .filter(Q(owner__isnull=True) | Q(owner__is_active=False))
            .select_related("owner").order_by("-authority", "pk"))


def org_report(org: Organization, now: dt.datetime | None = None, *,
               fragments: QuerySet[Fragment] | None = None,
               orphans_shown: int = 20, owners_shown: int = 15) -> OrgReport:
    """``fragments``: what the viewer may read (the console's ``Visible.fragments()``); the
    per-fragment numbers and lists count only those. The scan's totals are the scan's."""
    now = resolve(now)
    readable = {} if fragments is None else {"fragment__in": fragments}
    pair_readable = {} if fragments is None else {"fragment_a__in": fragments,
                                                  "fragment_b__in": fragments}
    fragments = Fragment.objects.all() if fragments is None else fragments
    window = settings.GOVERNANCE_REPORT_WINDOW_DAYS
    report = OrgReport(org=org, now=now, window_days=window)
    scans = list(StalenessScan.objects.filter(org=org, now__lte=now).order_by("-now", "-pk")[:30])
    if scans:
        report.last_scan = scans[0]
        report.stale = scans[0].stale
        report.stale_reasons = _scale([
            Bar(REASON_LABELS.get(code, code), count, note=code)
            for code, count in sorted(scans[0].by_reason.items())])
        report.trend = _scale([Bar(s.now.date().isoformat(), s.stale) for s in reversed(scans)])
        report.trend_svg = svg_columns(report.trend)

    nudges = Nudge.objects.filter(fragment__org=org, **readable)
    recent = list(nudges.filter(created_at__gte=now - dt.timedelta(days=window),
                                created_at__lte=now)
                  .values_list("state", "answer", "created_at", "answered_at"))
    report.nudges_in_window = len(recent)
    answered = [(a, c, t) for s, a, c, t in recent if s == NudgeState.ANSWERED and t]
    report.answered_in_window = len(answered)
    if recent:
        report.response_rate = len(answered) / len(recent)
    if answered:
        report.median_response_hours = statistics.median(
            max((t - c).total_seconds(), 0) / 3600 for _, c, t in answered)
    report.answers = _scale([
        Bar(NudgeAnswer(value).label, sum(1 for a, _, _ in answered if a == value))
        for value in NudgeAnswer.values])
    report.open_nudges = nudges.filter(state=NudgeState.OPEN).count()
    report.escalated_nudges = nudges.filter(state=NudgeState.ESCALATED).count()

    lost = orphaned(org, fragments)
    report.orphaned_count = lost.count()
    report.orphaned = list(lost[:orphans_shown])

    active = fragments.filter(org=org, status=FragmentStatus.ACTIVE)
    report.active_fragments = active.count()
    load = (active.exclude(owner__isnull=True).values("owner", "owner__username",
                                                     "owner__is_active")
            .annotate(fragments=Count("pk"))
            .order_by("-fragments", "owner__username")[:owners_shown])
    waiting = dict(nudges.exclude(state=NudgeState.ANSWERED).values("owner")
                   .annotate(n=Count("pk")).values_list("owner", "n"))
    report.owner_load = _scale([
        Bar(row["owner__username"], row["fragments"], extra=waiting.get(row["owner"], 0),
            note="" if row["owner__is_active"] else "deactivated")
        for row in load])
    report.dedup_proposed = DedupCandidate.objects.filter(
        org=org, state=DedupState.PROPOSED, **pair_readable).count()
    report.ownership = coverage(org, fragments)
    return report


def generations() -> list[EmbeddingGeneration]:
    return list(EmbeddingGeneration.objects.exclude(state=GenerationState.RETIRED)
                .order_by("namespace", "-created_at"))
