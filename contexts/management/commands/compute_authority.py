"""``manage.py compute_authority [--org SLUG]``: PageRank over citation links → authority."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.lookups import find_org
from accounts.models import Organization
from contexts.usecases.maintenance import compute_authority


class Command(BaseCommand):
    help = "Recompute Fragment.authority (PageRank over the citation graph) per organization."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--org", help="slug or public id; default every organization")
        parser.add_argument("--top", type=int, default=0, help="print the N most cited")

    def handle(self, *args, org: str | None, top: int, **options) -> None:
        orgs = list(Organization.objects.order_by("pk"))
        if org:
            found = find_org(org)
            if found is None:
                raise CommandError(f"no organization {org!r}")
            orgs = [found]
        for organization in orgs:
            scores = compute_authority(organization)
            self.stdout.write(f"{organization.slug}: {len(scores)} fragments ranked")
            if top:
                from contexts.models import Fragment

                names = dict(Fragment.objects.filter(pk__in=list(scores))
                             .values_list("pk", "public_id"))
                for pk, score in sorted(scores.items(), key=lambda kv: -kv[1])[:top]:
                    self.stdout.write(f"  {score:.4f} {names[pk]}")
