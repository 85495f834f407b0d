"""Docs that stay true: every ADR says where it stands, and a superseded one names a successor
that exists."""

from __future__ import annotations

import re
from pathlib import Path

ADR_DIR = Path(__file__).resolve().parents[2] / "docs" / "adr"
STATUS = re.compile(r"^Status: (accepted|superseded in part|superseded|proposed)\b(.*)$",
                    re.MULTILINE)


def test_every_adr_carries_a_status_line_and_points_at_adrs_that_exist():
    adrs = sorted(ADR_DIR.glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert adrs
    numbers = {path.name[:4] for path in adrs}
    for path in adrs:
        text = path.read_text()
        assert text.startswith(f"# ADR {path.name[:4]} — "), path.name
        status = STATUS.search(text.split("\n## ", 1)[0])
        assert status, f"{path.name}: no Status line above its first section"
        # The status may run on to the next lines (up to the first blank line).
        paragraph = text[status.start():].split("\n\n", 1)[0]
        named = set(re.findall(r"ADR (\d{4})", paragraph))
        if status.group(1).startswith("superseded"):
            assert named, f"{path.name}: superseded, but by which ADR?"
        assert named <= numbers, f"{path.name} names ADRs that do not exist: {named - numbers}"
