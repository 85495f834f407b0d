"""Knowledge stored before the secret scan existed is scanned again, through the same door
(``manage.py scan_secrets --stored``; ``contexts.usecases.stored_secrets``), on real PostgreSQL.

A fragment holding a secret is stored the way the code before the scanner stored it: through
``create_fragment`` with the door's screen switched off for that one insert (the version row
and the audit event are written as they were then). Under policy ``redact`` the rescan stores a
new, redacted version — retrieval no longer returns the secret, a finding and its audit event
are recorded, the owner is nudged, and no new row copies the secret; under ``refuse`` the
fragment is retired; a dry run changes nothing; a clean fragment gets no new version.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from django.core import mail
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import (
    AuditEvent,
    Fragment,
    FragmentVersion,
    Nudge,
    SecretFinding,
)
from contexts.services import secrets
from contexts.services.fragments import create_fragment, retire_fragment
from contexts.usecases.stored_secrets import rescan_stored
from tests.secrets.fakes import Secrets
from tests.secrets.test_write_paths import leaks, rows_holding

pytestmark = pytest.mark.django_db

QUERY = "billing deploy credentials"


@pytest.fixture
def index(settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"


@contextmanager
def before_the_scanner(monkeypatch):
    """The door as it was before issue 22: it stored what it was given."""
    with monkeypatch.context() as patched:
        patched.setattr(secrets, "screen_write", lambda *, body, title, **_: secrets.Screened(
            body, title))
        yield


def leaky_fragment(monkeypatch, scope, keys: Secrets, **kwargs) -> Fragment:
    with before_the_scanner(monkeypatch):
        fragment = create_fragment(
            SYSTEM, scope, title="Billing deploy",
            body=("Deploy the billing service with these credentials.\n"
                  f"GITHUB_TOKEN={keys.github_token}\n"
                  f"AWS_ACCESS_KEY_ID={keys.aws_access_key_id}\n"), **kwargs)
    assert keys.github_token in fragment.body  # stored as the old code stored it
    return fragment


def retrieve(cast) -> str:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    response = api.post("/api/contexts/retrieve", {
        "query": QUERY, "scope": {"org_id": "acme", "repo_id": "web"}, "budget_tokens": 4000},
        format="json")
    assert response.status_code == 200, response.json()
    return json.dumps(response.json())


def test_redact_stores_a_redacted_version_and_retrieval_no_longer_serves_the_secret(
        cast, index, monkeypatch, settings, django_capture_on_commit_callbacks):
    settings.SECRET_POLICY = "redact"
    keys = Secrets(21)
    leaky = leaky_fragment(monkeypatch, cast.repo.scope, keys, owner=cast.teammate)
    clean = create_fragment(SYSTEM, cast.repo.scope, title="Billing deploy days",
                            body="Billing deploys happen on weekdays, never on Fridays.")
    elsewhere = leaky_fragment(monkeypatch, cast.other_org.scope, keys)
    reindex_fragments([leaky.pk, clean.pk])
    assert leaks(retrieve(cast), [keys])  # the gap: served to agents before the rescan
    stored_before = rows_holding([keys])
    assert "contexts_fragment" in stored_before

    with django_capture_on_commit_callbacks(execute=True):
        report = rescan_stored(cast.org)

    assert (report.scanned, report.with_findings, report.redacted, report.retired) == (
        2, 1, 1, 0)
    [hit] = report.fragments
    assert str(hit) == (f"{leaky.public_id}: GitHub Token on line 2, "
                        "AWS Access Key on line 3")
    assert hit.outcome == "redacted" and not any(f.value for f in hit.findings)

    # A new version, written by the door: the secrets are placeholders now.
    leaky.refresh_from_db()
    assert leaky.version == 2 and leaky.status == "active"
    assert leaky.body == ("Deploy the billing service with these credentials.\n"
                          "GITHUB_TOKEN=[REDACTED:GitHub Token]\n"
                          "AWS_ACCESS_KEY_ID=[REDACTED:AWS Access Key]\n")
    version = FragmentVersion.objects.get(fragment=leaky, number=2)
    assert version.reason.startswith("secret scan of stored text: GitHub Token on line 2")
    # The older version still holds it (versions are immutable): hence "rotate it".
    assert keys.github_token in FragmentVersion.objects.get(fragment=leaky, number=1).body

    # The clean fragment is untouched; the other organization was not asked about.
    clean.refresh_from_db()
    assert clean.version == 1 and FragmentVersion.objects.filter(fragment=clean).count() == 1
    elsewhere.refresh_from_db()
    assert elsewhere.version == 1 and keys.github_token in elsewhere.body

    # Recorded, audited and nudged as for any write: kind and line, origin "rescan".
    findings = SecretFinding.objects.filter(fragment=leaky)
    assert {(f.kind, f.line, f.origin, f.action, f.fragment_version, f.org_id)
            for f in findings} == {
        ("GitHub Token", 2, "rescan", "redacted", 2, cast.org.pk),
        ("AWS Access Key", 3, "rescan", "redacted", 2, cast.org.pk)}
    for finding in findings:
        assert AuditEvent.objects.filter(action="secret.redacted",
                                         object_id=finding.public_id).exists()
    edit = AuditEvent.objects.get(action="fragment.edit", object_id=leaky.public_id)
    assert "[REDACTED:GitHub Token]" in edit.before["body"]  # the before is audited redacted
    assert not leaks(json.dumps([edit.before, edit.after]), [keys])
    nudge = Nudge.objects.get(fragment=leaky)
    assert nudge.owner == cast.teammate and nudge.state == "open"
    assert "stored before secrets were scanned" in nudge.reasons[0]["detail"]
    assert any(cast.teammate.email in m.to for m in mail.outbox)
    assert not leaks(" ".join(f"{m.subject}\n{m.body}" for m in mail.outbox), [keys])

    # Once the worker re-derives it (the change signal queued that), retrieval serves the
    # redacted knowledge and not the secret.
    reindex_fragments([leaky.pk])
    answer = retrieve(cast)
    assert not leaks(answer, [keys]) and "[REDACTED:GitHub Token]" in answer
    # No row copies the secret anew; the fragment row holds it no more (what remains is the
    # history: the first version, the creation's audit event, the trace of the first query,
    # and the other organization's fragment).
    stored_after = rows_holding([keys])
    assert "contexts_fragment" in stored_after  # the other organization's, not scanned
    assert {table: n for table, n in stored_after.items() if table != "contexts_fragment"} == {
        table: n for table, n in stored_before.items() if table != "contexts_fragment"}
    assert stored_after["contexts_fragment"] == stored_before["contexts_fragment"] - 1

    # Run again: nothing left to do.
    again = rescan_stored(cast.org)
    assert (again.scanned, again.with_findings, again.redacted) == (2, 0, 0)


def test_refuse_retires_the_fragment_and_records_the_refusal(
        cast, index, monkeypatch, settings, django_capture_on_commit_callbacks):
    settings.SECRET_POLICY = "refuse"
    keys = Secrets(22)
    leaky = leaky_fragment(monkeypatch, cast.repo.scope, keys, owner=cast.teammate)
    reindex_fragments([leaky.pk])
    assert leaks(retrieve(cast), [keys])

    with django_capture_on_commit_callbacks(execute=True):
        report = rescan_stored()

    assert (report.with_findings, report.redacted, report.retired) == (1, 0, 1)
    assert report.fragments[0].outcome == "retired"
    leaky.refresh_from_db()
    assert leaky.status == "retired" and leaky.version == 1  # nothing new stored
    retired = AuditEvent.objects.get(action="fragment.retire", object_id=leaky.public_id)
    assert retired.after["reason"] == (
        "held secrets stored before the secret scan (GitHub Token on line 2, AWS Access Key "
        "on line 3); policy refuse")
    assert not leaks(json.dumps([retired.before, retired.after]), [keys])
    assert {(f.kind, f.line, f.origin, f.action) for f in
            SecretFinding.objects.filter(fragment=leaky)} == {
        ("GitHub Token", 2, "rescan", "refused"), ("AWS Access Key", 3, "rescan", "refused")}
    assert AuditEvent.objects.filter(action="secret.refused").count() == 2
    # The owner heard about it (the nudge itself closes: its fragment is retired).
    message = next(m for m in mail.outbox if cast.teammate.email in m.to)
    assert "GitHub Token" in message.body and not leaks(message.body, [keys])

    reindex_fragments([leaky.pk])
    assert not leaks(retrieve(cast), [keys])


def test_a_dry_run_reports_and_changes_nothing(cast, monkeypatch, settings, capsys):
    settings.SECRET_POLICY = "redact"
    keys = Secrets(23)
    leaky = leaky_fragment(monkeypatch, cast.repo.scope, keys)
    with before_the_scanner(monkeypatch):  # a secret in the title (line 0)
        titled = create_fragment(SYSTEM, cast.org.scope, title=f"token {keys.gitlab_token}",
                                 body="Which token the CI uses to reach GitLab.")
        gone = create_fragment(SYSTEM, cast.org.scope, title="Old",
                               body=f"GITHUB_TOKEN={keys.github_token}")
    retire_fragment(SYSTEM, gone, reason="obsolete")  # retired: not scanned
    events, versions = AuditEvent.objects.count(), FragmentVersion.objects.count()

    report = rescan_stored(cast.org, dry_run=True)
    assert (report.scanned, report.with_findings, report.redacted, report.retired) == (
        2, 2, 0, 0)
    assert {(h.fragment_id, h.outcome) for h in report.fragments} == {
        (leaky.public_id, "would redact"), (titled.public_id, "would redact")}
    call_command("scan_secrets", "--stored", "--org", "acme", "--dry-run")
    settings.SECRET_POLICY = "refuse"
    assert {h.outcome for h in rescan_stored(dry_run=True).fragments} == {"would retire"}

    out = capsys.readouterr().out
    assert f"{leaky.public_id}: GitHub Token on line 2, AWS Access Key on line 3 [acme: " \
           "would redact]" in out
    assert f"{titled.public_id}: GitLab Token in the title [acme: would redact]" in out
    assert ("2 fragments scanned, 2 with secrets: 0 redacted, 0 retired "
            "(dry run: nothing changed)") in out
    assert not leaks(out, [keys])
    leaky.refresh_from_db()
    assert leaky.version == 1 and keys.github_token in leaky.body
    assert not SecretFinding.objects.exists() and not Nudge.objects.exists()
    assert (AuditEvent.objects.count(), FragmentVersion.objects.count()) == (events, versions)


def test_the_command_redacts_and_prints_kinds_and_lines_never_values(
        cast, monkeypatch, settings, capsys):
    settings.SECRET_POLICY = "redact"
    keys = Secrets(24)
    leaky = leaky_fragment(monkeypatch, cast.repo.scope, keys)
    create_fragment(SYSTEM, cast.repo.scope, title="Clean", body="Nothing secret in here.")
    call_command("scan_secrets", "--stored", "--org", cast.org.slug)
    out = capsys.readouterr().out
    assert (f"{leaky.public_id}: GitHub Token on line 2, AWS Access Key on line 3 "
            "[acme: redacted]") in out
    assert "2 fragments scanned, 1 with secrets: 1 redacted, 0 retired" in out
    assert "rotate" in out and not leaks(out, [keys])
    leaky.refresh_from_db()
    assert leaky.version == 2 and not leaks(leaky.body, [keys])
