"""``manage.py derive_code_set PACKAGE OUT [--per-type N] [--seed S]``: identifier and
pasted-error queries over an installed package's source tree (devtools/code_set.py), scored with
``manage.py eval OUT --split dev``."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from devtools import code_set


def package_dir(package: str) -> Path:
    """A directory, or the directory of an importable package's name."""
    if Path(package).is_dir():
        return Path(package)
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise CommandError(f"{package}: neither a directory nor an installed package")
    return Path(next(iter(spec.submodule_search_locations)))


class Command(BaseCommand):
    help = "Write identifier and pasted-error queries over another project's source tree."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("package", help="an installed package's name, or a directory")
        parser.add_argument("out", help="directory to write (created)")
        parser.add_argument("--per-type", type=int, default=code_set.PER_TYPE)
        parser.add_argument("--seed", type=int, default=code_set.SEED)

    def handle(self, *args, package: str, out: str, per_type: int, seed: int,
               **options) -> None:
        if per_type < 1:
            raise CommandError(f"--per-type must be at least 1, not {per_type}")
        found = code_set.derive(package_dir(package), Path(out), per_type=per_type, seed=seed)
        kinds = Counter(query.kind for query in found)
        self.stdout.write(f"{out}: {kinds['id']} identifiers, {kinds['error']} pasted errors "
                          f"(score with: manage.py eval {out} --split dev)")
