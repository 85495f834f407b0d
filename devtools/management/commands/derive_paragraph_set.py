"""``manage.py derive_paragraph_set OUT [--source DIR] [--copy]``: write the paragraph-query set
derived from SciFact (devtools/paragraph_set.py) into OUT. Evaluate it with
``manage.py eval OUT --split dev --ignore-identical-ids``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devtools import paragraph_set


class Command(BaseCommand):
    help = "Derive the paragraph-query set (abstract → co-cited abstracts) from SciFact."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("out", help="directory to write (created)")
        parser.add_argument("--source", default=None,
                            help="SciFact in BEIR layout (default ../shared/datasets/scifact)")
        parser.add_argument("--copy", action="store_true",
                            help="copy corpus.jsonl instead of symlinking it")
        parser.add_argument("--min-words", type=int, default=paragraph_set.MIN_WORDS)

    def handle(self, *args, out: str, source: str | None, copy: bool, min_words: int,
               **options) -> None:
        src = (Path(source) if source
               else Path(settings.BASE_DIR).parent / "shared" / "datasets" / "scifact")
        if not (src / "corpus.jsonl").is_file():
            raise CommandError(f"{src}: no corpus.jsonl (pass --source)")
        counts = paragraph_set.derive(src, Path(out), copy=copy, min_words=min_words)
        splits = ", ".join(f"{split} {n} queries" for split, n in counts.items())
        self.stdout.write(f"{out}: {splits}")
