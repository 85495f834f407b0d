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
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from accounts.models import Organization
from accounts.permissions import principal_user
from contexts.governance import similarity
from contexts.governance.clock import resolve
from contexts.models import (
    DedupCandidate,
    DedupState,
    Fragment,
    FragmentStatus,
    Link,
    Nudge,
    Pin,
    SourcePointer,
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


def _move_links(keep: Fragment, drop: Fragment) -> int:
    moved = 0
    for link in Link.objects.filter(Q(source=drop) | Q(target=drop)):
        source = keep.pk if link.source_id == drop.pk else link.source_id
        target = keep.pk if link.target_id == drop.pk else link.target_id
        if source != target:  # keep ↔ drop links would become self-citations
            _, created = Link.objects.get_or_create(source_id=source, target_id=target,
                                                    kind=link.kind,
                                                    defaults={"created_at": link.created_at})
            moved += created
        link.delete()
    return moved


def _move_pins(keep: Fragment, drop: Fragment) -> int:
    moved = 0
    for pin in Pin.objects.filter(fragment=drop):
        if Pin.objects.filter(fragment=keep, scope_id=pin.scope_id).exists():
            pin.delete()  # keep is pinned there already; its own position wins
        else:
            Pin.objects.filter(pk=pin.pk).update(fragment=keep)
            moved += 1
    return moved


@transaction.atomic
def merge_duplicates(user: Any, keep: Fragment, drop: Fragment, *,
                     now: dt.datetime | None = None) -> Fragment:
    """Fold ``drop`` into ``keep`` (permission ``curate`` on both scopes; audited)."""
    now = resolve(now)
    if keep.pk == drop.pk:
        raise InvalidOperation("a fragment cannot be merged into itself", field="keep")
    # Both rows locked in primary-key order, so two concurrent merges cannot deadlock.
    locked = {f.pk: f for f in Fragment.objects.select_for_update(of=("self",))
              .select_related("scope").filter(pk__in=[keep.pk, drop.pk]).order_by("pk")}
    keep, drop = locked[keep.pk], locked[drop.pk]
    if keep.org_id != drop.org_id:
        raise InvalidOperation("duplicates must be in the same organization", field="drop")
    fragment_service.require(user, "curate", keep.scope)
    fragment_service.require(user, "curate", drop.scope)
    for fragment, field in ((keep, "keep"), (drop, "drop")):
        if fragment.status != FragmentStatus.ACTIVE:
            raise InvalidOperation(f"{fragment.public_id} is {fragment.status}", field=field)
    before = {"keep": fragment_service.snapshot(keep), "drop": fragment_service.snapshot(drop),
              "keep_sources": keep.sources.count(), "drop_sources": drop.sources.count()}

    # Pointers are unique per (document, anchor) across all fragments: moving never collides.
    pointers = SourcePointer.objects.filter(fragment=drop).update(fragment=keep)
    links = _move_links(keep, drop)
    pins = _move_pins(keep, drop)
    superseded = Fragment.objects.filter(superseded_by=drop).update(superseded_by=keep)
    contexts = set(drop.contexts.all()) - set(keep.contexts.all())
    if contexts:  # whoever could read drop through a context keeps reading its content
        fragment_service.set_contexts(user, keep, [*keep.contexts.all(), *contexts])
    Fragment.objects.filter(pk=keep.pk).update(
        retrieved_count=F("retrieved_count") + drop.retrieved_count,
        cited_count=F("cited_count") + drop.cited_count,
        helped_count=F("helped_count") + drop.helped_count,
        hurt_count=F("hurt_count") + drop.hurt_count)
    Nudge.objects.filter(fragment=drop).exclude(state=NudgeState.ANSWERED).update(
        state=NudgeState.ANSWERED, answer=NudgeAnswer.RETIRED, answered_at=now,
        answered_by=principal_user(user))
    fragment_service.retire_fragment(user, drop, reason=f"merged into {keep.public_id}")

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

    keep.refresh_from_db()
    audit.record(user, "fragment.merge", keep, before=before, after={
        "keep": keep.public_id, "dropped": drop.public_id, "moved_sources": pointers,
        "moved_links": links, "moved_pins": pins, "repointed_supersessions": superseded,
        "added_contexts": sorted(c.public_id for c in contexts),
        "sources": keep.sources.count()})
    # keep's lexical document lists its source paths: re-index it.
    fragment_service.notify_changed([keep.pk])
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
