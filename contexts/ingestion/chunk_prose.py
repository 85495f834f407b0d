"""Stage 2b: split Markdown along its heading hierarchy, and plain text along paragraphs.

Headings come from markdown-it-py's block tokens, so a ``# comment`` inside a fenced code block
is never mistaken for a heading and setext headings (``Title`` over ``===``) are recognised.
Each section becomes a unit; small sections are merged with the sibling and child sections
that follow them under the same parent, and a section over the budget is cut at block
boundaries (paragraphs, list items, whole fenced blocks — a fenced block itself is only cut,
at line boundaries, when it alone is over the limit) with about ``OVERLAP_TOKENS`` of overlap.

Chunk text starts with a breadcrumb line (``Title > Section > Subsection``) so it reads on its
own when retrieved out of context.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from contexts.kernel.tokens import count_tokens

from .packing import Draft, LineTable, build_chunks, pack, split_sentences
from .types import Chunk, NormalizedDocument

MAX_TOKENS = 700  # a section up to this size (breadcrumb included) stays whole
SPLIT_TOKENS = 400  # parts of a cut section are packed to this size
TARGET_TOKENS = 320
MIN_TOKENS = 80
MERGE_LIMIT = 480
OVERLAP_TOKENS = 64
HEADER_RESERVE = 48  # typical breadcrumb size
PREAMBLE_ANCHOR = "preamble"
TEXT_ANCHOR = "body"

_CONTAINER_BLOCKS = frozenset({"bullet_list_open", "ordered_list_open", "blockquote_open"})
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass
class _Unit:
    path: tuple[str, ...]
    start: int  # 0-based, inclusive
    end: int
    display_start: int
    mergeable: bool = True
    text: str | None = None
    lead: str | None = None


@dataclass
class _Block:
    start: int
    end: int
    token_index: int


def _markdown() -> MarkdownIt:
    # CommonMark plus GFM tables; "gfm-like" would also need linkify-it-py.
    return MarkdownIt("commonmark").enable("table")


def slugify(text: str) -> str:
    """GitHub-style heading slug: lowercase words joined by hyphens, punctuation dropped."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s-]", "", text)
    text = re.sub(r"[\s_-]+", "-", text).strip("-")
    return text or "section"


def _heading_text(inline: Token | None) -> str:
    if inline is None:
        return ""
    if inline.children:
        parts = [
            child.content
            for child in inline.children
            if child.type in ("text", "code_inline", "html_inline")
        ]
        text = "".join(parts)
    else:
        text = inline.content
    return " ".join(text.split())


class _ProseChunker:
    def __init__(self, doc: NormalizedDocument) -> None:
        self.doc = doc
        self.table = LineTable(doc.text.rstrip("\n").split("\n"))
        # For decisions taken before the breadcrumb is known (opening a long list).
        self.split_budget = SPLIT_TOKENS - HEADER_RESERVE
        self._openers = self._fence_openers()

    # --- sections --------------------------------------------------------------------------

    def markdown_units(self) -> list[_Unit]:
        tokens = _markdown().parse(self.doc.text)
        blocks = [
            _Block(token.map[0], token.map[1] - 1, index)
            for index, token in enumerate(tokens)
            if token.level == 0 and token.map is not None and token.nesting != -1
        ]
        sections: list[tuple[tuple[str, ...], int, list[_Block]]] = []
        stack: list[tuple[int, str]] = []
        current: list[_Block] = []
        current_path: tuple[str, ...] = ()
        current_start = 0
        for block in blocks:
            token = tokens[block.token_index]
            if token.type == "heading_open":
                if current:
                    sections.append((current_path, current_start, current))
                level = int(token.tag[1:])
                while stack and stack[-1][0] >= level:
                    stack.pop()
                title = _heading_text(tokens[block.token_index + 1])
                stack.append((level, title or f"h{level}"))
                current_path = tuple(name for _, name in stack)
                current_start = block.start if sections or current else 0
                current = []
            current.append(block)
        if current:
            sections.append((current_path, current_start, current))

        units: list[_Unit] = []
        last_line = len(self.table) - 1
        for index, (path, start, section_blocks) in enumerate(sections):
            end = sections[index + 1][1] - 1 if index + 1 < len(sections) else last_line
            segments = self._segments(tokens, section_blocks, start, end)
            units.extend(self._section_units(path, segments))
        return units

    def _segments(
        self, tokens: list[Token], blocks: list[_Block], start: int, end: int
    ) -> list[tuple[int, int]]:
        """Contiguous line ranges covering ``start..end``, one per top-level block.

        Lines no token claims (blank lines, link reference definitions) travel with the next
        block; an oversized list or blockquote is opened into its items.
        """
        segments: list[tuple[int, int]] = []
        cursor = start
        for block in blocks:
            block_end = min(block.end, end)
            if block_end < cursor:
                continue
            token = tokens[block.token_index]
            if (
                token.type in _CONTAINER_BLOCKS
                and self.table.tokens(cursor, block_end) > self.split_budget - OVERLAP_TOKENS
            ):
                segments.extend(self._children(tokens, block, cursor, block_end))
            else:
                segments.append((cursor, block_end))
            cursor = block_end + 1
        if cursor <= end:
            if segments:
                segments[-1] = (segments[-1][0], end)
            else:
                segments.append((cursor, end))
        return segments

    def _children(
        self, tokens: list[Token], block: _Block, start: int, end: int
    ) -> list[tuple[int, int]]:
        level = tokens[block.token_index].level + 1
        boundaries: list[int] = []
        for token in tokens[block.token_index + 1 :]:
            if token.level < level:
                break
            if token.level == level and token.map is not None and token.nesting != -1:
                if start < token.map[0] <= end:
                    boundaries.append(token.map[0])
        edges = [start, *sorted(set(boundaries)), end + 1]
        return [(a, b - 1) for a, b in zip(edges, edges[1:], strict=False) if a <= b - 1]

    def _section_units(self, path: tuple[str, ...], segments: list[tuple[int, int]]) -> list[_Unit]:
        if not segments:
            return []
        start, end = segments[0][0], segments[-1][1]
        first = self.table.first_nonblank(start, end)
        if first is None:
            return []
        # Budgets leave room for this section's own breadcrumb line, however deep it is.
        crumb = count_tokens(f"{self._breadcrumb(path)}\n\n")
        if self.table.tokens(start, end) <= MAX_TOKENS - crumb:
            last = self.table.last_nonblank(start, end)
            assert last is not None
            return [_Unit(path, first, last, first)]
        return self._split(path, segments)

    def _split(self, path: tuple[str, ...], segments: list[tuple[int, int]]) -> list[_Unit]:
        crumb = count_tokens(f"{self._breadcrumb(path)}\n\n")
        parts = pack(
            segments,
            self.table,
            max(SPLIT_TOKENS - crumb, 2 * OVERLAP_TOKENS),
            OVERLAP_TOKENS,
            sentence_overlap=True,
            cut_line=split_sentences,
        )
        units: list[_Unit] = []
        for part in parts:
            first = self.table.first_nonblank(part.start, part.end)
            last = self.table.last_nonblank(part.start, part.end)
            if first is None or last is None:
                continue
            if part.text is not None:
                display = part.start
            elif part.lead is not None:
                # The lead repeats the end of the previous line with text: cite from there.
                display = self.table.last_nonblank(0, part.start - 1) or first
            else:
                display = self.table.first_nonblank(part.display_start, last) or first
            units.append(_Unit(path, first, last, display, False, text=part.text, lead=part.lead))
        return units

    def text_units(self) -> list[_Unit]:
        """Plain text: one segment per paragraph, the whole file treated as one section."""
        segments: list[tuple[int, int]] = []
        start: int | None = None
        for index in range(len(self.table)):
            blank = self.table.is_blank(index)
            if start is None:
                start = index
            elif not blank and self.table.is_blank(index - 1):
                segments.append((start, index - 1))
                start = index
        if start is not None:
            segments.append((start, len(self.table) - 1))
        if not segments:
            return []
        # Paragraphs of running text are interchangeable units: always pack to the split size.
        whole = self.table.tokens(segments[0][0], segments[-1][1])
        if whole <= self.split_budget:
            return self._section_units((), segments)
        return self._split((), segments)

    def _fence_openers(self) -> list[str | None]:
        """For each line inside a fenced code block, that block's opening line."""
        openers: list[str | None] = []
        opener: str | None = None
        marker = ""
        for line in self.table.lines:
            stripped = line.strip()
            if opener is None:
                match = _FENCE_OPEN.match(line)
                openers.append(None)
                if match:
                    opener, marker = line, match.group(1)
                continue
            openers.append(opener)
            if stripped.startswith(marker) and not stripped.strip(marker[0]):
                opener = None
        return openers

    def _fenced_text(self, start: int, end: int) -> str:
        """Lines ``start..end``, re-opening / re-closing a fenced block cut by a part boundary.

        Without this a part taken from the middle of a long code block would be read (and
        rendered) as prose, and the part before it would leave its fence open.
        """
        text = self.table.text(start, end)
        openers = self._openers
        opener = openers[start]
        if opener is not None:
            text = f"{opener}\n{text}"
        after = end + 1
        if openers[end] is not None and after < len(openers) and openers[after] is not None:
            match = _FENCE_OPEN.match(openers[end] or "")
            text = f"{text}\n{match.group(1) if match else '```'}"
        return text

    # --- chunks ----------------------------------------------------------------------------

    def _merge(self, units: list[_Unit]) -> list[list[_Unit]]:
        groups: list[list[_Unit]] = []
        group_tokens = 0
        for unit in units:
            tokens = self.table.tokens(unit.start, unit.end)
            if groups and self._can_merge(groups[-1], group_tokens, unit, tokens):
                groups[-1].append(unit)
                group_tokens += tokens
            else:
                groups.append([unit])
                group_tokens = tokens
        return groups

    @staticmethod
    def _can_merge(group: list[_Unit], group_tokens: int, unit: _Unit, tokens: int) -> bool:
        if not (group[-1].mergeable and unit.mergeable):
            return False
        # Only sections under the parent of the group's first section: its later siblings and
        # their children, never an uncle (which would start a different topic).
        parent = group[0].path[:-1]
        if unit.path[: len(parent)] != parent:
            return False
        combined = group_tokens + tokens
        if combined > MERGE_LIMIT:
            return False
        if tokens < MIN_TOKENS or group_tokens < MIN_TOKENS:
            return True
        # Merge only when the result is closer to the target than the group is now.
        return combined - TARGET_TOKENS < TARGET_TOKENS - group_tokens

    def _breadcrumb(self, path: tuple[str, ...]) -> str:
        title = self.doc.title or ""
        crumbs = path if (path and path[0] == title) or not title else (title, *path)
        return " > ".join((*self.doc.heading_prefix, *crumbs))

    def chunks(self, units: list[_Unit], chunker_version: str, plain: bool) -> list[Chunk]:
        drafts: list[Draft] = []
        for group in self._merge(units):
            first, last = group[0], group[-1]
            if first.text is not None:
                body = first.text
            elif first.lead is not None:
                body = f"{first.lead}\n{self._fenced_text(first.start, last.end)}"
            else:
                body = self._fenced_text(first.display_start, last.end)
            path = first.path
            if plain:
                base = TEXT_ANCHOR
            else:
                base = "/".join(slugify(name) for name in path) if path else PREAMBLE_ANCHOR
            title = path[-1] if path else (self.doc.title or self.doc.path)
            text = f"{self._breadcrumb(path)}\n\n{body.strip()}"
            # The document's place (heading_prefix) is not in the anchor: a page that moves
            # keeps its fragments.
            drafts.append((base, title, (*self.doc.heading_prefix, *path), None, text,
                           first.display_start + 1, last.end + 1))
        return build_chunks(drafts, language=self.doc.language, namespace="prose",
                            chunker_version=chunker_version)


def chunk_markdown(doc: NormalizedDocument, *, chunker_version: str) -> list[Chunk]:
    if not doc.text.strip():
        return []
    chunker = _ProseChunker(doc)
    return chunker.chunks(chunker.markdown_units(), chunker_version, plain=False)


def chunk_text(doc: NormalizedDocument, *, chunker_version: str) -> list[Chunk]:
    if not doc.text.strip():
        return []
    chunker = _ProseChunker(doc)
    return chunker.chunks(chunker.text_units(), chunker_version, plain=True)
