"""Interfaces a team can script (issue 38): a personal token (``manage.py create_token --user``,
the console's personal tokens page) acts as its member — their roles, in its organization only,
while they are an active member there; ``GET /api/fragments/{id}`` answers the text, version,
owner, source, verification, evidence and open nudges; ``PATCH`` edits as the member (409 with
both texts on a stale version); ``POST /api/fragments`` writes a repository fragment through the
same door as the console. Bad input is a 4xx naming the field, never a 500; the OpenAPI schema
describes all three."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import ApiToken, Membership, Role
from accounts.permissions import SYSTEM
from accounts.tokens import create_personal_token, revoke_token
from contexts.governance import nudges
from contexts.models import AuditEvent, Fragment, SourceDocument, SourcePointer
from contexts.models.governance import NudgeKind
from contexts.services.fragments import create_fragment
from tests.api.conftest import as_token
from tests.console.conftest import client_for
from tests.factories import MembershipFactory

pytestmark = pytest.mark.django_db


def personal(cast, user, org=None):
    return create_personal_token(org or cast.org, user, f"{user.username}-script")[1]


def test_create_token_command_makes_a_personal_token(cast, api):
    out = io.StringIO()
    call_command("create_token", "--user", "teammate", "--name", "nightly", stdout=out)
    raw = out.getvalue().strip().splitlines()[-1]
    token = ApiToken.objects.get(name="nightly")
    assert token.user == cast.teammate and token.org == cast.org
    assert "acting as teammate (curator) in acme" in out.getvalue()
    who = as_token(api, raw).get("/api/whoami").json()
    assert who["principal"] == {"type": "user", "username": "teammate"}

    for args, message in [
        (["--user", "nobody-here"], "no account"),
        (["--user", "teammate", "--org", "globex"], "not a member"),
        (["--user", "teammate", "--scope", "org:acme"], "not both"),
        ([], "give --scope"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("create_token", "--name", "x", *args, stdout=io.StringIO())
    MembershipFactory(user=cast.teammate, org=cast.other_org, role=Role.VIEWER)
    with pytest.raises(CommandError, match="give --org"):
        call_command("create_token", "--user", "teammate", "--name", "y", stdout=io.StringIO())
    call_command("create_token", "--user", "teammate", "--name", "z", "--org", "globex",
                 stdout=io.StringIO())
    assert ApiToken.objects.get(name="z").org == cast.other_org


def test_get_a_fragment_as_a_script_reads_it(cast, world, api):
    fragment = world.repo_limiter
    document = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                             path="docs/limits.md", content_hash="x",
                                             source_commit="abc123")
    SourcePointer.objects.create(document=document, fragment=fragment, anchor="limits",
                                 start_line=3, end_line=9, content_hash="h")
    Fragment.objects.filter(pk=fragment.pk).update(
        source_state="merged", owner=cast.teammate, evidence_state="changed",
        evidence=[{"ref": "src/limiter.py", "kind": "path", "path": "src/limiter.py",
                   "symbol": "", "fragment": "", "hash": "secret-ish", "commit": "abc123",
                   "state": "changed"}])
    _, nudge = nudges.open_nudge(Fragment.objects.get(pk=fragment.pk), [{"code": "x"}],
                                 kind=NudgeKind.EVIDENCE_CHANGED)
    body = as_token(api, personal(cast, cast.viewer)).get(
        f"/api/fragments/{fragment.public_id}").json()
    assert body == {
        "id": fragment.public_id, "version": fragment.version, "title": "Rate limiter",
        "text": fragment.body, "kind": fragment.kind, "status": "active",
        "scope": cast.repo.scope.public_id, "owner": "teammate",
        "source": {"kind": "git", "path": "docs/limits.md",
                   "repository": cast.repo.public_id, "commit": "abc123", "state": "merged"},
        "verified_at": None,
        # Its source lines first (a merged fragment still stands with its file), then what
        # its text cites; no hashes.
        "evidence": [
            {"ref": "docs/limits.md#L3-L9", "kind": "file", "path": "docs/limits.md",
             "symbol": "", "fragment": "", "lines": [3, 9], "commit": "abc123",
             "state": "current"},
            {"ref": "src/limiter.py", "kind": "path", "path": "src/limiter.py", "symbol": "",
             "fragment": "", "commit": "abc123", "state": "changed"}],
        "evidence_summary": {"state": "changed", "refs": 2, "changed": 1},
        # A public id: integer keys never leave the server.
        "open_nudges": [{"id": nudge.public_id, "kind": "evidence_changed"}],
    }
    assert nudge.public_id.startswith("nud_") and str(nudge.pk) != nudge.public_id
    written = as_token(api, personal(cast, cast.teammate)).get(
        f"/api/fragments/{world.org_note.public_id}").json()
    assert written["source"] == {"kind": "console", "path": None, "repository": None,
                                 "commit": None, "state": None, "written_by": None,
                                 "written_at": written["source"]["written_at"]}


@pytest.mark.parametrize(("source_state", "entry_state", "summary_state"), [
    ("in_sync", "current", None), ("conflict", "changed", None), ("gone", "missing", None)])
def test_a_source_fragment_rests_on_its_file_lines_at_their_commit(
        cast, world, api, source_state, entry_state, summary_state):
    """A fragment a file brought cites nothing itself: its evidence is the file's lines, at the
    commit they were read, standing as its source state says (a conflict: the file changed
    under the person's edit; gone: the lines were deleted)."""
    fragment = world.repo_limiter
    document = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                             path="docs/limits.md", content_hash="x",
                                             source_commit="c0ffee")
    SourcePointer.objects.create(document=document, fragment=fragment, anchor="burst",
                                 start_line=12, end_line=20, content_hash="h")
    Fragment.objects.filter(pk=fragment.pk).update(source_state=source_state)
    body = as_token(api, personal(cast, cast.viewer)).get(
        f"/api/fragments/{fragment.public_id}").json()
    assert body["evidence"] == [
        {"ref": "docs/limits.md#L12-L20", "kind": "file", "path": "docs/limits.md",
         "symbol": "", "fragment": "", "lines": [12, 20], "commit": "c0ffee",
         "state": entry_state}]
    assert body["evidence_summary"] == {"state": summary_state, "refs": 1, "changed": 0}
    assert body["source"]["state"] == source_state


def test_patch_edits_as_the_member_and_a_stale_version_is_a_409_with_both_texts(
        cast, world, api):
    fragment = world.repo_limiter
    client = as_token(api, personal(cast, cast.teammate))
    url = f"/api/fragments/{fragment.public_id}"
    answer = client.patch(url, {"text": "Bucket refills twice a second.", "version": 1,
                                "reason": "measured"}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["version"] == 2 and answer.json()["text"].startswith("Bucket refills")
    version = Fragment.objects.get(pk=fragment.pk).versions.get(number=2)
    assert version.editor == cast.teammate and version.reason == "measured"
    event = AuditEvent.objects.filter(object_id=fragment.public_id,
                                      action="fragment.edit").latest("pk")
    assert event.actor == cast.teammate and event.actor_token.user == cast.teammate

    stale = client.patch(url, {"text": "Someone else's idea.", "version": 1}, format="json")
    assert stale.status_code == 409
    error = stale.json()["error"]
    assert error["field"] == "version" and error["current_version"] == 2
    assert error["current"]["text"] == "Bucket refills twice a second."
    assert error["submitted"]["text"] == "Someone else's idea."
    assert Fragment.objects.get(pk=fragment.pk).version == 2


def test_only_curators_edit_and_write(cast, world, api):
    url = f"/api/fragments/{world.repo_limiter.public_id}"
    viewer = as_token(api, personal(cast, cast.viewer))
    assert viewer.patch(url, {"text": "x", "version": 1}, format="json").status_code == 403
    refused = viewer.post("/api/fragments", {
        "scope": {"org_id": cast.org.public_id, "repo_id": cast.repo.public_id},
        "title": "t", "text": "A viewer's note."}, format="json")
    assert refused.status_code == 403
    # An agent's token writes into sessions only, as before.
    agent = as_token(api, cast.raw_token)
    assert agent.patch(url, {"text": "x", "version": 1}, format="json").status_code == 403


def test_post_writes_a_repository_fragment_as_the_curator(cast, api):
    client = as_token(api, personal(cast, cast.teammate))
    answer = client.post("/api/fragments", {
        "scope": {"org_id": cast.org.public_id, "repo_id": cast.repo.public_id},
        "title": "Limits", "text": "Internal callers are exempt from the limiter."},
        format="json")
    assert answer.status_code == 201, answer.json()
    fragment = Fragment.objects.get(public_id=answer.json()["id"])
    assert (fragment.scope, fragment.owner, fragment.kind) == (cast.repo.scope, cast.teammate,
                                                               "prose")
    assert fragment.versions.get().editor == cast.teammate
    policy = client.post("/api/fragments", {
        "scope": {"org_id": cast.org.public_id, "repo_id": cast.repo.public_id},
        "title": "P", "text": "Deploy on weekdays.", "kind": "policy"}, format="json")
    assert policy.status_code == 201 and policy.json()["kind"] == "policy"


@pytest.mark.parametrize(("method", "payload", "field"), [
    ("patch", {"version": 1}, "text"),
    ("patch", {"text": "x"}, "version"),
    ("patch", {"text": "x", "version": "one"}, "version"),
    ("patch", {"text": "x", "version": 0}, "version"),
    ("patch", {"text": "   ", "version": 1}, "text"),
    ("patch", {"text": "x", "version": 1, "owner": "lead"}, "owner"),
    ("patch", {"text": "x" * 50_001, "version": 1}, "text"),
    ("post", {"scope": {"org_id": "ORG"}, "title": "t"}, "text"),
    ("post", {"scope": {"org_id": "ORG"}, "text": "a", "body": "b"}, "text"),
    ("post", {"scope": {"org_id": "ORG"}, "text": "a", "kind": "poem"}, "kind"),
    ("post", {"text": "a"}, "scope"),
])
def test_bad_input_is_a_4xx_naming_the_field(cast, world, api, method, payload, field):
    client = as_token(api, personal(cast, cast.teammate))
    if "scope" in payload:
        payload = {**payload, "scope": {k: (cast.org.public_id if v == "ORG" else v)
                                        for k, v in payload["scope"].items()}}
    url = ("/api/fragments" if method == "post"
           else f"/api/fragments/{world.repo_limiter.public_id}")
    answer = getattr(client, method)(url, payload, format="json")
    assert 400 <= answer.status_code < 500, answer.content
    assert field in (answer.json()["error"]["field"] or ""), answer.json()


def test_a_personal_token_acts_only_in_its_organization_and_only_while_a_member(
        cast, world, api):
    # The stranger administers globex; a globex token reads nothing of acme, an acme token
    # of a member reads nothing of globex.
    stranger = as_token(api, personal(cast, cast.stranger, cast.other_org))
    assert stranger.get(f"/api/fragments/{world.repo_limiter.public_id}").status_code == 404
    MembershipFactory(user=cast.teammate, org=cast.other_org, role=Role.ADMIN)
    acme_only = as_token(api, personal(cast, cast.teammate))
    assert acme_only.get(f"/api/fragments/{world.globex_secret.public_id}").status_code == 404
    assert acme_only.patch(f"/api/fragments/{world.globex_secret.public_id}",
                           {"text": "x", "version": 1}, format="json").status_code == 404
    # A superuser's personal token is confined to its organization too.
    cast.lead.is_superuser = True
    cast.lead.save()
    lead = as_token(api, personal(cast, cast.lead))
    assert lead.get(f"/api/fragments/{world.globex_secret.public_id}").status_code == 404
    assert lead.get(f"/api/fragments/{world.repo_limiter.public_id}").status_code == 200

    # Leaving the organization, deactivation and revocation each end the token.
    raw = personal(cast, cast.viewer)
    url = f"/api/fragments/{world.repo_limiter.public_id}"
    assert as_token(api, raw).get(url).status_code == 200
    Membership.objects.filter(user=cast.viewer, org=cast.org).delete()
    assert as_token(api, raw).get(url).status_code == 401
    token, raw = create_personal_token(cast.org, cast.teammate, "t2")
    assert as_token(api, raw).get(url).status_code == 200
    revoke_token(token)
    assert as_token(api, raw).get(url).status_code == 401
    token, raw = create_personal_token(cast.org, cast.owner, "t3")
    cast.owner.is_active = False
    cast.owner.save()
    assert as_token(api, raw).get(url).status_code == 401


def test_a_personal_token_is_not_an_agent_token_for_mcp(cast, monkeypatch):
    """MCP's tools act as agents (bound scopes, session writes): a personal token is refused
    there, as an unknown one is. (Connections are not recycled inside the test's transaction.)"""
    from contexts.mcp import server as mcp_server
    monkeypatch.setattr(mcp_server, "close_old_connections", lambda: None)
    _verify = mcp_server._verify
    assert _verify(personal(cast, cast.teammate)) is None
    assert _verify(cast.raw_token) is not None


def test_missing_fragments_and_unreadable_ones_answer_alike(cast, api):
    client = as_token(api, personal(cast, cast.teammate))
    secret = create_fragment(SYSTEM, cast.other_org.scope, title="s", body="globex only")
    missing = client.get("/api/fragments/frag_0000000000000000")
    hidden = client.get(f"/api/fragments/{secret.public_id}")
    assert missing.status_code == hidden.status_code == 404
    assert missing.json() == hidden.json()


def test_the_console_makes_personal_tokens_for_members(cast):
    client = client_for(cast.viewer)
    page = client.post(f"/o/{cast.org.slug}/tokens/personal", {"name": "mine"})
    assert page.status_code == 201 and page["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(name="mine")
    assert token.user == cast.viewer and token.created_by == cast.viewer
    assert client_for(cast.stranger).get(f"/o/{cast.org.slug}/tokens/personal").status_code \
        == 404
    # Another member cannot revoke it; its own member can.
    other = client_for(cast.teammate).post(
        f"/o/{cast.org.slug}/tokens/personal/{token.public_id}/revoke")
    assert other.status_code == 404
    client.post(f"/o/{cast.org.slug}/tokens/personal/{token.public_id}/revoke")
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_the_openapi_schema_covers_them(api, cast):
    api.force_authenticate(cast.owner)
    schema = api.get("/api/schema/?format=json").json()
    item = schema["paths"]["/api/fragments/{fragment_id}"]
    assert {"get", "patch"} <= set(item)
    assert "409" in item["patch"]["responses"]
    components = schema["components"]["schemas"]
    assert {"text", "version", "owner", "source", "verified_at", "evidence",
            "evidence_summary", "open_nudges"} <= set(components["FragmentRecord"]["properties"])
    # A nudge is named by its public id (a string), never an integer key.
    assert components["RecordNudge"]["properties"]["id"]["type"] == "string"
    assert {"ref", "kind", "lines", "commit", "state"} <= set(
        components["RecordEvidence"]["properties"])
    assert "text" in components["FragmentIn"]["properties"]
