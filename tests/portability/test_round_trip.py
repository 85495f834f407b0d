"""Export an organization, import it under a new slug: the same queries return the same
source paths and texts in the same order, and pins, links, negative flags, supersession,
versions, nudges and roles come back equal."""

from __future__ import annotations

import json
import tarfile

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from accounts.models import Membership, Organization
from accounts.permissions import SYSTEM
from contexts.models import AuditEvent, Embedding, Fragment, FragmentVersion, Link, Nudge, Pin
from contexts.models.changes import Change
from contexts.usecases import portability
from tests.portability.conftest import QUERIES

pytestmark = pytest.mark.django_db


def _by_public_id(org: Organization) -> dict[str, Fragment]:
    return {f.public_id: f for f in Fragment.objects.filter(org=org)}


def _pins(org: Organization) -> list[tuple[str, str, int, str]]:
    return [(p.scope.public_id, p.fragment.title, p.position, p.reason)
            for p in Pin.objects.filter(org=org).select_related("scope", "fragment")
            .order_by("scope__kind", "position", "created_at")]


def _state(org: Organization) -> dict:
    fragments = Fragment.objects.filter(org=org)
    return {
        "fragments": sorted((f.title, f.body, f.kind, f.negative, f.status, f.version,
                             f.owner.username if f.owner_id else "",
                             f.superseded_by.title if f.superseded_by_id else "",
                             tuple(sorted(c.slug for c in f.contexts.all())))
                            for f in fragments.select_related("owner", "superseded_by")),
        "versions": sorted((v.fragment.title, v.number, v.body, v.reason,
                            v.editor.username if v.editor_id else "")
                           for v in FragmentVersion.objects.filter(org=org)
                           .select_related("fragment", "editor")),
        "links": sorted((link.source.title, link.target.title, link.kind)
                        for link in Link.objects.filter(org=org).select_related("source",
                                                                                 "target")),
        "pins": [(title, position, reason) for _, title, position, reason in _pins(org)],
        "nudges": sorted((n.fragment.title, n.owner.username, n.state, n.answer,
                          n.answered_by.username, n.reasons)
                         for n in Nudge.objects.filter(org=org).select_related(
                             "fragment", "owner", "answered_by")),
        "roles": sorted((m.user.username, m.role) for m in Membership.objects.filter(org=org)),
        "audit": sorted((e.action, e.actor.username if e.actor_id else "")
                        for e in AuditEvent.objects.filter(org=org)
                        .exclude(action__in=["org.export", "org.import", "fragment.import"])),
    }


def test_round_trip_keeps_answers_and_governance(built, tmp_path, capsys):
    out = tmp_path / "acme.tar.gz"
    call_command("export_org", "--org", "acme", str(out))
    call_command("import_org", str(out), "--as", "acme2")
    copy = Organization.objects.get(slug="acme2")
    assert "searchable now" in capsys.readouterr().out

    # Fragments written through the door: in the feed, embedded, in this node's index.
    restored = Fragment.objects.filter(org=copy)
    assert restored.count() == Fragment.objects.filter(org=built.org).count() >= 10
    assert Change.objects.filter(org=copy).count() == restored.count()
    assert AuditEvent.objects.filter(org=copy, action="fragment.import").count() == \
        restored.count()
    embedded = set(Embedding.objects.filter(org_id=copy.pk).values_list("fragment_id",
                                                                         flat=True))
    assert embedded == set(restored.exclude(status="retired").values_list("pk", flat=True))

    assert _state(copy) == _state(built.org)
    # Pins keep their order: the repository's three, as reordered.
    assert [title for _, title, _, _ in _pins(copy)] == [f.title for f in built.pinned]
    new = _by_public_id(copy)
    # Public ids were taken (same instance): the copy has its own, and the audit trail was
    # rewritten to name them.
    assert not set(new) & set(_by_public_id(built.org))
    negative = next(f for f in new.values() if f.title == built.negative.title)
    assert negative.negative and negative.kind == "negative"
    old = next(f for f in new.values() if f.title == built.superseded.title)
    assert old.status == "superseded" and old.superseded_by.title == built.replacement.title
    assert AuditEvent.objects.filter(org=copy, object_id=old.public_id).exists()

    # The repository's chain (repository, then organization, and the contexts defined there).
    results = portability.compare_orgs(SYSTEM, portability.CompareOrgs(
        left="acme", right="acme2", repo="web", queries=tuple(QUERIES)))
    assert len(results) == 20
    differing = [r.query for r in results if not r.same]
    assert not differing, differing
    assert all(r.left.fragments for r in results)
    paths = {path for r in results for paths, _ in r.left.fragments for path in paths}
    assert {"docs/rate-limiter.md", "handbook/security.md", "app/throughput.py"} <= paths
    # The superseded rule is not returned, its replacement is, in both.
    pager = portability.compare_orgs(SYSTEM, portability.CompareOrgs(
        left="acme", right="acme2", repo="web", queries=("pages acknowledged",)))[0]
    texts = " ".join(text for _, text in pager.right.fragments)
    assert "fifteen minutes by the engineer" in texts and "within an hour" not in texts


def test_an_export_is_audited_and_holds_no_password(small, tmp_path):
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", small.org.public_id, str(out))
    event = AuditEvent.objects.get(org=small.org, action="org.export")
    assert event.after == {"fragments": 2, "versions": 2}
    with tarfile.open(out) as tar:
        names = tar.getnames()
        users = tar.extractfile("users.jsonl").read().decode()
        manifest = json.load(tar.extractfile("manifest.json"))
    assert names[0] == "manifest.json" and manifest["version"] == 1
    assert manifest["format"] == "contexts-organization"
    assert "pw-for-tests-only" not in users and "password" not in users
    assert '"username":"sam"' in users


def test_missing_users_are_created_inactive(small, tmp_path):
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    User = get_user_model()
    User.objects.filter(username="val").delete()
    portability.import_org(SYSTEM, portability.ImportOrg(archive=out, slug="small3"))
    val = User.objects.get(username="val")
    assert not val.is_active and not val.has_usable_password()
    assert val.first_name == "Val"
    assert Membership.objects.get(org__slug="small3", user=val).role == "viewer"
    # An existing account is used as it is, never changed.
    assert User.objects.get(username="sam").is_active


def test_without_waiting_the_feed_and_the_worker_follow(small, tmp_path,
                                                        django_capture_on_commit_callbacks):
    """``--no-wait``: the rows and their change-feed entries commit; the vectors are left to
    the reindexing task the change signal queues once the import commits."""
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        restored = portability.import_org(SYSTEM, portability.ImportOrg(
            archive=out, slug="later", wait=False))
    assert Change.objects.filter(org=restored.org).count() == 2
    assert not Embedding.objects.filter(org_id=restored.org.pk).exists()
    assert callbacks  # the change signal (reindexing) and this node's follower, after commit
