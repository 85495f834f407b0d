"""This repository — which ``make run`` ingests into the demo organization — holds no secret,
and the scanner raises no false finding on it (issue 22: "zero false findings"). ``manage.py
scan_secrets`` prints the same list."""

from __future__ import annotations

from django.core.management import call_command

from contexts.management.commands.scan_secrets import scan_path, tracked_files
from tests.conftest import ROOT

# Tests about credentials compose their made-up values at run time ("AKIA" + "…"), so that no
# tracked file holds a credential-shaped literal: a fresh demo raises no secret nudge.


def test_the_tracked_files_of_this_repository_hold_no_secret(capsys):
    files = tracked_files(ROOT)
    assert len(files) > 100
    findings = [(str(path.relative_to(ROOT)), finding.line, finding.kind)
                for path in files for finding in scan_path(path, max_bytes=1_000_000)]
    print(f"{len(findings)} findings in {len(files)} tracked files")
    assert findings == []


def test_the_command_prints_path_line_and_kind_never_the_value(tmp_path, capsys):
    key = "AK" + "IA" + "Q7XW3ZK5N2M8P4R6"
    (tmp_path / "leak.md").write_text(f"# Leak\n\nid: {key}\n")
    call_command("scan_secrets", str(tmp_path))
    out = capsys.readouterr().out
    assert f"{tmp_path / 'leak.md'}:3: AWS Access Key" in out and key not in out
    assert "1 finding in 1 files" in out
