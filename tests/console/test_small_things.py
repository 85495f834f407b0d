"""The smaller things a person notices in the console (issue 40, item 8), one test each.

- The tokens page has a copy button, an example ``curl`` of the retrieval and an MCP client
  configuration, with the token just created.
- The job page links the fragments the job created and updated (the job keeps their ids).
- A size is said in one unit everywhere: the ingest page's limit and the refusal of a file
  over it both say "1 MB" (not "976.6 KB" beside "1000000 bytes").
- The editor of an ingested fragment holds its body only, without the first line that says
  where it came from; saving puts that line back.
- Members: every element id on the page is unique (two forms with a ``role`` field).
- Closing a session asks first; restoring a fragment asks why (the audit trail keeps it).
- The review list shows the title a proposal was approved with, not the proposed one.
- The active navigation item: "Overview" on the organization's pages only, none on a
  fragment's own pages.

The layout at 375 and 1280 px is in tests/browser/test_console_layout.py.
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts.permissions import SYSTEM
from contexts.console.views import tokens as tokens_view
from contexts.ingestion.jobs import run_job
from contexts.kernel.sizes import byte_size
from contexts.mcp.server import MCP_PATH
from contexts.models import AuditEvent, Fragment, IngestionJob
from contexts.models.proposals import Proposal, ProposalKind, ProposalTarget
from contexts.services.fragments import create_fragment
from tests.console.conftest import (
    HTMX,
    client_for,
    world,  # noqa: F401 - indexed fragments
)
from tests.domain.conftest import cast  # noqa: F401 - the console's cast of people

pytestmark = pytest.mark.django_db


def text_of(response) -> str:
    assert response.status_code in (200, 201), response.status_code
    return response.content.decode()


def element(page: str, ident: str) -> str:
    """The unescaped text of the element with id ``ident``."""
    match = re.search(rf'id="{ident}"[^>]*>(.*?)</', page, re.S)
    assert match, ident
    return html.unescape(match[1])


# --- tokens ----------------------------------------------------------------------------------
def test_the_tokens_page_shows_how_to_connect_with_the_new_token(cast):  # noqa: F811
    client = client_for(cast.owner)
    page = text_of(client.post("/o/acme/tokens/", {"name": "agent-1",
                                                   "scopes": [cast.repo.scope.public_id],
                                                   "expires_in_days": 30}))
    raw = re.search(r'id="raw-token" class="mono" value="([^"]+)"', page)[1]
    # a copy button for the token, the curl and the configuration, and the script they need
    for target in ("#raw-token", "#curl-example", "#mcp-config"):
        assert f'data-copy="{target}"' in page
    assert "/static/js/copy.js" in page
    curl = element(page, "curl-example")
    assert curl.startswith("curl -sS http://testserver/api/contexts/retrieve \\\n")
    assert f"Authorization: Bearer {raw}" in curl
    body = json.loads(re.search(r"-d '(\{.*\})'", curl)[1])
    assert body["scope"] == {"org_id": "acme", "repo_id": "web"} and body["query"]
    config = json.loads(element(page, "mcp-config"))
    server = config["mcpServers"]["contexts"]
    assert server == {"type": "http", "url": f"http://testserver{MCP_PATH}",
                      "headers": {"Authorization": f"Bearer {raw}"}}
    assert tokens_view.MCP_PATH == MCP_PATH


def test_the_curl_example_works_as_written(cast, world):  # noqa: F811
    """The example is a real request: its body, sent with the token, retrieves."""
    client = client_for(cast.owner)
    page = text_of(client.post("/o/acme/tokens/", {"name": "agent-2",
                                                   "scopes": [cast.repo.scope.public_id],
                                                   "expires_in_days": 30}))
    curl = element(page, "curl-example")
    raw = re.search(r"Bearer (\S+)'", curl)[1]
    body = re.search(r"-d '(\{.*\})'", curl)[1]
    answer = client.post("/api/contexts/retrieve", body, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert answer.status_code == 200, answer.content
    assert "fragments" in answer.json()


def test_without_a_new_token_the_examples_name_a_placeholder(cast):  # noqa: F811
    page = text_of(client_for(cast.owner).get("/o/acme/tokens/"))
    assert "Bearer <your token>" in element(page, "mcp-config")
    assert 'id="raw-token"' not in page


# --- job page --------------------------------------------------------------------------------
def test_the_job_page_links_the_fragments_it_wrote(cast, tmp_path, settings):  # noqa: F811
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    settings.CONTEXTS_INGEST_ROOTS = [str(tmp_path)]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service retries twice.\n")
    (docs / "b.md").write_text("# Beta\n\nThe beta service never retries.\n")
    job = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source=str(docs),
                                      created_by=cast.teammate)
    run_job(job.pk)
    job.refresh_from_db()
    assert job.state == "done" and job.fragments_created == 2
    made = set(Fragment.objects.filter(org=cast.org, scope=cast.repo.scope)
               .values_list("public_id", flat=True))
    assert set(job.fragment_ids["created"]) == made and job.fragment_ids["updated"] == []
    page = text_of(client_for(cast.teammate).get(f"/jobs/{job.public_id}/"))
    section = page[page.index("Fragments it wrote"):page.index("<h2>Errors")]
    linked = set(re.findall(r'href="/fragments/(frag_[\w-]+)/"', section))
    assert linked == made and "Alpha" in section and "2 created" in section
    # a second run over changed text: the updated ones are linked as such
    (docs / "a.md").write_text("# Alpha\n\nThe alpha service retries three times.\n")
    again = IngestionJob.objects.create(org=cast.org, scope=cast.repo.scope, source=str(docs),
                                        created_by=cast.teammate)
    run_job(again.pk)
    again.refresh_from_db()
    assert len(again.fragment_ids["updated"]) == again.fragments_updated == 1
    page = text_of(client_for(cast.teammate).get(f"/jobs/{again.public_id}/"))
    assert f'href="/fragments/{again.fragment_ids["updated"][0]}/"' in page
    assert "1 updated" in page


# --- sizes -----------------------------------------------------------------------------------
def test_a_size_is_said_in_one_unit(cast, settings, tmp_path):  # noqa: F811
    settings.INGEST_MAX_FILE_BYTES = 1_000_000
    settings.MEDIA_ROOT = tmp_path
    client = client_for(cast.teammate)
    page = text_of(client.get("/o/acme/ingest/"))
    assert "At most 1 MB per file" in page and "KB" not in page
    big = SimpleUploadedFile("big.md", b"# Big\n" + b"x" * 1_000_000)
    refused = client.post("/o/acme/ingest/upload", {"scope": cast.repo.scope.public_id,
                                                     "files": [big]})
    assert refused.status_code == 400
    assert "big.md: larger than 1 MB" in html.unescape(refused.content.decode())
    assert "1000000 bytes" not in refused.content.decode()
    assert [byte_size(n) for n in (508, 999_999, 1_000_000, 1_048_576, 100_000_000)] == [
        "508 bytes", "1 MB", "1 MB", "1.05 MB", "100 MB"]


# --- the editor ------------------------------------------------------------------------------
def test_the_editor_holds_the_body_only_and_saving_keeps_the_first_line(cast):  # noqa: F811
    body = "Runbooks > Deploys > Rollback\n\nRoll back with `make rollback`."
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Rollback", body=body,
                               heading_path=["Runbooks", "Deploys", "Rollback"])
    client = client_for(cast.teammate)
    page = text_of(client.get(f"/fragments/{fragment.public_id}/edit"))
    editor = html.unescape(re.search(r'<textarea name="body"[^>]*>(.*?)</textarea>', page,
                                     re.S)[1]).strip()
    assert editor == "Roll back with `make rollback`."
    saved = client.post(f"/fragments/{fragment.public_id}/edit", {
        "title": "Rollback", "body": "Roll back with `make rollback-now`.",
        "based_on_version": fragment.version, "reason": "renamed target"})
    assert saved.status_code == 302
    fragment.refresh_from_db()
    assert fragment.body == ("Runbooks > Deploys > Rollback\n\n"
                             "Roll back with `make rollback-now`.")
    # a client that still sends the first line does not get it twice
    client.post(f"/fragments/{fragment.public_id}/edit", {
        "title": "Rollback", "body": fragment.body + " Then verify.",
        "based_on_version": fragment.version, "reason": "one more step"})
    fragment.refresh_from_db()
    assert fragment.body.count("Runbooks > Deploys > Rollback") == 1


def test_a_code_fragments_editor_leaves_out_its_header(cast):  # noqa: F811
    body = "# src/retry.py · retry\ndef retry(fn):\n    return fn()\n"
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="retry", body=body, kind="code",
                               language="python")
    page = text_of(client_for(cast.teammate).get(f"/fragments/{fragment.public_id}/edit"))
    editor = html.unescape(re.search(r'<textarea name="body"[^>]*>(.*?)</textarea>', page,
                                     re.S)[1])
    assert "src/retry.py" not in editor and "def retry(fn):" in editor


# --- members ---------------------------------------------------------------------------------
def test_every_element_id_on_the_members_page_is_unique(cast):  # noqa: F811
    page = text_of(client_for(cast.owner).get("/o/acme/members/"))
    ids = Counter(re.findall(r'\sid="([^"]+)"', page))
    assert [ident for ident, n in ids.items() if n > 1] == []
    # each label still points at its own control
    for target in re.findall(r'<label[^>]* for="([^"]+)"', page):
        assert ids[target] == 1, target


# --- sessions and restore --------------------------------------------------------------------
def test_closing_a_session_asks_first(cast):  # noqa: F811
    page = text_of(client_for(cast.owner).get("/o/acme/sessions/"))
    row = page[page.index(f'id="session-{cast.session.public_id}"'):]
    row = row[:row.index("</tr>")]
    # the close button is behind a question, as the expiry is
    question = row.index("<details class=\"confirm\">")
    assert question < row.index("/close") < row.index("Close the session")
    assert "can no longer write to it" in row


def test_restoring_asks_why_and_the_audit_trail_keeps_it(cast):  # noqa: F811
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Old note", body="Still true.")
    client = client_for(cast.teammate)
    client.post(f"/fragments/{fragment.public_id}/retire", {"reason": "looked stale"})
    page = text_of(client.get(f"/fragments/{fragment.public_id}/"))
    form = page[page.index(f'action="/fragments/{fragment.public_id}/restore"'):]
    assert re.search(r'<input id="restore-reason" name="reason" maxlength="300" required>',
                     form[:form.index("</form>")])
    assert client.post(f"/fragments/{fragment.public_id}/restore", {"reason": " "},
                       **HTMX).status_code == 400
    assert client.post(f"/fragments/{fragment.public_id}/restore",
                       {"reason": "checked it: still true"}).status_code == 302
    event = AuditEvent.objects.get(action="fragment.restore", object_id=fragment.public_id)
    assert event.after["reason"] == "checked it: still true"


# --- review ----------------------------------------------------------------------------------
def test_the_review_list_shows_the_approved_title(cast):  # noqa: F811
    note = create_fragment(cast.token, cast.session.scope, title="tmp: retry thing",
                           body="Retries back off twice.", kind="session-summary")
    proposal = Proposal.objects.create(
        org=cast.org, kind=ProposalKind.PROMOTE, target=ProposalTarget.REPOSITORY,
        target_scope=cast.repo.scope, source_fragment=note, title=note.title, body=note.body,
        fragment_kind=note.kind, proposed_by=cast.token)
    client = client_for(cast.lead)
    approved = client.post(f"/o/acme/review/{proposal.public_id}/approve",
                           {"title": "Retries back off twice"})
    assert approved.status_code == 302
    page = text_of(client.get("/o/acme/review/?state=approved"))
    heading = element(page, f"proposal-{proposal.public_id}-title")
    assert heading == "Retries back off twice"
    assert "Proposed as “tmp: retry thing”" in page


# --- the active navigation item -------------------------------------------------------------
def current_item(page: str) -> list[str]:
    nav = page[page.index('<nav class="mainnav"'):page.index("</nav>")]
    return re.findall(r'aria-current="page">([^<]+)<', nav)


def test_the_active_navigation_item_is_the_pages_own(cast):  # noqa: F811
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Note", body="A note.")
    client = client_for(cast.owner)
    scope = cast.repo.scope.public_id
    expected = {
        "/o/acme/": ["Overview"], f"/scopes/{scope}/fragments/": ["Overview"],
        f"/scopes/{scope}/pins/": ["Overview"], "/o/acme/search/": ["Search"],
        "/o/acme/ingest/": ["Ingest"], "/o/acme/traces/": ["Traces"],
        "/o/acme/tokens/": ["Tokens"], "/o/acme/members/": ["Members"],
        "/o/acme/personas/": ["Personas"], "/o/acme/review/": ["Review"],
        "/o/acme/sources/": ["Sources"], "/o/acme/sessions/": ["Sessions"],
        "/inbox/": ["Inbox"], "/governance/": ["Governance"],
        f"/fragments/{fragment.public_id}/": [],
        f"/fragments/{fragment.public_id}/edit": [],
    }
    for url, items in expected.items():
        assert current_item(text_of(client.get(url))) == items, url
