"""Ownership coverage (issue 38): per repository, the share of active fragments an active member
of the organization owns — the people staleness and conflict nudges can reach — and where those
owners came from (a person's choice in the console, CODEOWNERS, front matter, git history, the
tech lead, or the writer of a fragment no file brought)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from accounts.models import Membership, Organization
from contexts.models import Fragment, FragmentStatus, SourcePointer

WRITTEN = "written"    # no source file: its writer (or whoever a person chose) owns it
PERSON = "person"      # a person chose the owner in the console or a nudge
UNKNOWN = "not resolved yet"


@dataclass
class Coverage:
    label: str          # the repository ("org/repo")
    active: int = 0
    owned: int = 0      # by an active member of the organization
    by_source: dict[str, int] = field(default_factory=dict)

    @property
    def share(self) -> float | None:
        return self.owned / self.active if self.active else None

    @property
    def percent(self) -> str:
        return "—" if self.share is None else f"{self.share:.0%}"


def coverage(org: Organization, fragments: QuerySet[Fragment] | None = None) -> list[Coverage]:
    """One row per repository that holds active fragments, by label: owned
    counts only an active member of ``org`` as owner. ``fragments``: what the viewer reads."""
    fragments = Fragment.objects.all() if fragments is None else fragments
    member = Membership.objects.filter(org=org, user=OuterRef("owner"), user__is_active=True)
    first_source = (SourcePointer.objects.filter(fragment=OuterRef("pk"))
                    .order_by("document__path").values("document__owner_source")[:1])
    rows = (fragments.filter(org=org, status=FragmentStatus.ACTIVE, scope__kind="repo")
            .annotate(member_owner=Exists(member),
                      has_source=Exists(SourcePointer.objects.filter(fragment=OuterRef("pk"))),
                      source=Subquery(first_source))
            .values_list("scope__label", "member_owner", "owner_set_by_person", "has_source",
                         "source"))
    table: dict[str, Coverage] = {}
    sources: dict[str, Counter] = {}
    for label, owned, by_person, has_source, source in rows:
        row = table.setdefault(label, Coverage(label))
        row.active += 1
        if not owned:
            continue
        row.owned += 1
        origin = PERSON if by_person else (source or UNKNOWN) if has_source else WRITTEN
        sources.setdefault(label, Counter())[origin.replace("_", " ")] += 1
    for label, counter in sources.items():
        table[label].by_source = dict(counter.most_common())
    return sorted(table.values(), key=lambda row: row.label)
