"""Near-duplicate review: proposals for curators, and the merge they may decide on.

Ingestion collapses chunks at SimHash distance ≤ 3 on its own. Beyond that a job only
*proposes*: pairs of active fragments in the same home scope within
``GOVERNANCE_DEDUP_MIN_HAMMING``–``GOVERNANCE_DEDUP_MAX_HAMMING`` bits (default 0–8: a pair at
≤ 3 that still exists was never through ingestion's dedup, e.g. written in the console), or with
cosine ≥ ``GOVERNANCE_DEDUP_MIN_COSINE`` in the active generation, become
:class:`~contexts.models.DedupCandidate` rows. Nothing is merged without a curator.

:func:`merge_duplicates` keeps one canonical fragment that carries everything the other had:
every source pointer, citation link (both directions), pin, context membership and supersession
reference, and its use counters. The other one is retired ("merged into …"), never deleted.
The fragments change only through :mod:`contexts.services.fragments` (``merge_fragments``).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from accounts.models import Organization
from accounts.permissions import principal_user
from contexts.governance import similarity
from contexts.governance.clock import resolve
from contexts.models import (
    DedupCandidate,
    DedupState,
    Fragment,
    FragmentStatus,
    Nudge,
)
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services import audit
from contexts.services import fragments as fragment_service
from contexts.services.errors import InvalidOperation

logger = logging.getLogger(__name__)


def propose_duplicates(org: Organization, now: dt.datetime | None = None) -> dict[str, int]:
    """Store (or refresh) proposals for ``org``; returns counts of proposed / refreshed /
    withdrawn. A pair once dismissed or merged is never proposed again."""
    now = resolve(now)
    active = Fragment.objects.filter(org=org, status=FragmentStatus.ACTIVE)
    rows = list(active.values_list("pk", "scope_id", "simhash", "body"))
    close = similarity.scope_hamming_pairs(rows, settings.GOVERNANCE_DEDUP_MAX_HAMMING,
                                           settings.GOVERNANCE_DEDUP_MIN_HAMMING)
    alike = similarity.cosine_pairs(org.pk, settings.GOVERNANCE_DEDUP_MIN_COSINE,
                                    settings.GOVERNANCE_NEIGHBOURS)
    pairs = set(close) | set(alike)
    # Each proposal shows both measures, whichever test found it.
    cosines = {**similarity.cosine_of(set(close) - set(alike)), **alike}
    hashes = {pk: similarity.fingerprint(h, body) for pk, _, h, body in rows}
    distances = {(a, b): close.get((a, b), (hashes[a] ^ hashes[b]).bit_count())
                 for a, b in pairs if a in hashes and b in hashes}
    existing = {(c.fragment_a_id, c.fragment_b_id): c for c in
                DedupCandidate.objects.filter(org=org)}
    counts = {"proposed": 0, "refreshed": 0, "withdrawn": 0}
    for a, b in sorted(pairs):
        distance, cosine = distances.get((a, b)), cosines.get((a, b))
        candidate = existing.get((a, b))
        if candidate is None:
            DedupCandidate.objects.create(org=org, fragment_a_id=a, fragment_b_id=b,
                                          distance=distance, cosine=cosine, proposed_at=now)
            counts["proposed"] += 1
        elif candidate.state == DedupState.PROPOSED and (
                candidate.distance, candidate.cosine) != (distance, cosine):
            DedupCandidate.objects.filter(pk=candidate.pk).update(distance=distance,
                                                                  cosine=cosine)
            counts["refreshed"] += 1
    # A proposal whose fragments are no longer both active has nothing left to decide.
    counts["withdrawn"] = (DedupCandidate.objects
                           .filter(org=org, state=DedupState.PROPOSED)
                           .filter(~Q(fragment_a__status=FragmentStatus.ACTIVE)
                                   | ~Q(fragment_b__status=FragmentStatus.ACTIVE))
                           .update(state=DedupState.DISMISSED, decided_at=now))
    logger.info("dedup review of %s: %s", org.slug, counts)
    return counts


@transaction.atomic
def merge_duplicates(user: Any, keep: Fragment, drop: Fragment, *,
                     now: dt.datetime | None = None) -> Fragment:
    """Fold ``drop`` into ``keep`` (permission ``curate`` on both scopes; audited).

    The fragments change through :func:`contexts.services.fragments.merge_fragments`; this
    function keeps governance's own records: ``drop``'s open nudge is closed and the pair's
    proposals are settled.
    """
    now = resolve(now)
    keep, _ = fragment_service.merge_fragments(user, keep, drop)
    Nudge.objects.filter(fragment=drop).exclude(state=NudgeState.ANSWERED).update(
        state=NudgeState.ANSWERED, answer=NudgeAnswer.RETIRED, answered_at=now,
        answered_by=principal_user(user))

    pair = (min(keep.pk, drop.pk), max(keep.pk, drop.pk))
    decided = {"decided_by": principal_user(user), "decided_at": now}
    DedupCandidate.objects.filter(fragment_a_id=pair[0], fragment_b_id=pair[1]).update(
        state=DedupState.MERGED, kept=keep, **decided)
    if not DedupCandidate.objects.filter(fragment_a_id=pair[0], fragment_b_id=pair[1]).exists():
        DedupCandidate.objects.create(org_id=keep.org_id, fragment_a_id=pair[0],
                                      fragment_b_id=pair[1], state=DedupState.MERGED,
                                      kept=keep, proposed_at=now, **decided)
    # Other proposals about drop are moot; the next review pairs keep with them if still alike.
    DedupCandidate.objects.filter(Q(fragment_a=drop) | Q(fragment_b=drop),
                                  state=DedupState.PROPOSED).update(
        state=DedupState.DISMISSED, **decided)
    return keep


@transaction.atomic
def dismiss_candidate(user: Any, candidate: DedupCandidate, *,
                      now: dt.datetime | None = None) -> DedupCandidate:
    candidate = DedupCandidate.objects.select_for_update().select_related(
        "fragment_a__scope", "fragment_b__scope").get(pk=candidate.pk)
    fragment_service.require(user, "curate", candidate.fragment_a.scope)
    if candidate.state != DedupState.PROPOSED:
        raise InvalidOperation(f"this proposal is already {candidate.state}", field="state")
    candidate.state = DedupState.DISMISSED
    candidate.decided_by, candidate.decided_at = principal_user(user), resolve(now)
    candidate.save(update_fields=["state", "decided_by", "decided_at"])
    audit.record(user, "dedup.dismiss", candidate.fragment_a, after={
        "pair": [candidate.fragment_a.public_id, candidate.fragment_b.public_id]})
    return candidate
