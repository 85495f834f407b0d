"""The scanner on its own (no database): what it finds, where, and what redaction leaves."""

from __future__ import annotations

import pytest

from contexts import secret_scan
from contexts.services.secrets import screen_file
from tests.secrets.fakes import Secrets

KEYS = Secrets(7)


@pytest.mark.parametrize(("name", "text", "expected"), [
    (".env.md", KEYS.env_md(), [("AWS Access Key", 6), ("High Entropy Assignment", 7)]),
    ("docs/runbooks/rotate-tls.md", KEYS.runbook_md(), [("Private Key", 7)]),
    ("billing/settings.py", KEYS.settings_py(), [("GitHub Token", 4), ("Slack Token", 5)]),
    ("config/database.yaml", KEYS.database_yaml(), [("Basic Auth Credentials", 3)]),
    ("docs/tokens.md", KEYS.tokens_md(), [("Contexts API Token", 3), ("GitLab Token", 4),
                                          ("JSON Web Token", 4)]),
])
def test_each_secret_is_found_on_its_line_and_redaction_leaves_none(name, text, expected):
    redacted, findings = screen_file(name, text.encode())
    assert [(f.kind, f.line) for f in findings] == expected
    assert not [value for value in KEYS.values() if value in redacted]
    for kind, _ in expected:
        assert secret_scan.placeholder(kind) in redacted
    assert secret_scan.scan(redacted, filename=name) == []  # placeholders are not secrets
    # Code keeps its line numbers: a redacted key block leaves as many lines as it had.
    assert redacted.count("\n") == text.count("\n")


def test_a_finding_never_shows_its_value():
    finding = secret_scan.scan(f"key = {KEYS.github_token}")[0]
    for shown in (repr(finding), str(finding), str(finding.public()),
                  secret_scan.describe([finding])):
        assert KEYS.github_token not in shown
    assert finding.public() == {"kind": "GitHub Token", "line": 1}


def test_a_key_cut_off_without_its_end_line_goes_to_the_end_of_its_paragraph():
    text = "\n".join([KEYS.private_key.split("\n")[0], *KEYS.pem_body[:3], "",
                      "## Next", "Keep this paragraph."])
    redacted, _ = screen_file("notes.md", text)
    assert not [line for line in KEYS.pem_body[:3] if line in redacted]
    assert redacted.endswith("## Next\nKeep this paragraph.")


@pytest.mark.parametrize("line", [
    'password = request.POST["password"]',
    "DATABASE_URL=postgres://contexts:${DB_PASSWORD}@db:5432/contexts",
    'SECRET_KEY = env_str("SECRET_KEY") or local_secret_key(VAR_DIR / "secret_key")',
    "api_key = settings.OPENAI_API_KEY",
    'content_hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
    "fragment uid 6f1c3a52-8a43-4c1e-9a57-2f0c8e7b9d10",
    "TOKEN=$(.venv/bin/python manage.py create_token --name my-agent --scope org:demo)",
    'curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8000/api/contexts/retrieve',
    "AWS_SECRET_ACCESS_KEY=[REDACTED:High Entropy Assignment]",
    "agent tokens look like ctx_<prefix>_<secret>",
    'password: "correct horse battery staple"',
])
def test_ordinary_lines_are_not_findings(line):
    assert secret_scan.scan(line) == []
