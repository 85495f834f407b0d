"""The staleness scan: which active fragments are probably no longer true, and why.

A fragment is stale for any of three reasons, each recorded as ``{code, detail}``:

``hot_unverified`` (a)
    It is in use — at least ``GOVERNANCE_HOT_MIN_USES[kind]`` retrievals plus citations, and
    retrieved within the last ``GOVERNANCE_HOT_WINDOW_DAYS`` — yet neither edited nor verified for
    longer than ``GOVERNANCE_STALE_AFTER_DAYS[kind]``. The use counters are running totals, not
    per-window counts; "often, recently" is approximated as *total ≥ N and last retrieval within
    M days*. A fragment nobody reads is not worth anyone's time to re-verify.
``source_changed`` (b)
    A source document it points to changed after the fragment was last edited or verified.
``contradicted`` (c)
    A newer active fragment *of its lineage* — same source document and heading or symbol,
    supersession, or a link (:mod:`.lineage`) — states differently something this one states
    (:func:`.detector.detect`: prose only, per :mod:`.text_rules`). "Newer" means edited after
    this fragment was last edited *or verified*, so answering "still accurate" settles the
    question until the other fragment changes again; two texts last written by the same
    ingestion run are one snapshot of the sources, never "newer" than each other.

:func:`find_stale` only reads; :func:`scan` also opens nudges, escalates overdue ones and
records a :class:`~contexts.models.StalenessScan`. Everything runs on the ``now`` it is given.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db.models import DateTimeField, F, Q
from django.db.models.functions import Coalesce, Greatest

from accounts.models import Organization
from contexts.governance import evidence, lineage
from contexts.governance.clock import per_kind, resolve, smallest
from contexts.governance.detector import Finding, Passage, detect
from contexts.governance.text_rules import CONTRADICTION_CLASSES
from contexts.models import (
    Fragment,
    FragmentStatus,
    IngestionJob,
    SourcePointer,
    StalenessScan,
)
from contexts.models.governance import NudgeKind, NudgeState

logger = logging.getLogger(__name__)

HOT_UNVERIFIED = "hot_unverified"
SOURCE_CHANGED = "source_changed"
CONTRADICTED = "contradicted"
REASON_LABELS = {
    HOT_UNVERIFIED: "used often, not verified for a long time",
    SOURCE_CHANGED: "source document changed",
    CONTRADICTED: "probably contradicted by a newer fragment",
}


@dataclass(frozen=True)
class Reason:
    code: str
    detail: str
    # What a page needs to show the reason beyond its sentence (a contradiction's passages).
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, **self.extra}


@dataclass
class ScanReport:
    org: Organization
    now: dt.datetime
    scanned: int = 0
    stale: dict[int, list[Reason]] = field(default_factory=dict)
    nudges_opened: int = 0
    nudges_escalated: int = 0
    unroutable: int = 0
    # Fragments whose kind's verify-by interval passed (contexts.governance.evidence), pk →
    # why; asked about with verify_due nudges, apart from the staleness reasons.
    verify_due: dict[int, str] = field(default_factory=dict)
    verify_nudges_opened: int = 0

    @property
    def by_reason(self) -> dict[str, int]:
        """Stale fragments per reason code (a fragment counts once per code)."""
        return dict(Counter(code for reasons in self.stale.values()
                            for code in {r.code for r in reasons}))


def _day(value: dt.datetime | None) -> str:
    return value.date().isoformat() if value else "never"


def last_confirmed(fragment: Fragment) -> dt.datetime:
    """When someone last vouched for the text: edited it or said it is still accurate."""
    if fragment.verified_at and fragment.verified_at > fragment.last_edited_at:
        return fragment.verified_at
    return fragment.last_edited_at


def _active(org: Organization):
    return Fragment.objects.filter(org=org, status=FragmentStatus.ACTIVE)


# --- (a) used often but unverified ---------------------------------------------------------------
def hot_unverified(org: Organization, now: dt.datetime) -> dict[int, list[Reason]]:
    window_start = now - dt.timedelta(days=settings.GOVERNANCE_HOT_WINDOW_DAYS)
    # Narrow in SQL with the loosest thresholds of any kind; apply the kind's own in Python.
    youngest_stale = now - dt.timedelta(days=smallest("GOVERNANCE_STALE_AFTER_DAYS"))
    rows = (_active(org)
            .annotate(uses=F("retrieved_count") + F("cited_count"))
            .filter(uses__gte=smallest("GOVERNANCE_HOT_MIN_USES"),
                    last_retrieved_at__gte=window_start, last_retrieved_at__lte=now,
                    last_edited_at__lt=youngest_stale)
            .filter(Q(verified_at__isnull=True) | Q(verified_at__lt=youngest_stale))
            .only("pk", "kind", "retrieved_count", "cited_count", "last_retrieved_at",
                  "last_edited_at", "verified_at"))
    found: dict[int, list[Reason]] = {}
    for fragment in rows:
        threshold = per_kind("GOVERNANCE_STALE_AFTER_DAYS", fragment.kind)
        min_uses = per_kind("GOVERNANCE_HOT_MIN_USES", fragment.kind)
        confirmed = last_confirmed(fragment)
        age = (now - confirmed).days
        uses = fragment.retrieved_count + fragment.cited_count
        if uses >= min_uses and now - confirmed > dt.timedelta(days=threshold):
            found[fragment.pk] = [Reason(HOT_UNVERIFIED, (
                f"{uses} uses ({fragment.retrieved_count} retrievals, {fragment.cited_count} "
                f"citations), last retrieved {_day(fragment.last_retrieved_at)}; not edited or "
                f"verified for {age} days (since {_day(confirmed)}; {fragment.kind} limit "
                f"{threshold:g} days)"))]
    return found


# --- (b) source changed ------------------------------------------------------------------------
def source_changed(org: Organization, now: dt.datetime) -> dict[int, list[Reason]]:
    confirmed = Greatest(F("fragment__last_edited_at"),
                         Coalesce(F("fragment__verified_at"), F("fragment__last_edited_at")),
                         output_field=DateTimeField())
    rows = (SourcePointer.objects
            .filter(fragment__org=org, fragment__status=FragmentStatus.ACTIVE,
                    document__changed_at__isnull=False, document__changed_at__lte=now)
            .annotate(confirmed=confirmed)
            .filter(document__changed_at__gt=F("confirmed"))
            .order_by("fragment_id", "document__path")
            .values_list("fragment_id", "document__path", "document__changed_at", "confirmed"))
    found: dict[int, list[Reason]] = {}
    for fragment_id, path, changed_at, confirmed_at in rows:
        found.setdefault(fragment_id, []).append(Reason(SOURCE_CHANGED, (
            f"{path} changed {changed_at:%Y-%m-%d %H:%M} after the fragment was last edited or "
            f"verified ({confirmed_at:%Y-%m-%d %H:%M})")))
    return found


# --- (c) contradicted by a newer fragment of its lineage ------------------------------------
def _passage(fragment: Fragment, path: str) -> Passage:
    return Passage(title=fragment.title, body=fragment.body, kind=fragment.kind, path=path,
                   heading_path=tuple(fragment.heading_path), symbol=fragment.symbol,
                   language=fragment.language)


def _ingestion_windows(org: Organization, now: dt.datetime) -> list[tuple[dt.datetime,
                                                                            dt.datetime]]:
    return [(started, finished or now) for started, finished in
            IngestionJob.objects.filter(org=org, started_at__isnull=False, started_at__lte=now)
            .values_list("started_at", "finished_at")]


def written_together(a: dt.datetime, b: dt.datetime,
                     windows: list[tuple[dt.datetime, dt.datetime]]) -> bool:
    """Both texts were last written by one ingestion run: they are one snapshot of the
    sources, so a disagreement between them is the sources' own, not staleness."""
    return any(start <= a <= end and start <= b <= end for start, end in windows)


def contradiction_reason(older: Fragment, newer: Fragment, finding: Finding) -> Reason:
    """A reason that explains itself: what differs, in plain words, and both passages."""
    passages = [{"older": d.older, "newer": d.newer, "what": d.explain()}
                for d in finding.differences]
    first = finding.differences[0]
    summary = (f"A newer fragment {finding.relation.describe()}, {newer.public_id} "
               f"“{newer.title[:80]}” (edited {_day(newer.last_edited_at)}), says something "
               "else: " + "; ".join(p["what"] for p in passages) + ".")
    # The sentence alone carries the passages too: e-mails and the CLI have no columns.
    detail = (f"{summary} This one says “{_clip(first.older)}”; the newer one says "
              f"“{_clip(first.newer)}”. If the newer one is right, edit or retire this one; "
              "if this one is, it is still accurate.")
    return Reason(CONTRADICTED, detail, {
        "summary": summary, "other": newer.public_id, "other_title": newer.title[:200],
        "lineage": finding.relation.describe(), "passages": passages})


def _clip(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def lineage_findings(org: Organization, now: dt.datetime, *, snapshots: bool = True
                     ) -> Iterator[tuple[Fragment, Fragment, Finding]]:
    """(older, newer, finding) for every contradiction within a lineage. ``snapshots=False``
    also compares texts one ingestion run wrote together (a diagnostic: what the detector
    would say about the sources' own consistency)."""
    fragments = {f.pk: f for f in _active(org).filter(last_edited_at__lte=now).only(
        "pk", "public_id", "title", "kind", "scope_id", "body", "heading_path", "symbol",
        "language", "last_edited_at", "verified_at")}
    if len(fragments) < 2:
        return
    paths = dict(SourcePointer.objects.filter(fragment_id__in=list(fragments))
                 .order_by("fragment_id", "-document__path")
                 .values_list("fragment_id", "document__path"))
    passages = {pk: _passage(f, paths.get(pk, "")) for pk, f in fragments.items()}
    # Only prose makes claims; pairing the rest would only cost time.
    prose = {pk for pk, p in passages.items() if p.text_class in CONTRADICTION_CLASSES}
    windows = _ingestion_windows(org, now) if snapshots else []
    min_overlap = settings.GOVERNANCE_CONTRADICTION_MIN_OVERLAP
    for (a, b), relation in sorted(lineage.lineage_pairs(org.pk, prose).items()):
        # The nudge quotes the other fragment: both must live in one home scope, so its owner
        # is not shown text from a scope they may not read (a link or supersession can cross).
        if fragments[a].scope_id != fragments[b].scope_id:
            continue
        for older, newer in ((fragments[a], fragments[b]), (fragments[b], fragments[a])):
            # Only a fragment written after the older one was last vouched for can contradict
            # it (which also makes the direction of the pair unambiguous).
            if snapshots and newer.last_edited_at <= last_confirmed(older):
                continue
            if not snapshots and (newer.last_edited_at, newer.pk) <= (older.last_edited_at,
                                                                      older.pk):
                continue
            if written_together(older.last_edited_at, newer.last_edited_at, windows):
                continue
            finding = detect(passages[older.pk], passages[newer.pk], relation, min_overlap)
            if finding is not None:
                yield older, newer, finding


def contradicted(org: Organization, now: dt.datetime) -> dict[int, list[Reason]]:
    found: dict[int, list[Reason]] = {}
    for older, newer, finding in lineage_findings(org, now):
        found.setdefault(older.pk, []).append(contradiction_reason(older, newer, finding))
    return found


def find_stale(org: Organization, now: dt.datetime | None = None) -> dict[int, list[Reason]]:
    """fragment pk → reasons, for every stale active fragment of ``org``. Reads only."""
    now = resolve(now)
    found: dict[int, list[Reason]] = {}
    for rule in (hot_unverified, source_changed, contradicted):
        for fragment_id, reasons in rule(org, now).items():
            found.setdefault(fragment_id, []).extend(reasons)
    return found


def scan(now: dt.datetime | None = None, orgs: Iterable[Organization] | None = None, *,
         nudge: bool = True) -> list[ScanReport]:
    """Find stale fragments in each organization, nudge their owners (at most one unanswered
    nudge per fragment — rerunning opens none twice), escalate overdue nudges and record the
    run. ``nudge=False`` is a dry run: nothing is written."""
    from contexts.governance import nudges

    now = resolve(now)
    reports = []
    for org in (orgs if orgs is not None else Organization.objects.order_by("pk")):
        report = ScanReport(org=org, now=now, scanned=_active(org).count())
        if nudge:
            nudges.reconcile(org=org, now=now)
        report.stale = find_stale(org, now)
        report.verify_due = evidence.verify_due(org.pk, now)
        if nudge:
            fragments = Fragment.objects.select_related("owner", "org", "scope").in_bulk(
                list(report.stale))
            opened, escalated, newly_escalated = [], [], []
            for fragment_id in sorted(report.stale):
                was = nudges.unanswered(fragments[fragment_id])
                outcome, item = nudges.open_nudge(
                    fragments[fragment_id], [r.as_dict() for r in report.stale[fragment_id]],
                    now=now)
                if outcome == nudges.UNROUTABLE:
                    report.unroutable += 1
                elif outcome == nudges.OPENED:
                    report.nudges_opened += 1
                    # Opened straight to the tech leads when the owner is missing/deactivated.
                    (opened if item.state == NudgeState.OPEN else escalated).append(item)
                elif was is not None and was.state != item.state:  # owner since deactivated
                    newly_escalated.append(item)
            due = Fragment.objects.select_related("owner", "org", "scope").in_bulk(
                list(report.verify_due))
            for fragment_id in sorted(due):
                outcome, item = nudges.open_nudge(
                    due[fragment_id], [{"code": "verify_due",
                                        "detail": report.verify_due[fragment_id]}],
                    now=now, kind=NudgeKind.VERIFY_DUE)
                if outcome == nudges.OPENED:
                    report.verify_nudges_opened += 1
                    (opened if item.state == NudgeState.OPEN else escalated).append(item)
            newly_escalated += nudges.escalate_overdue(org=org, now=now, send=False)
            report.nudges_escalated = len(newly_escalated)
            # One email per person: a digest of everything this scan asks them.
            nudges.notify(opened=opened, escalated=[*escalated, *newly_escalated])
            StalenessScan.objects.create(
                org=org, now=now, scanned=report.scanned, stale=len(report.stale),
                by_reason=report.by_reason, nudges_opened=report.nudges_opened,
                nudges_escalated=report.nudges_escalated, unroutable=report.unroutable)
        logger.info("staleness scan of %s: %d of %d stale %s, %d nudges opened, %d escalated; "
                    "%d due for verification, %d asked", org.slug, len(report.stale),
                    report.scanned, report.by_reason, report.nudges_opened,
                    report.nudges_escalated, len(report.verify_due),
                    report.verify_nudges_opened)
        reports.append(report)
    return reports
