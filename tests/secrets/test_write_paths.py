"""Secret scanning on every write path (issue 22, item 2), on real PostgreSQL.

An ingested folder and an upload carrying realistic (fake) secrets — an AWS key pair in a
``.env.md``, a PEM private key in a runbook, a GitHub token and a Slack webhook in Python
settings, a Postgres URL with a password in YAML (quoted in a runbook: YAML files are not an
ingested format) — leave no secret in any table, retrieval answer, trace, log line or e-mail;
the findings page lists each by file and line; the owner is nudged. API, MCP (the same use
case) and console writes are redacted, or refused with a 400 naming ``body``.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.core import mail
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.ingestion.jobs import run_job
from contexts.models import (
    AuditEvent,
    Fragment,
    IngestionJob,
    JobState,
    Nudge,
    SecretFinding,
    SourcePointer,
    UploadBlob,
    tenancy,
)
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment
from contexts.services.secrets import SecretRefused
from contexts.usecases.fragments import WriteFragment, write_fragment
from contexts.usecases.ingestion import SubmitSource, create_job, submit
from contexts.usecases.retrieval import ScopeRef
from tests.secrets.fakes import Secrets

pytestmark = pytest.mark.django_db

# file → (how a folder names it, how an upload names it, [(line, kind)]).
FILES = {
    "env_md": (".env.md", "staging.env.md",
               [(6, "AWS Access Key"), (7, "High Entropy Assignment")]),
    "runbook_md": ("docs/runbooks/rotate-tls.md", "rotate-tls.md", [(7, "Private Key")]),
    "settings_py": ("billing/settings.py", "settings.py",
                    [(4, "GitHub Token"), (5, "Slack Token")]),
    "database_md": ("docs/billing-database.md", "billing-database.md",
                    [(8, "Basic Auth Credentials")]),
}
QUERIES = ["AWS access key for the staging environment", "TLS private key rotation runbook",
           "GitHub token and Slack webhook in the billing settings",
           "billing database url password", "what are the staging credentials?"]


def leaks(text: str, keys: list[Secrets]) -> list[str]:
    return [value for k in keys for value in k.values() if value in text]


def rows_holding(keys: list[Secrets]) -> dict[str, int]:
    """Every table of the schema, each row cast to text: which tables hold a secret."""
    values = [value for k in keys for value in k.values()]
    found = {}
    with connection.cursor() as cursor:
        for table in tenancy.read_schema(connection):
            where = " OR ".join(["strpos(t::text, %s) > 0"] * len(values))
            cursor.execute(f"SELECT count(*) FROM {table} t WHERE {where}", values)
            count = cursor.fetchone()[0]
            if count:
                found[table] = count
    return found


def test_an_ingested_folder_and_an_upload_keep_no_secret(
        ingest_target, write_tree, tmp_path, client, caplog, django_capture_on_commit_callbacks):
    t = ingest_target
    folder, uploaded = Secrets(1), Secrets(2)
    caplog.set_level(logging.DEBUG)
    root = write_tree(tmp_path / "tree", {
        **{path: getattr(folder, name)() for name, (path, _, _) in FILES.items()},
        "config/database.yaml": folder.database_yaml(),
        "docs/unrelated.md": "# Deploys\n\nDeploy on weekdays; roll back within ten minutes.\n"})
    with django_capture_on_commit_callbacks(execute=True):
        job = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert job.state == JobState.DONE, job.errors
    with django_capture_on_commit_callbacks(execute=True):
        upload = submit(SYSTEM, SubmitSource(scope=t.repo.scope, created_by=t.creator, files=[
            SimpleUploadedFile(name, getattr(uploaded, attr)().encode())
            for attr, (_, name, _) in FILES.items()]), queue=False)
        upload = run_job(upload.pk)
    assert upload.state == JobState.DONE, upload.errors
    assert not UploadBlob.objects.exists()  # the raw uploads went with their job

    # Each finding is recorded with its file and line, on its job, never with the value.
    expected = {(origin, job_, path, line, kind)
                for origin, job_, index in (("ingestion", job, 0), ("upload", upload, 1))
                for spec in FILES.values() for line, kind in spec[2]
                for path in [spec[index]]}
    found = {(f.origin, f.job, f.path, f.line, f.kind)
             for f in SecretFinding.objects.filter(org=t.org).select_related("job")}
    assert found == expected
    assert set(SecretFinding.objects.values_list("action", flat=True)) == {"redacted"}
    assert AuditEvent.objects.filter(action="secret.redacted").count() == len(expected)
    for j in (job, upload):
        j.refresh_from_db()
        reasons = " ".join(w["reason"] for w in j.warnings)
        assert "AWS Access Key on line 6" in reasons and "Private Key on line 7" in reasons

    # The knowledge is stored, redacted: the placeholders are where the secrets were.
    env = SourcePointer.objects.get(document__path=".env.md").fragment
    assert "AWS_ACCESS_KEY_ID=[REDACTED:AWS Access Key]" in env.body
    assert "[REDACTED:Private Key]" in SourcePointer.objects.filter(
        document__path="docs/runbooks/rotate-tls.md").first().fragment.body

    # Retrieval — descriptive questions and the secrets themselves — returns none of them,
    # and no trace holds one.
    _, raw = create_token(t.org, "agent", [t.repo.scope])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    scope = {"org_id": t.org.slug, "repo_id": t.repo.slug}
    answers = []
    # A query holding a recognisable secret is stored redacted in its trace too.
    for query in [*QUERIES, folder.aws_access_key_id, f"token {folder.github_token}",
                  f"connect with {uploaded.postgres_url}"]:
        response = api.post("/api/contexts/retrieve", {"query": query, "scope": scope,
                                                       "budget_tokens": 4000}, format="json")
        assert response.status_code == 200, response.json()
        answers.append(json.dumps(response.json()))
        trace = api.get(f"/api/traces/{response.json()['trace_id']}")
        assert trace.status_code == 200
        assert not leaks(json.dumps(trace.json()), [folder, uploaded])
    assert not leaks(" ".join(answers), [folder, uploaded])
    assert "[REDACTED:" in " ".join(answers)  # the redacted knowledge is served

    # The findings page lists each, by file and line, to those who curate the organization.
    client.force_login(t.owner)
    page = client.get("/governance/secrets/")
    assert page.status_code == 200
    html = page.content.decode()
    for finding in SecretFinding.objects.filter(org=t.org):
        row = html.split(f'data-finding="{finding.public_id}"', 1)[1].split("</tr>", 1)[0]
        assert f"<code>{finding.path}</code>" in row and f"<td>{finding.line}</td>" in row
        assert finding.kind in row
    assert not leaks(html, [folder, uploaded])

    # The owner is nudged (no secret in the nudge or its e-mail) ...
    nudged = Nudge.objects.filter(fragment__org=t.org, owner=t.creator)
    assert nudged.exists()
    assert all(any(r["code"] == "secret" for r in n.reasons) for n in nudged)
    assert any(t.creator.email in m.to for m in mail.outbox)
    assert not leaks(" ".join(f"{m.subject}\n{m.body}" for m in mail.outbox), [folder, uploaded])
    # ... no log line held a secret, and no row of any table holds one.
    assert not leaks(caplog.text, [folder, uploaded])
    assert rows_holding([folder, uploaded]) == {}


def test_policy_refuse_stores_no_chunk_that_held_a_secret(ingest_target, write_tree, tmp_path,
                                                          settings):
    settings.SECRET_POLICY = "refuse"
    t, keys = ingest_target, Secrets(3)
    root = write_tree(tmp_path / "tree", {
        **{path: getattr(keys, name)() for name, (path, _, _) in FILES.items()},
        "docs/unrelated.md": "# Deploys\n\nDeploy on weekdays; roll back within ten minutes.\n"})
    job = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert job.state == JobState.DONE, job.errors
    assert set(SecretFinding.objects.values_list("action", flat=True)) == {"refused"}
    assert SecretFinding.objects.filter(path="billing/settings.py", line=4).exists()
    bodies = " ".join(Fragment.objects.filter(org=t.org).values_list("body", flat=True))
    assert "[REDACTED:" not in bodies  # not stored redacted: not stored
    assert "roll back within ten minutes" in bodies  # what held no secret is
    assert "not stored: GitHub Token on line 4" in " ".join(w["reason"] for w in job.warnings)
    assert rows_holding([keys]) == {}


def test_api_and_mcp_writes_are_redacted_or_refused_naming_body(cast, settings,
                                                                 django_capture_on_commit_callbacks):
    keys = Secrets(4)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    scope = {"org_id": "acme", "repo_id": "web", "session_id": cast.session.external_id}
    body = f"We deployed with the new token.\nGITHUB_TOKEN={keys.github_token}\n"

    created = api.post("/api/fragments", {"scope": scope, "title": "Deploy notes",
                                          "body": body}, format="json")
    assert created.status_code == 201, created.json()
    assert not leaks(json.dumps(created.json()), [keys])
    fragment = Fragment.objects.get(public_id=created.json()["id"])
    assert fragment.body == ("We deployed with the new token.\n"
                             "GITHUB_TOKEN=[REDACTED:GitHub Token]")  # the API strips it
    finding = SecretFinding.objects.get(fragment=fragment)
    assert (finding.origin, finding.action, finding.line, finding.kind, finding.path) == (
        "write", "redacted", 2, "GitHub Token", "")
    assert AuditEvent.objects.filter(action="secret.redacted", object_id=finding.public_id)

    settings.SECRET_POLICY = "refuse"
    refused = api.post("/api/fragments", {"scope": scope, "title": "Again", "body": body},
                       format="json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["field"] == "body" and "GitHub Token on line 2" in error["message"]
    assert not leaks(json.dumps(refused.json()), [keys])
    assert not Fragment.objects.filter(title="Again").exists()
    refusal = SecretFinding.objects.get(action="refused")
    assert (refusal.origin, refusal.line, refusal.fragment) == ("write", 2, None)
    assert AuditEvent.objects.filter(action="secret.refused", object_id=refusal.public_id)

    # The MCP tool write_session_fragment calls this same use case (its error mapping is
    # REST's: a tool error naming the field).
    with pytest.raises(InvalidOperation) as raised:
        write_fragment(cast.token, WriteFragment(
            scope=ScopeRef(org_id="acme", repo_id="web", session_id=cast.session.external_id),
            body=f"token {keys.slack_webhook}"))
    assert raised.value.field == "body" and "Slack Token on line 1" in str(raised.value)
    assert isinstance(raised.value.__cause__, SecretRefused)
    assert not leaks(str(raised.value), [keys])
    assert SecretFinding.objects.filter(action="refused", kind="Slack Token").exists()
    assert rows_holding([keys]) == {}


def test_a_console_edit_is_redacted_and_its_owner_nudged(cast, client, settings,
                                                         django_capture_on_commit_callbacks):
    keys = Secrets(5)
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Alerts",
                               body="Alerts go to the on-call channel.", owner=cast.teammate)
    client.force_login(cast.lead)
    edit = f"/fragments/{fragment.public_id}/edit"
    body = f"Alerts go to the on-call channel:\n{keys.slack_webhook}\n"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(edit, {"title": "Alerts", "body": body, "reason": "webhook",
                                      "based_on_version": fragment.version})
    assert response.status_code == 302
    fragment.refresh_from_db()
    assert fragment.body == "Alerts go to the on-call channel:\n[REDACTED:Slack Token]"
    finding = SecretFinding.objects.get(fragment=fragment)
    assert (finding.origin, finding.line, finding.fragment_version, finding.actor) == (
        "edit", 2, fragment.version, cast.lead)
    nudge = Nudge.objects.get(fragment=fragment)
    assert nudge.owner == cast.teammate and nudge.state == "open"
    assert "Slack Token" in nudge.reasons[0]["detail"]

    settings.SECRET_POLICY = "refuse"
    refused = client.post(edit, {"title": "Alerts", "body": body.replace("channel", "room"),
                                 "based_on_version": fragment.version})
    assert refused.status_code == 400
    assert "Slack Token on line 2" in refused.content.decode()
    fragment.refresh_from_db()
    assert "room" not in fragment.body
    assert SecretFinding.objects.filter(fragment=fragment, action="refused").count() == 1
    assert rows_holding([keys]) == {}


def test_the_findings_page_is_for_those_who_curate_the_organization(cast, client):
    create_fragment(SYSTEM, cast.repo.scope, title="Leaky",
                    body=f"token {Secrets(6).github_token}")
    finding = SecretFinding.objects.get()
    client.force_login(cast.lead)
    assert finding.public_id in client.get("/governance/secrets/").content.decode()
    for outsider in (cast.viewer, cast.stranger):
        client.force_login(outsider)
        page = client.get("/governance/secrets/")
        assert page.status_code == 200 and finding.public_id not in page.content.decode()


def test_a_job_is_linked_from_its_findings(ingest_target, write_tree, tmp_path):
    t, keys = ingest_target, Secrets(8)
    root = write_tree(tmp_path / "tree", {"notes.md": keys.tokens_md()})
    job = run_job(create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator).pk)
    assert {(f.kind, f.line) for f in IngestionJob.objects.get(pk=job.pk).secret_findings.all()
            } == {("Contexts API Token", 3), ("GitLab Token", 4), ("JSON Web Token", 4)}
