"""What tells fragments apart in a list: where each came from (source path and lines), which
part of its section it is ("part 2 of 5") and the heading or definition around it.

An ingested chunk has a source pointer (document, anchor, lines). A section cut into several
chunks gives anchors ``a``, ``a#2``, ``a#3`` … in document order (``ingestion.packing.
unique_anchors``): the parts of one section are the pointers of one document sharing the
anchor's base, numbered by their first line. One statement reads the pointers of every
document the listed fragments come from, numbered by a window function, whatever the number
of rows listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import CharField, Count, F, Func, Value, Window
from django.db.models.functions import RowNumber

from contexts.models import Fragment, SourcePointer


@dataclass(frozen=True)
class Identity:
    path: str = ""           # source document path ("" for fragments written in the console)
    repository: str = ""     # slug of the document's repository, if any
    start_line: int | None = None
    end_line: int | None = None
    part: int = 1
    parts: int = 1
    other_sources: int = 0   # a deduplicated fragment has one pointer per source
    heading: str = ""        # enclosing heading path, or the definition's symbol

    @property
    def lines(self) -> str:
        if self.start_line is None:
            return ""
        if self.end_line is None or self.end_line == self.start_line:
            return str(self.start_line)
        return f"{self.start_line}–{self.end_line}"


def _anchor_base() -> Func:
    return Func(F("anchor"), Value(r"#[0-9]+$"), Value(""), function="regexp_replace",
                output_field=CharField())


def heading_of(fragment: Fragment) -> str:
    """The definition (code: its symbol) or the heading path the fragment sits under."""
    if fragment.symbol:
        return fragment.symbol
    path = [h for h in (fragment.heading_path or []) if h]
    return " › ".join(path)


def identities(fragments: Iterable[Fragment]) -> dict[int, Identity]:
    """pk → :class:`Identity` for ``fragments`` (one query for all of them)."""
    fragments = list(fragments)
    ids = [f.pk for f in fragments]
    if not ids:
        return {}
    documents = SourcePointer.objects.filter(fragment_id__in=ids).values("document_id")
    partition = [F("document_id"), F("base")]
    # The window runs over every pointer of those documents; which rows are ours is decided
    # here, after the numbering (a WHERE on the fragment would number only our rows).
    rows = (SourcePointer.objects.filter(document_id__in=documents)
            .annotate(base=_anchor_base())
            .annotate(part=Window(RowNumber(), partition_by=partition,
                                  order_by=[F("start_line").asc(nulls_last=True),
                                            F("anchor").asc()]),
                      parts=Window(Count("id"), partition_by=partition))
            .order_by("document__path", "start_line")
            .values_list("fragment_id", "document__path", "document__repository__slug",
                         "start_line", "end_line", "part", "parts"))
    wanted = set(ids)
    first: dict[int, tuple] = {}
    counts: dict[int, int] = {}
    for row in rows:
        pk = row[0]
        if pk not in wanted:
            continue
        counts[pk] = counts.get(pk, 0) + 1
        first.setdefault(pk, row)
    found = {}
    for fragment in fragments:
        row = first.get(fragment.pk)
        heading = heading_of(fragment)
        if row is None:
            found[fragment.pk] = Identity(heading=heading)
            continue
        _, path, repository, start, end, part, parts = row
        found[fragment.pk] = Identity(path=path, repository=repository or "", start_line=start,
                                      end_line=end, part=part, parts=parts,
                                      other_sources=counts[fragment.pk] - 1, heading=heading)
    return found


def attach(fragments: Iterable[Fragment]) -> list[Fragment]:
    """The fragments, each with its ``identity`` attribute set (for templates)."""
    fragments = list(fragments)
    found = identities(fragments)
    for fragment in fragments:
        fragment.identity = found.get(fragment.pk, Identity())
    return fragments
