"""``manage.py build_docs_qa OUT``: write the documentation question → answer set
(devtools/docs_qa.py; questions and labels in tests/docs_qa/) as a BEIR-layout directory, its
corpus cut from this checkout's documentation now. Fails naming every label that resolves to no
section. Evaluate with ``manage.py eval OUT --split dev``."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from devtools import docs_qa


class Command(BaseCommand):
    help = "Build the documentation question → answer set (corpus from docs/, README, ADRs)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("out", help="directory to write (created)")
        parser.add_argument("--root", default=None, help="checkout to read (default: this one)")

    def handle(self, *args, out: str, root: str | None, **options) -> None:
        try:
            counts = docs_qa.build(Path(out), Path(root) if root else None)
        except docs_qa.LabelError as exc:
            raise CommandError(str(exc)) from exc
        sections = counts.pop("sections")
        splits = ", ".join(f"{split} {n} queries" for split, n in sorted(counts.items()))
        self.stdout.write(f"{out}: {sections} sections; {splits}")
