"""This repository — which ``make run`` ingests into the demo organization — holds no secret,
and the scanner raises no false finding on it (issue 22: "zero false findings, or each listed
and justified"). ``manage.py scan_secrets`` prints the same list."""

from __future__ import annotations

from django.core.management import call_command

from contexts.management.commands.scan_secrets import scan_path, tracked_files
from tests.conftest import ROOT

# (path, kind) → why that finding is not a secret: test values shaped like credentials on
# purpose, because the test is about credentials. Each is a true finding of its format; the
# scanner would redact it when the tests are ingested, which is what we want.
JUSTIFIED: dict[tuple[str, str], str] = {
    ("tests/ingestion/test_git_walk.py", "AWS Access Key"):
        "a made-up AWS key id (…EXAMPLE99) the test writes into an untracked .env.md, then "
        "checks is never ingested",
    ("tests/ingestion/test_git_walk.py", "Secret Keyword"):
        "a marker string in a file outside the ingested root, checked never to be read",
    ("tests/operations/test_run_settings.py", "Basic Auth Credentials"):
        "a made-up DATABASE_URL password for a server that does not exist (the test checks "
        "the one-line error of an unreachable database)",
    ("tests/security/test_hygiene.py", "Base64 High Entropy String"):
        "the content of a fake SECRET_KEY_FILE (the test checks *_FILE variants are read)",
    ("tests/security/test_redteam_1_path_ingestion.py", "Secret Keyword"):
        "a fake instance SECRET_KEY the red-team test plants, then checks never leaks",
    ("tests/security/test_redteam_8_service_credentials.py", "Basic Auth Credentials"):
        "a made-up production DATABASE_URL password (the test checks the change-me "
        "placeholder is refused and a real-looking one accepted)",
}


def test_the_tracked_files_of_this_repository_hold_no_secret(capsys):
    files = tracked_files(ROOT)
    assert len(files) > 100
    findings = [(str(path.relative_to(ROOT)), finding.line, finding.kind)
                for path in files for finding in scan_path(path, max_bytes=1_000_000)]
    print(f"{len(findings)} findings in {len(files)} tracked files")
    assert [f for f in findings if (f[0], f[2]) not in JUSTIFIED] == []


def test_the_command_prints_path_line_and_kind_never_the_value(tmp_path, capsys):
    key = "AK" + "IA" + "Q7XW3ZK5N2M8P4R6"
    (tmp_path / "leak.md").write_text(f"# Leak\n\nid: {key}\n")
    call_command("scan_secrets", str(tmp_path))
    out = capsys.readouterr().out
    assert f"{tmp_path / 'leak.md'}:3: AWS Access Key" in out and key not in out
    assert "1 finding in 1 files" in out
