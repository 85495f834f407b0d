"""A curator's word on a fragment: "verified — still true as it stands" (issue 38).

The console's fragment page calls :func:`verify`; answering a nudge "still accurate"
(``contexts.governance.nudges.answer_nudge``) does the same through the same rules.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from contexts.governance import evidence
from contexts.models import Fragment
from contexts.services import fragments as fragment_service


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
