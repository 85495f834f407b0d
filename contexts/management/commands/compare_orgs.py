"""``manage.py compare_orgs LEFT RIGHT [--repo SLUG] [--query Q ...]``: ask two organizations
the same retrieval queries and say whether each returns the same source paths and texts in
the same order — the check after ``import_org`` (``docs/export-format.md``, *Checking a
restore*). Without ``--query``, twenty queries made of the left organization's fragment
titles are asked."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.permissions import SYSTEM
from contexts.usecases import portability
from contexts.usecases.errors import NotVisible


class Command(BaseCommand):
    help = "Run the same retrieval queries against two organizations and compare the answers."

    def add_arguments(self, parser) -> None:
        parser.add_argument("left")
        parser.add_argument("right")
        parser.add_argument("--repo", default=None, help="a repository slug both have")
        parser.add_argument("--query", action="append", default=[], dest="queries")
        parser.add_argument("--count", type=int, default=20,
                            help="how many title queries without --query (default 20)")

    def handle(self, *args, left: str, right: str, repo: str | None, queries: list[str],
               count: int, **options) -> None:
        try:
            if not queries:
                queries = portability.sample_queries(SYSTEM, left, count)
            results = portability.compare_orgs(SYSTEM, portability.CompareOrgs(
                left=left, right=right, repo=repo, queries=tuple(queries)))
        except NotVisible as exc:
            raise CommandError(str(exc) if "repository" in str(exc) else
                               f"no organization {left!r} or {right!r}") from None
        for result in results:
            mark = "same" if result.same else "DIFFERENT"
            self.stdout.write(f"{mark:9} {len(result.left.fragments):3} fragments  "
                              f"{result.query}")
        same = sum(result.same for result in results)
        self.stdout.write(f"{same} of {len(results)} queries return the same answer")
        if same != len(results):
            raise CommandError(f"{len(results) - same} queries differ")
