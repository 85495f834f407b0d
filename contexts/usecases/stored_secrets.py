"""Re-screening stored knowledge for secrets: text stored before the scan existed (ADR 0016).

The scan runs at the one door (``contexts.services.fragments``), so a fragment stored before
it — by an earlier release of an upgraded deployment — was never scanned, and a secret in it
is still served to agents. :func:`rescan_stored` walks every fragment that is not retired
(active, and superseded: those stay retrievable on request), scans its current title and body
as the door does, and hands each one that holds a secret back to that same door:

* it asks :func:`~contexts.services.fragments.edit_fragment` to store the fragment's own text
  again. Under policy ``redact`` the door stores a new version with placeholders, records the
  finding (origin ``rescan``), audits it and nudges the owner, as for any write;
* under policy ``refuse`` the door refuses that edit, and records the refusal; the fragment is
  then retired (:func:`~contexts.services.fragments.retire_fragment`, the reason naming the
  kinds and lines, never a value) — what the policy refuses to store is not served either.

Inside :func:`~contexts.services.fragments.rescanning_stored_text` the audit events of these
changes carry the text redacted: their "before" is the stored text itself, and must not copy
it. What was stored earlier keeps it: versions are immutable (their history is the point), and
so are the audit events and retrieval traces written then. The secret has been served, so it
must be rotated; nothing here purges history.

The operator runs it: ``manage.py scan_secrets --stored [--org ORG] [--dry-run]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from django.db import transaction

from accounts.models import Organization
from accounts.permissions import SYSTEM
from contexts.models import Fragment, FragmentStatus
from contexts.secret_scan import Finding, describe, scan
from contexts.services import secrets
from contexts.services.errors import EditConflict
from contexts.services.fragments import edit_fragment, rescanning_stored_text, retire_fragment

BATCH = 500
ATTEMPTS = 3  # a concurrent edit between reading and editing: read again

REDACTED, RETIRED = "redacted", "retired"
WOULD_REDACT, WOULD_RETIRE = "would redact", "would retire"
SETTLED = "settled meanwhile"  # retired by someone else before we got to it
BUSY = "edited concurrently, not changed: run again"


@dataclasses.dataclass(frozen=True)
class StoredSecret:
    """A fragment whose stored text held secrets, and what became of it. Kinds and lines
    only: the findings carry no value."""

    org: str           # the organization's slug
    fragment_id: str   # the fragment's public id
    findings: tuple[Finding, ...]
    outcome: str       # REDACTED, RETIRED, WOULD_REDACT, WOULD_RETIRE, SETTLED or BUSY

    def __str__(self) -> str:
        return f"{self.fragment_id}: {describe(self.findings)}"


@dataclasses.dataclass
class RescanReport:
    dry_run: bool
    scanned: int = 0
    with_findings: int = 0
    redacted: int = 0
    retired: int = 0
    fragments: list[StoredSecret] = dataclasses.field(default_factory=list)


def stored_findings(title: str, body: str) -> list[Finding]:
    """What the door's screen would find in this text: the title's on line 0, then the
    body's (``contexts.services.secrets.screen_write``)."""
    return [*(Finding(f.kind, secrets.TITLE_LINE, f.value) for f in scan(title or "")),
            *scan(body)]


def _live(org: Organization | None) -> Iterator[tuple[int, str, str, str, str]]:
    """(pk, public id, org slug, title, body) of every fragment not retired, in batches by
    primary key (no cursor held open while the fragments change)."""
    rows = Fragment.objects.exclude(status=FragmentStatus.RETIRED)
    if org is not None:
        rows = rows.filter(org=org)
    last = 0
    while True:
        batch = list(rows.filter(pk__gt=last).order_by("pk").values_list(
            "pk", "public_id", "org__slug", "title", "body")[:BATCH])
        yield from batch
        if len(batch) < BATCH:
            return
        last = batch[-1][0]


def _settle(pk: int) -> tuple[str, list[Finding]]:
    """Hand one fragment's stored text back to the door; the outcome and what was found."""
    for _ in range(ATTEMPTS):
        fragment = Fragment.objects.select_related("org").get(pk=pk)
        findings = stored_findings(fragment.title, fragment.body)
        if fragment.status == FragmentStatus.RETIRED or not findings:
            return SETTLED, findings
        try:
            with transaction.atomic():
                try:
                    edit_fragment(SYSTEM, fragment, based_on_version=fragment.version,
                                  body=fragment.body, title=fragment.title,
                                  reason=f"secret scan of stored text: {describe(findings)}")
                except secrets.SecretRefused:
                    # The door recorded the refusal (and nudges the owner once this commits).
                    retire_fragment(SYSTEM, fragment, reason=(
                        f"held secrets stored before the secret scan ({describe(findings)}); "
                        "policy refuse"))
                    return RETIRED, findings
        except EditConflict:
            # Edited between our read and the edit (the conflict carries the stored text:
            # it goes no further). Read it again.
            continue
        return REDACTED, findings
    return BUSY, findings


def rescan_stored(org: Organization | None = None, *, dry_run: bool = False) -> RescanReport:
    """Scan the stored title and body of every fragment not retired — of ``org``, or of every
    organization — and pass each that holds a secret through the door again (module
    docstring). ``dry_run`` only reports. Run as the operator (``SYSTEM``)."""
    report = RescanReport(dry_run=dry_run)
    would = WOULD_RETIRE if secrets.policy() == secrets.REFUSE else WOULD_REDACT
    for pk, public_id, slug, title, body in _live(org):
        report.scanned += 1
        findings = stored_findings(title, body)
        if not findings:
            continue
        if dry_run:
            outcome = would
        else:
            with rescanning_stored_text():
                outcome, findings = _settle(pk)
            if not findings:
                continue  # edited clean meanwhile
        report.with_findings += 1
        report.redacted += outcome == REDACTED
        report.retired += outcome == RETIRED
        report.fragments.append(StoredSecret(
            org=slug, fragment_id=public_id, outcome=outcome,
            findings=tuple(Finding(f.kind, f.line, "") for f in findings)))
    return report
