"""Dedup review: near-duplicates are proposed (never merged by the job); a curator's merge keeps
one canonical fragment with every source pointer, link and pin."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from accounts.permissions import SYSTEM
from contexts.governance.dedup_review import (
    dismiss_candidate,
    merge_duplicates,
    propose_duplicates,
)
from contexts.indexes.indexing import embed_fragments
from contexts.ingestion.simhash import hamming, simhash
from contexts.models import (
    AuditEvent,
    DedupCandidate,
    DedupState,
    Fragment,
    FragmentStatus,
    Link,
    Pin,
    SourcePointer,
)
from contexts.models.fragments import LinkKind
from contexts.services.pins import pin_fragment
from tests.governance.conftest import NOW, make, point

pytestmark = pytest.mark.django_db

ROTATION = (
    "To rotate the database credentials, open the vault console and create a new secret "
    "version for the payments service. Update the deployment manifest so the pods read the new "
    "version, roll the pods one availability zone at a time, and watch the connection pool "
    "metrics on the payments dashboard. When every pod reports healthy connections with the new "
    "user, revoke the old credentials in the database and delete the previous secret version "
    "from the vault. Record the rotation date in the runbook history table and notify the "
    "security channel.")
VARIANT = ROTATION.replace("open the vault console", "open the Vault UI")


@pytest.fixture
def pair(cast):
    assert 4 <= hamming(simhash(ROTATION), simhash(VARIANT)) <= 8  # beyond automatic dedup
    a = make(cast.repo.scope, "Rotate credentials", ROTATION, owner=cast.teammate)
    b = make(cast.repo.scope, "Credential rotation", VARIANT, owner=cast.lead)
    return a, b


def test_near_duplicates_are_proposed_not_merged(cast, pair):
    a, b = pair
    make(cast.other_repo.scope, "Same text elsewhere", ROTATION, owner=cast.teammate)
    make(cast.repo.scope, "Unrelated", "Billing retries failed charges three times.",
         owner=cast.teammate)
    counts = propose_duplicates(cast.org, NOW)
    [candidate] = DedupCandidate.objects.all()  # the other-scope copy is not paired
    assert (candidate.fragment_a, candidate.fragment_b) == (a, b)
    assert candidate.state == DedupState.PROPOSED and 4 <= candidate.distance <= 8
    assert candidate.proposed_at == NOW and counts["proposed"] == 1
    assert set(Fragment.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)
               ) == {FragmentStatus.ACTIVE}
    propose_duplicates(cast.org, NOW)
    assert DedupCandidate.objects.count() == 1


def test_cosine_finds_pairs_simhash_misses(cast):
    a = make(cast.repo.scope, "Deploy freeze",
             "Never deploy on Friday afternoon; the on-call team is thin.", owner=cast.teammate)
    b = make(cast.repo.scope, "Deploy freeze",
             "Do not deploy on Friday afternoons; the on-call team is thin.",
             owner=cast.teammate)
    assert hamming(simhash(a.body), simhash(b.body)) > 8
    embed_fragments([a, b])
    propose_duplicates(cast.org, NOW)
    candidate = DedupCandidate.objects.get()
    assert candidate.cosine >= 0.9 and candidate.distance > 8


def test_dismissed_pairs_stay_dismissed(cast, pair):
    propose_duplicates(cast.org, NOW)
    candidate = DedupCandidate.objects.get()
    with pytest.raises(PermissionDenied):
        dismiss_candidate(cast.viewer, candidate)
    dismiss_candidate(cast.teammate, candidate)
    propose_duplicates(cast.org, NOW)
    assert list(DedupCandidate.objects.values_list("state", flat=True)) == [
        DedupState.DISMISSED]


def test_merge_keeps_every_pointer_link_and_pin(cast, pair):
    keep, drop = pair
    point(keep, "docs/rotate.md", changed=NOW, repository=cast.repo)
    point(drop, "docs/security/rotation.md", changed=NOW, repository=cast.repo)
    point(drop, "docs/runbooks/db.md", changed=NOW, repository=cast.repo, anchor="rotation")
    citing = make(cast.repo.scope, "Incident review", "See the rotation runbook.")
    cited = make(cast.repo.scope, "Vault", "How the vault is organised.")
    Link.objects.create(source=citing, target=drop, kind=LinkKind.MARKDOWN)
    Link.objects.create(source=drop, target=cited, kind=LinkKind.REFERENCE)
    Link.objects.create(source=drop, target=keep, kind=LinkKind.REFERENCE)  # becomes a loop
    pin_fragment(SYSTEM, drop, cast.repo.scope, reason="important")
    old = make(cast.repo.scope, "Old rotation", "Rotate by hand.")
    Fragment.objects.filter(pk=old.pk).update(superseded_by=drop, status="superseded")
    propose_duplicates(cast.org, NOW)

    with pytest.raises(PermissionDenied):
        merge_duplicates(cast.viewer, keep, drop)
    merge_duplicates(cast.teammate, keep, drop, now=NOW)

    keep.refresh_from_db()
    drop.refresh_from_db()
    assert drop.status == FragmentStatus.RETIRED and keep.status == FragmentStatus.ACTIVE
    assert sorted(SourcePointer.objects.filter(fragment=keep)
                  .values_list("document__path", flat=True)) == [
        "docs/rotate.md", "docs/runbooks/db.md", "docs/security/rotation.md"]
    assert not SourcePointer.objects.filter(fragment=drop).exists()
    assert set(Link.objects.values_list("source_id", "target_id")) == {
        (citing.pk, keep.pk), (keep.pk, cited.pk)}
    assert Pin.objects.get(scope=cast.repo.scope).fragment == keep
    assert Fragment.objects.get(pk=old.pk).superseded_by == keep
    candidate = DedupCandidate.objects.get()
    assert (candidate.state, candidate.kept, candidate.decided_by) == (
        DedupState.MERGED, keep, cast.teammate)
    retire = AuditEvent.objects.get(action="fragment.retire", object_id=drop.public_id)
    assert retire.after["reason"] == f"merged into {keep.public_id}"
    merge = AuditEvent.objects.get(action="fragment.merge")
    assert merge.actor == cast.teammate and merge.after["sources"] == 3
    # A retired fragment cannot be merged again.
    with pytest.raises(Exception, match="retired"):
        merge_duplicates(cast.teammate, keep, drop)


def test_dedup_review_page_merges(cast, pair):
    keep, drop = pair
    propose_duplicates(cast.org, NOW)
    candidate = DedupCandidate.objects.get()
    client = Client()
    client.force_login(cast.viewer)
    assert b"Merge, keep A" not in client.get("/governance/dedup/").content  # not a curator
    assert client.post(f"/governance/dedup/{candidate.pk}/decide",
                       {"action": "keep-a"}).status_code == 404
    client.force_login(cast.teammate)
    page = client.get("/governance/dedup/")
    assert page.status_code == 200 and keep.public_id.encode() in page.content
    response = client.post(f"/governance/dedup/{candidate.pk}/decide", {"action": "keep-a"})
    assert response.status_code == 302
    drop.refresh_from_db()
    assert drop.status == FragmentStatus.RETIRED
