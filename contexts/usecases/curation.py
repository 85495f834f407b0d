"""A person's curation of fragments: edit, retire, restore, supersede, mark negative, choose the
owner, pin, merge near-duplicates — and "verified: still true as it stands" (issue 38).

The console's fragment page calls :func:`verify`; answering a nudge "still accurate"
(``contexts.usecases.nudges.answer``) does the same through the same rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from accounts.models import Scope
from contexts.governance import dedup_review, evidence
from contexts.models import DedupCandidate, Fragment, Pin
from contexts.services import fragments as fragment_service
from contexts.services import pins as pin_service


def verify(principal: Any, fragment: Fragment) -> Fragment:
    """Record that ``principal`` verified the fragment now: ``verified_at``/``verified_by``,
    its evidence re-resolved as it stands (every entry current again, new hashes), its open
    ``evidence_changed`` and ``verify_due`` nudges answered as still accurate, audited as
    ``fragment.verify``. Curators of its scope only (:class:`PermissionDenied` otherwise)."""
    with transaction.atomic():
        now_evidence = evidence.resnapshot(fragment)
        verified = fragment_service.verify_fragment(principal, fragment, evidence=now_evidence)
        evidence.settle(verified, principal)
    return verified


# --- the console's curation actions --------------------------------------------------------------
# Each is the versioned write of ``contexts.services`` (which checks the principal's role on the
# fragment's scope, writes a version and an audit event, and tells the change feed). Adapters
# call them here, never the write modules themselves: one door for every surface (ADR 0013, the
# "one door" import contract).
def edit(principal: Any, fragment: Fragment, **changes: Any) -> Fragment:
    """A person's edit, optimistic on ``based_on_version`` (``EditConflict`` when stale)."""
    return fragment_service.edit_fragment(principal, fragment, **changes)


def retire(principal: Any, fragment: Fragment, *, reason: str = "") -> Fragment:
    return fragment_service.retire_fragment(principal, fragment, reason=reason)


def restore(principal: Any, fragment: Fragment, *, reason: str = "") -> Fragment:
    return fragment_service.restore_fragment(principal, fragment, reason=reason)


def supersede(principal: Any, old: Fragment, new: Fragment, **options: Any) -> Fragment:
    return fragment_service.supersede_fragment(principal, old, new, **options)


def mark_negative(principal: Any, fragment: Fragment, negative: bool = True) -> Fragment:
    return fragment_service.mark_negative(principal, fragment, negative)


def reassign_owner(principal: Any, fragment: Fragment, new_owner: Any) -> Fragment:
    """A person's choice of owner: it wins over the repository's until cleared."""
    return fragment_service.reassign_owner(principal, fragment, new_owner)


def follow_repository_owner(principal: Any, fragment: Fragment) -> Fragment:
    """Clear a person's choice of owner: the repository's (CODEOWNERS, ...) applies again."""
    return fragment_service.follow_repository_owner(principal, fragment)


def pin(principal: Any, fragment: Fragment, scope: Scope, **options: Any) -> Pin:
    return pin_service.pin_fragment(principal, fragment, scope, **options)


def unpin(principal: Any, fragment: Fragment, scope: Scope) -> bool:
    return pin_service.unpin_fragment(principal, fragment, scope)


def reorder_pins(principal: Any, scope: Scope, fragment_ids: Sequence[str]) -> list[Pin]:
    return pin_service.reorder_pins(principal, scope, fragment_ids)


def move_pin(principal: Any, scope: Scope, fragment: Fragment, offset: int) -> list[Pin]:
    return pin_service.move_pin(principal, scope, fragment, offset)


def merge_duplicates(principal: Any, keep: Fragment, drop: Fragment) -> Fragment:
    """Fold a near-duplicate into the fragment kept (curate on both scopes)."""
    return dedup_review.merge_duplicates(principal, keep, drop)


def dismiss_duplicate(principal: Any, candidate: DedupCandidate) -> DedupCandidate:
    return dedup_review.dismiss_candidate(principal, candidate)
