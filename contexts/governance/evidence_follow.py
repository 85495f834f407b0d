"""After a sync or job wrote (or removed) documents: the fragments resting on them are
re-checked (:func:`contexts.governance.evidence.recheck`), and the owner of each one whose
evidence changed gets an ``evidence_changed`` nudge with the unified diff of that evidence.

Apart from :mod:`.evidence` because it opens nudges, and :mod:`.nudges` re-resolves evidence
when a nudge is answered "still accurate".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction

from contexts.governance import evidence, nudges
from contexts.governance.evidence import Documents
from contexts.models import Fragment, FragmentStatus
from contexts.models.fragments import EvidenceState
from contexts.models.governance import NudgeKind
from contexts.services import evidence as evidence_service

logger = logging.getLogger(__name__)


def follow_documents(sender: Any = None, org_id: int | None = None,
                     repository_id: int | None = None, paths: Iterable[str] = (),
                     **kwargs: Any) -> int:
    """Receiver of :data:`contexts.services.evidence.documents_changed` (after the sync's
    write committed): re-check every active fragment resting on ``paths``, store the new
    states and nudge the owners of those whose evidence changed. Returns how many were
    flagged. A failure is logged: the sync is committed, and verifying re-resolves."""
    try:
        return _follow(org_id, repository_id, set(paths))
    except Exception:  # noqa: BLE001 - see docstring
        logger.exception("could not re-check the evidence resting on %d paths", len(paths))
        return 0


def _follow(org_id: int | None, repository_id: int | None, paths: set[str]) -> int:
    if org_id is None or not paths:
        return 0
    resting = list(Fragment.objects.filter(org_id=org_id, status=FragmentStatus.ACTIVE,
                                           evidence_paths__overlap=sorted(paths))
                   .order_by("pk").values_list("pk", flat=True))
    if not resting:
        return 0
    docs = Documents(org_id, repository_id)
    documents = docs.by_path(paths)
    flagged = 0
    for pk in resting:
        # Locked while compared and stored: a person's edit landing meanwhile (which resolves
        # the evidence of its new text) is not overwritten with a re-check of the old one.
        with transaction.atomic():
            fragment = (Fragment.objects.select_for_update(of=("self",))
                        .select_related("owner", "org", "scope").get(pk=pk))
            result = evidence.recheck(fragment, docs, paths, documents)
            if result.entries == (fragment.evidence or []):
                continue
            evidence_service.store(fragment, result.entries)
        if result.flagged:
            flagged += 1
            _nudge(fragment, result.entries, result.flagged)
    return flagged


def _nudge(fragment: Fragment, entries: list[dict], flagged: list[dict]) -> None:
    """One open evidence_changed nudge per fragment: its detail lists every reference that
    changed since the fragment was verified (this sync's diffs over older ones)."""
    open_ = nudges.unanswered(fragment, NudgeKind.EVIDENCE_CHANGED)
    refs = {r["ref"]: r for r in (open_.detail.get("refs", []) if open_ else [])}
    refs.update((r["ref"], r) for r in flagged)
    still = {e["ref"] for e in entries if e.get("state") != EvidenceState.CURRENT}
    refs = {ref: r for ref, r in refs.items() if ref in still}
    reasons = [{"code": evidence.REASON, "detail": (
        f"{r['ref']} ({r['path']}) "
        + ("is gone" if r["state"] == EvidenceState.MISSING else "changed")
        + (f" at {r['commit'][:12]}" if r.get("commit") else "")
        + " since the fragment was last verified")} for r in refs.values()]
    nudges.ensure_nudge(fragment, reasons, kind=NudgeKind.EVIDENCE_CHANGED,
                        detail={"refs": list(refs.values())})
