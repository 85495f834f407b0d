"""Three-way line merge: a person's edit of a fragment meets its source file's change (ADR 0020).

``merge(base, mine, theirs)``: ``base`` is the source text the fragment was last written from,
``mine`` the fragment as curated since, ``theirs`` the source's new text. Pure functions, no
Django: the ingestion lane, the conflict use case and the console's "edit the merge" all call
them.

The algorithm is diff3's. Each side is diffed against the base (``difflib``, no junk
heuristic, so repeated lines such as blank ones are matched like any other); the base lines
*both* sides kept unchanged are the stable regions. Between two stable regions each side
either left the base alone or changed it:

* only one side changed it → that side's lines;
* both made the same change → once;
* both changed it differently → a conflict.

Changes that touch *adjacent* lines conflict (as in ``git merge``): with no unchanged line
between them nothing says which order they belong in. A conflict's merged text carries
``git``-style markers, for a person to finish by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

MINE_MARK, SEPARATOR, THEIRS_MARK = "<<<<<<<", "=======", ">>>>>>>"


@dataclass(frozen=True)
class Region:
    """A stretch of the merge: ``base``, ``mine`` and ``theirs`` hold the lines each side has
    there; ``lines`` what the merge takes (``None`` for a conflict)."""

    base: tuple[str, ...]
    mine: tuple[str, ...]
    theirs: tuple[str, ...]
    lines: tuple[str, ...] | None

    @property
    def conflict(self) -> bool:
        return self.lines is None


@dataclass(frozen=True)
class MergeResult:
    regions: tuple[Region, ...]
    mine_label: str = "curated"
    theirs_label: str = "upstream"

    @property
    def conflicts(self) -> int:
        return sum(1 for region in self.regions if region.conflict)

    @property
    def clean(self) -> bool:
        return self.conflicts == 0

    @property
    def text(self) -> str:
        """The merged text; each conflict between markers (mine first, then theirs)."""
        out: list[str] = []
        for region in self.regions:
            if region.lines is not None:
                out.extend(region.lines)
                continue
            out.append(f"{MINE_MARK} {self.mine_label}\n")
            out.extend(_terminated(region.mine))
            out.append(f"{SEPARATOR}\n")
            out.extend(_terminated(region.theirs))
            out.append(f"{THEIRS_MARK} {self.theirs_label}\n")
        return "".join(out)


def merge(base: str, mine: str, theirs: str, *, mine_label: str = "curated",
          theirs_label: str = "upstream") -> MergeResult:
    """Merge ``mine`` and ``theirs``, both derived from ``base``, line by line."""
    base_lines, mine_lines, theirs_lines = (_lines(base), _lines(mine), _lines(theirs))
    regions: list[Region] = []
    at_base = at_mine = at_theirs = 0
    for (base_lo, base_hi, mine_lo, mine_hi, theirs_lo,
         theirs_hi) in _stable_regions(base_lines, mine_lines, theirs_lines):
        if at_base < base_lo or at_mine < mine_lo or at_theirs < theirs_lo:
            regions.append(_resolve(tuple(base_lines[at_base:base_lo]),
                                    tuple(mine_lines[at_mine:mine_lo]),
                                    tuple(theirs_lines[at_theirs:theirs_lo])))
        if base_lo < base_hi:
            same = tuple(base_lines[base_lo:base_hi])
            regions.append(Region(same, same, same, same))
        at_base, at_mine, at_theirs = base_hi, mine_hi, theirs_hi
    return MergeResult(tuple(regions), mine_label, theirs_label)


def merged_text(base: str, mine: str, theirs: str) -> str | None:
    """The merged text, or ``None`` when the two changes overlap."""
    result = merge(base, mine, theirs)
    return result.text if result.clean else None


def _resolve(base: tuple[str, ...], mine: tuple[str, ...], theirs: tuple[str, ...]) -> Region:
    if mine == theirs:
        return Region(base, mine, theirs, mine)  # the same change on both sides (or none)
    if mine == base:
        return Region(base, mine, theirs, theirs)
    if theirs == base:
        return Region(base, mine, theirs, mine)
    return Region(base, mine, theirs, None)


def _stable_regions(base: Sequence[str], mine: Sequence[str], theirs: Sequence[str]
                    ) -> list[tuple[int, int, int, int, int, int]]:
    """(base_lo, base_hi, mine_lo, mine_hi, theirs_lo, theirs_hi) of every run of base lines
    both sides kept, in order, ending with an empty sentinel at the three ends."""
    with_mine = SequenceMatcher(None, base, mine, autojunk=False).get_matching_blocks()
    with_theirs = SequenceMatcher(None, base, theirs, autojunk=False).get_matching_blocks()
    regions = []
    i = j = 0
    while i < len(with_mine) and j < len(with_theirs):
        mine_base, mine_at, mine_len = with_mine[i]
        theirs_base, theirs_at, theirs_len = with_theirs[j]
        lo = max(mine_base, theirs_base)
        hi = min(mine_base + mine_len, theirs_base + theirs_len)
        if lo < hi:
            regions.append((lo, hi, mine_at + lo - mine_base, mine_at + hi - mine_base,
                            theirs_at + lo - theirs_base, theirs_at + hi - theirs_base))
        # Advance whichever block ends first; the other may still overlap the next one.
        if mine_base + mine_len < theirs_base + theirs_len:
            i += 1
        else:
            j += 1
    regions.append((len(base), len(base), len(mine), len(mine), len(theirs), len(theirs)))
    return regions


def _lines(text: str) -> list[str]:
    """Lines with their newline kept, so joining them gives ``text`` back. Only "\\n" splits
    (``str.splitlines`` would also split at form feeds and U+2028, which a line may hold)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _terminated(lines: tuple[str, ...]) -> list[str]:
    """``lines`` with the last one ending in a newline, so a marker starts its own line."""
    if lines and not lines[-1].endswith("\n"):
        return [*lines[:-1], lines[-1] + "\n"]
    return list(lines)
