"""``manage.py derive_code_set PACKAGE OUT [--per-type N] [--seed S] [--questions DIR]``:
identifier and pasted-error queries over an installed package's source tree
(devtools/code_set.py), and the questions in words people wrote for it (``--questions
tests/other_trees/PACKAGE``), scored with ``manage.py eval OUT --split dev``."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections import Counter
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from devtools import code_set


def package_path(package: str) -> Path:
    """A path (it holds a ``/`` or starts with ``.``), else an importable package's or
    module's file or directory (a dotted name imports its parents to find it)."""
    if "/" in package or package.startswith("."):
        path = Path(package)
        if not path.exists():
            raise CommandError(f"{package}: no such file or directory")
        return path
    try:
        spec = importlib.util.find_spec(package)
    except Exception as exc:  # noqa: BLE001 - a parent package that fails on import
        raise CommandError(f"{package}: cannot be found ({type(exc).__name__}: {exc})") from exc
    if spec is None:
        raise CommandError(f"{package}: not an installed package or module")
    locations = list(spec.submodule_search_locations or ())
    if len(locations) > 1:
        raise CommandError(f"{package}: a namespace package in {len(locations)} places; "
                           "pass one of them as a path")
    if locations:
        return Path(locations[0])
    if spec.origin and spec.origin.endswith(".py"):
        return Path(spec.origin)
    raise CommandError(f"{package}: has no Python source ({spec.origin})")


class Command(BaseCommand):
    help = "Write identifier and pasted-error queries over another project's source tree."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser) -> None:
        parser.add_argument("package", help="an installed package's or module's name, or a path")
        parser.add_argument("out", help="directory to write: new or empty, apart from the package")
        parser.add_argument("--per-type", type=int, default=code_set.PER_TYPE)
        parser.add_argument("--seed", type=int, default=code_set.SEED)
        parser.add_argument("--questions", help="a directory of questions people wrote for this "
                            "package (tests/other_trees/PACKAGE): added once their labels are "
                            "found in the tree")

    def handle(self, *args, package: str, out: str, per_type: int, seed: int,
               questions: str | None, **options) -> None:
        if per_type < 1:
            raise CommandError(f"--per-type must be at least 1, not {per_type}")
        try:
            found = code_set.derive(package_path(package), Path(out), per_type=per_type,
                                    seed=seed)
            if questions:
                found += code_set.add_questions(Path(out), Path(questions),
                                                version=installed_version(package))
        except code_set.CodeSetError as exc:
            raise CommandError(str(exc)) from exc
        kinds = Counter(kind for kind in {query.qid: query.kind for query in found}.values())
        written = (f", {kinds['nl']} questions in words, {kinds['file']} asking which file"
                   if questions else "")
        self.stdout.write(f"{out}: {kinds['id']} identifiers, {kinds['error']} pasted errors"
                          f"{written} (score with: manage.py eval {out} --split dev)")


def installed_version(package: str) -> str | None:
    """The installed distribution's version for an import name (``yaml`` is PyYAML's), or
    None for a path or a module no distribution names."""
    if "/" in package or package.startswith("."):
        return None
    top = package.split(".")[0]
    names = importlib.metadata.packages_distributions().get(top, [])
    return importlib.metadata.version(names[0]) if names else None
