"""Line-range bookkeeping shared by the code and prose chunkers.

Both chunkers first cut a document into *segments* (line ranges that should not be broken:
a statement, a paragraph, a fenced block) and then pack consecutive segments into parts that
fit a token budget, repeating the tail of one part at the head of the next. Working in whole
lines is what guarantees that no chunk ever starts or ends in the middle of a line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

from contexts.kernel.tokens import count_tokens, count_tokens_batch, split_by_tokens

from .types import Chunk

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
CARRY_TOKENS = 48  # lines before an overlong line that travel with its first piece (< overlap)


@dataclass(frozen=True)
class Part:
    """A packed range of lines (0-based, inclusive).

    ``display_start`` is where the shown text begins: before ``start`` when lines of the
    previous part are repeated as overlap. ``text`` replaces the line text when a single line
    was too long and had to be cut at token boundaries; ``lead`` is overlap taken from inside
    a long previous line (prose only), prepended to the text.
    """

    start: int
    end: int
    display_start: int
    text: str | None = None
    lead: str | None = None


class LineTable:
    """The lines of a document with token counts per line and O(1) range sums."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        # Counting "line\n" per line slightly over-counts versus the joined text (BPE can merge
        # across a newline) — a safe direction for a budget.
        counts = count_tokens_batch([line + "\n" for line in lines])
        self._prefix = [0, *accumulate(counts)]

    def __len__(self) -> int:
        return len(self.lines)

    def tokens(self, start: int, end: int) -> int:
        if end < start:
            return 0
        return self._prefix[end + 1] - self._prefix[start]

    def text(self, start: int, end: int) -> str:
        return "\n".join(self.lines[start : end + 1])

    def is_blank(self, index: int) -> bool:
        return not self.lines[index].strip()

    def last_nonblank(self, start: int, end: int) -> int | None:
        for index in range(end, start - 1, -1):
            if not self.is_blank(index):
                return index
        return None

    def first_nonblank(self, start: int, end: int) -> int | None:
        for index in range(start, end + 1):
            if not self.is_blank(index):
                return index
        return None


def pack(
    segments: list[tuple[int, int]],
    table: LineTable,
    budget: int,
    overlap: int,
    sentence_overlap: bool = False,
    cut_line: Callable[[str, int], list[str]] = split_by_tokens,
) -> list[Part]:
    """Pack consecutive ``segments`` into parts of at most ``budget`` tokens (overlap included).

    Parts are balanced (the total is spread evenly over the minimum number of parts) so the
    last part is not a runt. A segment larger than the room left for content is cut into
    single lines, and a single line that is still too large is cut by ``cut_line`` (at token
    boundaries by default).
    """
    if not segments:
        return []
    start, end = segments[0][0], segments[-1][1]
    total = table.tokens(start, end)
    if total <= budget:
        return [Part(start, end, start)]

    room = max(1, budget - overlap)
    items: list[tuple[int, int, int]] = []
    for seg_start, seg_end in segments:
        seg_tokens = table.tokens(seg_start, seg_end)
        if seg_tokens > room and seg_end > seg_start:
            items.extend((i, i, table.tokens(i, i)) for i in range(seg_start, seg_end + 1))
        else:
            items.append((seg_start, seg_end, seg_tokens))

    target = total / math.ceil(total / room)
    ranges: list[tuple[int, int, str | None]] = []
    cur_start: int | None = None
    cur_end = -1
    cur_tokens = 0

    def flush() -> None:
        nonlocal cur_start, cur_tokens
        if cur_start is not None:
            ranges.append((cur_start, cur_end, None))
        cur_start, cur_tokens = None, 0

    for item_start, item_end, item_tokens in items:
        if item_tokens > room:
            # One line too long for any part (minified code, a huge table row). A few short
            # lines before it (a heading) are carried into its first piece rather than
            # becoming a part of their own.
            carry: tuple[int, str] | None = None
            if cur_start is not None and cur_tokens <= CARRY_TOKENS:
                # Pieces get no overlap, so the budget's overlap share has room for the carry.
                carry = (cur_start, table.text(cur_start, cur_end))
                cur_start, cur_tokens = None, 0
            flush()
            for number, cut in enumerate(cut_line(table.lines[item_start], room)):
                if number == 0 and carry is not None:
                    ranges.append((carry[0], item_end, f"{carry[1]}\n{cut}"))
                else:
                    ranges.append((item_start, item_end, cut))
            continue
        if cur_start is not None:
            after = cur_tokens + item_tokens
            overshoot = after - target
            if after > room or (overshoot > 0 and overshoot > target - cur_tokens):
                flush()
        if cur_start is None:
            cur_start = item_start
        cur_end = item_end
        cur_tokens += item_tokens
    flush()

    parts: list[Part] = []
    for index, (part_start, part_end, piece) in enumerate(ranges):
        if piece is not None or index == 0 or ranges[index - 1][2] is not None:
            parts.append(Part(part_start, part_end, part_start, text=piece))
            continue
        prev_start, prev_end, _ = ranges[index - 1]
        display, lead = _overlap(table, prev_start, prev_end, overlap, sentence_overlap)
        parts.append(
            Part(part_start, part_end, display if display is not None else part_start, lead=lead)
        )
    return parts


def _overlap(
    table: LineTable, prev_start: int, prev_end: int, overlap: int, sentence_overlap: bool
) -> tuple[int | None, str | None]:
    """Where the next part's text should start to repeat about ``overlap`` tokens.

    Returns ``(display_start, lead)``: whole trailing lines of the previous part when they fit,
    otherwise (prose) the trailing sentences of its last line as ``lead``.
    """
    last = table.last_nonblank(prev_start, prev_end)
    if last is None or overlap <= 0:
        return None, None
    used = 0
    display: int | None = None
    # Never repeat the previous part's first line: each part must add new content.
    for index in range(last, prev_start, -1):
        cost = table.tokens(index, index)
        if used + cost > overlap:
            break
        used += cost
        display = index
    if display is not None:
        first = table.first_nonblank(display, prev_end)
        return first, None
    if not sentence_overlap:
        return None, None
    sentences = _SENTENCE_END.split(table.lines[last].strip())
    kept: list[str] = []
    used = 0
    for sentence in reversed(sentences[1:]):
        cost = count_tokens(sentence) + 1
        if used + cost > overlap:
            break
        kept.insert(0, sentence)
        used += cost
    return None, (" ".join(kept) if kept else None)


def unique_anchors(bases: list[str]) -> list[str]:
    """Make anchors unique in document order: ``a``, ``a#2``, ``a#3``...

    Numbering follows document order, so the same content in the same place gets the same
    anchor on every run.
    """
    taken: set[str] = set()
    out: list[str] = []
    for base in bases:
        anchor = base
        number = 1
        while anchor in taken:
            number += 1
            anchor = f"{base}#{number}"
        taken.add(anchor)
        out.append(anchor)
    return out


def split_sentences(text: str, max_tokens: int) -> list[str]:
    """Cut a long line of prose into pieces of whole sentences, each within ``max_tokens``.

    A single sentence over the limit is cut at token boundaries as a last resort.
    """
    pieces: list[str] = []
    current: list[str] = []
    used = 0
    for sentence in _SENTENCE_END.split(text):
        cost = count_tokens(sentence) + 1
        if cost > max_tokens:
            if current:
                pieces.append(" ".join(current))
                current, used = [], 0
            pieces.extend(piece.strip() for piece in split_by_tokens(sentence, max_tokens))
            continue
        if current and used + cost > max_tokens:
            pieces.append(" ".join(current))
            current, used = [], 0
        current.append(sentence)
        used += cost
    if current:
        pieces.append(" ".join(current))
    return [piece for piece in pieces if piece]


Draft = tuple[str, str, tuple[str, ...], str | None, str, int, int]


def build_chunks(drafts: list[Draft], *, language: str, namespace: str,
                 chunker_version: str) -> list[Chunk]:
    """(anchor base, title, heading path, symbol, text, start, end) drafts → Chunks with
    unique anchors and token counts — one constructor for the code and prose chunkers."""
    anchors = unique_anchors([draft[0] for draft in drafts])
    return [
        Chunk(anchor=anchor, title=title, heading_path=tuple(heading_path), symbol=symbol,
              text=text, start_line=start_line, end_line=end_line,
              token_count=count_tokens(text), language=language, namespace=namespace,
              chunker_version=chunker_version)
        for anchor, (_, title, heading_path, symbol, text, start_line, end_line)
        in zip(anchors, drafts, strict=True)
    ]
