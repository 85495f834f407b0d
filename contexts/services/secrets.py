"""No secret is stored: the screen every text passes before it becomes knowledge (ADR 0016).

Two callers, one rule:

* the one door (``contexts.services.fragments``: ``create_fragment`` and ``edit_fragment``,
  which ingestion, REST, MCP, the console, nudge answers and the admin all call) screens every
  body and title it stores — :func:`screen_write`;
* ingestion screens each file before it is normalized and chunked — :func:`screen_file` — so
  that a finding carries the file's own line number, a private key is cut out as a whole
  block before a chunk boundary could split it, and no derived field (title, links, front
  matter, the vectors) ever sees the secret. Its chunks then pass the door clean. A file's
  *path* (a folder or an archive member named after a token) is screened too —
  :func:`screen_path` — before it becomes a document's path, a title or a citation.

What a finding becomes is ``settings.SECRET_POLICY``: ``redact`` (default) stores the text with
each secret replaced by a typed placeholder (``[REDACTED:AWS Access Key]``); ``refuse`` stores
nothing of it (a write is a 400 naming ``body``; ingestion skips the chunk). Either way a
:class:`~contexts.models.SecretFinding` row records kind, file and line, an audit event
records the row, and :data:`secrets_found` tells governance to nudge the owner once the
transaction commits. The secret itself goes nowhere: not in a row, an event, an error message
or a log line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import django.dispatch
from django.conf import settings
from django.db import transaction

from accounts.models import Organization, new_public_id
from accounts.permissions import principal_user
from contexts.models import SecretAction, SecretFinding
from contexts.secret_scan import Finding, describe, redact, scan
from contexts.services import audit
from contexts.services.errors import InvalidOperation

REDACT, REFUSE = "redact", "refuse"
TITLE_LINE = 0  # a finding in a title (or a heading, or a path) is recorded on line 0
PATH = "path"

# Sent after commit with the ids of new SecretFinding rows; governance nudges the owners
# (receiver connected in ContextsConfig.ready(): services do not import governance).
secrets_found = django.dispatch.Signal()


def policy() -> str:
    return settings.SECRET_POLICY


class SecretRefused(InvalidOperation):
    """A write refused because it holds secrets (policy ``refuse``). Says which kinds on which
    lines, never a value; carries what the caller records once the write's transaction is
    gone (:func:`record_refusal`)."""

    def __init__(self, findings: list[Finding], *, org_id: int, origin: str,
                 fragment: Any = None) -> None:
        super().__init__(
            f"not stored: the text holds {len(findings)} secret"
            f"{'s' if len(findings) != 1 else ''} ({describe(findings)}). Remove "
            f"{'them' if len(findings) != 1 else 'it'} and refer to the secret store instead",
            field="body")
        # Kind and line only: an exception travels into logs and error pages.
        self.findings = [Finding(f.kind, f.line, "") for f in findings]
        self.org_id = org_id
        self.origin = origin
        self.fragment = fragment


@dataclass
class Screened:
    """A write's body and title as they may be stored, and what was taken out of them."""

    body: str
    title: str
    findings: list[Finding] = field(default_factory=list)
    heading_path: list[str] | None = None


def screen_write(*, body: str, title: str, org_id: int, origin: str,
                 fragment: Any = None, heading_path: list[str] | None = None) -> Screened:
    """The door's screen: the texts to store, redacted; raises :class:`SecretRefused` under
    policy ``refuse``. Line numbers are the body's; a title's and the headings' findings are
    on line 0."""
    body_findings = scan(body)
    title_findings = scan(title) if title else []
    heading_findings = [scan(heading) for heading in heading_path or ()]
    if not body_findings and not title_findings and not any(heading_findings):
        return Screened(body, title, heading_path=heading_path)
    findings = [*(Finding(f.kind, TITLE_LINE, f.value)
                  for f in [*title_findings, *(f for h in heading_findings for f in h)]),
                *body_findings]
    if policy() == REFUSE:
        raise SecretRefused(findings, org_id=org_id, origin=origin, fragment=fragment)
    headings = (None if heading_path is None else
                [redact(h, found) for h, found in zip(heading_path, heading_findings,
                                                      strict=True)])
    return Screened(redact(body, body_findings), redact(title, title_findings), findings,
                    headings)


def screen_path(path: str) -> tuple[str, list[Finding]]:
    """A file's path with each secret in it replaced by its placeholder, segment by segment
    (``ghp_…/notes.md`` → ``[REDACTED:GitHub Token]/notes.md``), and the findings (line 0,
    place ``path``). Deterministic, so a re-ingested file maps onto the same document."""
    whole = scan(path)
    path = redact(path, whole)  # a value spanning segments (a webhook URL as folders)
    findings = list(whole)
    segments = []
    for segment in path.split("/"):
        found = scan(segment)
        findings.extend(found)
        segments.append(redact(segment, found))
    return "/".join(segments), [Finding(f.kind, TITLE_LINE, f.value, PATH) for f in findings]


def screen_name(text: str) -> str:
    """A short text naming a file (a skipped file's reason, which may quote an archive
    member's name), its secrets replaced; nothing recorded: the path it goes with is."""
    return redact(text, scan(text)) if text else text


def screen_file(path: str, raw: bytes | str) -> tuple[str | bytes, list[Finding]]:
    """A file's text with its secrets redacted (``raw`` itself when it has none), and the
    findings with the file's line numbers. Decoded as ``ingestion.normalize`` decodes."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    findings = scan(text, filename=path)
    if not findings:
        return raw, []
    return redact(text, findings), findings


def record(principal: Any, findings: Iterable[Finding], *, org: Organization | int,
           origin: str, action: str, path: str = "", job: Any = None, document: Any = None,
           fragment: Any = None) -> list[SecretFinding]:
    """Rows and audit events for ``findings``, in the caller's transaction; the owners are
    nudged once it commits."""
    org = org if isinstance(org, Organization) else Organization(pk=org)
    actor = principal_user(principal)
    rows = [SecretFinding(
        public_id=new_public_id(SecretFinding.PUBLIC_ID_PREFIX), org=org, kind=f.kind[:80],
        action=action, origin=origin, path=path[:1000], line=f.line, job=job,
        document=document, fragment=fragment,
        fragment_version=fragment.version if fragment is not None else None, actor=actor)
        for f in findings]
    if not rows:
        return []
    SecretFinding.objects.bulk_create(rows)
    audit.record_many([audit.build(principal, f"secret.{action}", row, org=org, after={
        "kind": row.kind, "path": row.path, "line": row.line, "origin": row.origin,
        "job": job.public_id if job is not None else None,
        "fragment": fragment.public_id if fragment is not None else None}) for row in rows])
    ids = [row.pk for row in rows]
    transaction.on_commit(lambda: secrets_found.send(sender=SecretFinding, finding_ids=ids))
    return rows


def record_refusal(principal: Any, refused: SecretRefused) -> list[SecretFinding]:
    """Record a refused write. Called once the write's own transaction has rolled back, so
    the record stays (unless a caller's enclosing transaction rolls back too)."""
    with transaction.atomic():
        return record(principal, refused.findings, org=refused.org_id, origin=refused.origin,
                      action=SecretAction.REFUSED, fragment=refused.fragment)
