"""Stage 7a — a file's outline gives its place to the best chunk of its file.

Ingestion adds to a source file of several chunks one more, its outline (anchor
:data:`~contexts.kernel.anchors.FILE_OUTLINE_ANCHOR`: path, module docstring, one line per
definition). Its words are the file's as a whole, so it ranks high for "which file …?" — and
just as high for "how does X work?" or a bare identifier, above the very chunk that answers:
measured on the golden dev split, outlines alone lowered `nl` MRR@10 by 0.058 and `id` by 0.019
(`docs/retrieval-quality.md`). So the outline is read as a pointer to its file: when it ranks
above a chunk of the same file within the first :data:`REACH`, the two trade scores — the
chunk takes the outline's place, the outline the chunk's. Any fragment of the file answers a
"which file" question, so those lose nothing; the others get the definition first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import connection

from contexts.kernel.anchors import FILE_OUTLINE_ANCHOR
from contexts.retrieval.types import Candidate, CandidateRow

# How deep an outline looks for a chunk of its file: the first page an agent reads.
REACH = 10

# (fragment pk, document path, anchor) of each pointer; a collapsed duplicate has several.
_POINTERS_SQL = ("SELECT p.fragment_id, d.path, p.anchor FROM contexts_sourcepointer p "
                 "JOIN contexts_sourcedocument d ON d.id = p.document_id "
                 "WHERE p.fragment_id = ANY(%s)")


def lift(candidates: Mapping[int, Candidate], rows: Mapping[int, CandidateRow]) -> None:
    """Trade the final scores of each outline in the first :data:`REACH` with the best chunk
    of its file below it (in place). One statement over at most :data:`REACH` fragments; it
    must run inside :func:`contexts.services.rls.retrieval_scope`, as the other reads do."""
    top = sorted((c for c in candidates.values()
                  if c.fragment_id in rows and not c.pinned and not c.dropped),
                 key=lambda c: (-c.final, c.fragment_id))[:REACH]
    if len(top) < 2:
        return
    with connection.cursor() as cursor:
        cursor.execute(_POINTERS_SQL, [[c.fragment_id for c in top]])
        pointers = cursor.fetchall()
    trade(top, files_of(pointers))


def files_of(pointers: Sequence[tuple[int, str, str]]) -> dict[int, tuple[str, bool]]:
    """fragment pk → (its file, whether it is that file's outline); a fragment that stands for
    several documents (a collapsed duplicate) keeps its first, which is enough to pair an
    outline — an outline is never a duplicate of a chunk."""
    files: dict[int, tuple[str, bool]] = {}
    for pk, path, anchor in sorted(pointers, key=lambda row: (row[0], row[1], row[2])):
        files.setdefault(pk, (path, anchor == FILE_OUTLINE_ANCHOR))
    return files


def trade(ordered: list[Candidate], files: Mapping[int, tuple[str, bool]]) -> None:
    """``ordered`` best first: each outline trades its final score (and place in ``ordered``)
    with the first chunk of its file that follows it."""
    traded: set[int] = set()
    for i in range(len(ordered)):
        candidate = ordered[i]
        path, is_outline = files.get(candidate.fragment_id, ("", False))
        if not is_outline or candidate.fragment_id in traded:
            continue  # an outline trades once, not again from the place it moved to
        traded.add(candidate.fragment_id)
        for j in range(i + 1, len(ordered)):
            other = ordered[j]
            if files.get(other.fragment_id) == (path, False):
                candidate.final, other.final = other.final, candidate.final
                ordered[i], ordered[j] = other, candidate
                break
