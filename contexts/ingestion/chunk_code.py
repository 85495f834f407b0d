"""Stage 2a: split source code along its syntax tree (tree-sitter).

The file is first cut into *units*, each a line range with the qualified symbol it defines:
every top-level function, class, impl or statement, with the comments, doc comments,
decorators and attributes directly above it. A unit over the budget is opened up: a class-like
node into a head (signature, docstring) plus one unit per member named ``Class.member``; any
other node into parts cut at its inner statement boundaries with about ``OVERLAP_TOKENS`` of
overlap. Finally small neighbouring units with the same parent are merged, so a chunk is
neither a lone import line nor a thousand-line class.

Each chunk's text starts with a one-line header in the language's comment syntax naming the
file and the symbols in it, so a chunk retrieved on its own still says where it comes from.
"""

from __future__ import annotations

import importlib
import logging
import posixpath
import threading
from dataclasses import dataclass
from typing import Any

from tree_sitter import Language, Node, Parser

from contexts.kernel.tokens import count_tokens

from .packing import Draft, LineTable, build_chunks, pack
from .types import Chunk, NormalizedDocument

logger = logging.getLogger(__name__)

MAX_TOKENS = 700  # ceiling for a whole chunk, header included
TARGET_TOKENS = 320  # merging aims for chunks of about this size
MIN_TOKENS = 80  # a unit or group this small is merged with a neighbour whenever possible
MERGE_LIMIT = 440  # merging never builds a chunk larger than this; only whole nodes exceed it
# A class-like node larger than this is opened into its members (which are then merged back
# into MERGE_LIMIT-sized groups); a function is kept whole up to the budget, then cut.
CLASS_SPLIT_TOKENS = 480
OVERLAP_TOKENS = 64
SYMBOL_RESERVE = 24  # header tokens kept free for symbol names and "(part i/n)"
MAX_HEADER_SYMBOLS = 6  # merged chunks list their definitions; beyond this, "+N more"


@dataclass(frozen=True)
class _Grammar:
    module: str
    factory: str
    comment: str
    # Node types attached to the node that follows them (doc comments, attributes, decorators).
    attached: frozenset[str]
    # Node types that define a symbol through their ``name`` field.
    named: frozenset[str]
    # Class-like node types opened up member by member when too large (members under "body").
    containers: frozenset[str]


_COMMON_JS_NAMED = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "class",
        "method_definition",
    }
)
_TS_NAMED = _COMMON_JS_NAMED | {
    "abstract_class_declaration",
    "interface_declaration",
    "type_alias_declaration",
    "enum_declaration",
    "internal_module",
    "module",
    "function_signature",
    "method_signature",
    "abstract_method_signature",
}
_TS_CONTAINERS = frozenset(
    {
        "class_declaration",
        "class",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "internal_module",
        "module",
    }
)

GRAMMARS: dict[str, _Grammar] = {
    "python": _Grammar(
        "tree_sitter_python",
        "language",
        "#",
        frozenset({"comment"}),
        frozenset({"function_definition", "class_definition"}),
        frozenset({"class_definition"}),
    ),
    "javascript": _Grammar(
        "tree_sitter_javascript",
        "language",
        "//",
        frozenset({"comment", "decorator"}),
        _COMMON_JS_NAMED,
        frozenset({"class_declaration", "class"}),
    ),
    "typescript": _Grammar(
        "tree_sitter_typescript",
        "language_typescript",
        "//",
        frozenset({"comment", "decorator"}),
        _TS_NAMED,
        _TS_CONTAINERS,
    ),
    "tsx": _Grammar(
        "tree_sitter_typescript",
        "language_tsx",
        "//",
        frozenset({"comment", "decorator"}),
        _TS_NAMED,
        _TS_CONTAINERS,
    ),
    "go": _Grammar(
        "tree_sitter_go",
        "language",
        "//",
        frozenset({"comment"}),
        frozenset({"function_declaration", "method_declaration"}),
        frozenset(),
    ),
    "java": _Grammar(
        "tree_sitter_java",
        "language",
        "//",
        frozenset({"line_comment", "block_comment"}),
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
                "compact_constructor_declaration",
            }
        ),
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
            }
        ),
    ),
    "rust": _Grammar(
        "tree_sitter_rust",
        "language",
        "//",
        frozenset({"line_comment", "block_comment", "attribute_item"}),
        frozenset(
            {
                "function_item",
                "function_signature_item",
                "struct_item",
                "enum_item",
                "union_item",
                "trait_item",
                "mod_item",
                "macro_definition",
                "type_item",
                "const_item",
                "static_item",
            }
        ),
        frozenset({"impl_item", "trait_item", "mod_item"}),
    ),
}

# Bodies whose children are themselves member lists (Java enum constants + declarations).
_FLATTENED_MEMBERS = frozenset({"enum_body_declarations"})
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)

_languages: dict[str, Language] = {}
_languages_lock = threading.Lock()


def grammar_key(language: str, path: str) -> str:
    if language == "typescript" and path.lower().endswith(".tsx"):
        return "tsx"
    return language


def _language(key: str) -> Language:
    with _languages_lock:
        if key not in _languages:
            grammar = GRAMMARS[key]
            module: Any = importlib.import_module(grammar.module)
            _languages[key] = Language(getattr(module, grammar.factory)())
        return _languages[key]


def _end_row(node: Node) -> int:
    # Line comments in some grammars (Rust) include their newline and so "end" at column 0 of
    # the next line; that line does not belong to the node.
    row = node.end_point.row
    if node.end_point.column == 0 and row > node.start_point.row:
        return row - 1
    return row


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


@dataclass
class _Unit:
    start: int  # first line of own content (0-based)
    end: int  # last line (inclusive)
    symbol: str | None
    parent: str | None  # units merge only with neighbours of the same parent
    mergeable: bool = True
    display_start: int | None = None  # earlier when overlap lines are repeated
    part: tuple[int, int] | None = None  # (index, count) for a node cut into parts
    text: str | None = None  # a cut piece of an overlong single line


class _CodeChunker:
    def __init__(self, doc: NormalizedDocument, grammar: _Grammar | None) -> None:
        self.doc = doc
        self.grammar = grammar
        self.table = LineTable(doc.text.rstrip("\n").split("\n"))
        # The header names the path and up to a few symbols; long paths get a smaller body.
        path_tokens = count_tokens(f"{grammar.comment if grammar else '#'} {doc.path} · ")
        self.budget = MAX_TOKENS - path_tokens - SYMBOL_RESERVE
        self.segment_budget = self.budget - OVERLAP_TOKENS

    # --- symbols -------------------------------------------------------------------------

    def _unwrap(self, node: Node) -> Node:
        """The declaration inside ``export …`` / ``@decorator …`` / ``declare …`` wrappers."""
        for _ in range(3):
            if node.type == "export_statement":
                inner = node.child_by_field_name("declaration")
            elif node.type == "decorated_definition":
                inner = node.child_by_field_name("definition")
            elif node.type == "ambient_declaration":
                inner = node.named_children[0] if node.named_children else None
            else:
                return node
            if inner is None:
                return node
            node = inner
        return node

    def _name(self, node: Node) -> str | None:
        assert self.grammar is not None
        node = self._unwrap(node)
        kind = node.type
        if kind == "method_declaration" and self.grammar.module == "tree_sitter_go":
            receiver = self._go_receiver(node)
            name = _text(node.child_by_field_name("name"))
            return f"{receiver}.{name}" if receiver else name
        if kind == "type_declaration":
            for spec in node.named_children:
                if spec.type in ("type_spec", "type_alias"):
                    return _text(spec.child_by_field_name("name")) or None
            return None
        if kind == "impl_item":
            return self._rust_impl_type(node)
        if kind in ("lexical_declaration", "variable_declaration"):
            for declarator in node.named_children:
                value = declarator.child_by_field_name("value")
                if value is not None and value.type in _FUNCTION_VALUES:
                    return _text(declarator.child_by_field_name("name")) or None
            return None
        if kind == "expression_statement" and self.grammar.comment == "//":
            # ``exports.parse = function () {…}`` / ``jQuery.fn.extend = …`` name a function.
            expression = node.named_children[0] if node.named_children else None
            if expression is not None and expression.type == "assignment_expression":
                right = expression.child_by_field_name("right")
                left = _text(expression.child_by_field_name("left"))
                if right is not None and right.type in _FUNCTION_VALUES and len(left) <= 80:
                    return left.removeprefix("this.") or None
            return None
        if kind in ("public_field_definition", "field_definition"):
            value = node.child_by_field_name("value")
            if value is not None and value.type in _FUNCTION_VALUES:
                field = node.child_by_field_name("name") or node.child_by_field_name("property")
                return _text(field) or None
            return None
        if kind in self.grammar.named:
            name = _text(node.child_by_field_name("name")).strip("'\"")
            return name or None
        return None

    @staticmethod
    def _go_receiver(node: Node) -> str:
        receiver = node.child_by_field_name("receiver")
        stack = [receiver] if receiver is not None else []
        while stack:
            current = stack.pop(0)
            if current.type == "type_identifier":
                return _text(current)
            stack.extend(current.named_children)
        return ""

    @staticmethod
    def _rust_impl_type(node: Node) -> str | None:
        type_node = node.child_by_field_name("type")
        if type_node is None:
            return None
        # ``impl<T> Display for Wrapper<T>`` is about ``Wrapper``.
        if type_node.type == "type_identifier":
            return _text(type_node)
        stack = [type_node]
        while stack:
            current = stack.pop(0)
            if current.type == "type_identifier":
                return _text(current)
            stack.extend(current.named_children)
        return _text(type_node).split("<", 1)[0].strip() or None

    def _members(self, node: Node) -> list[Node] | None:
        assert self.grammar is not None
        inner = self._unwrap(node)
        if inner.type not in self.grammar.containers:
            return None
        body = inner.child_by_field_name("body")
        if body is None:
            return None
        members: list[Node] = []
        for child in body.named_children:
            if child.type in _FLATTENED_MEMBERS:
                members.extend(child.named_children)
            else:
                members.append(child)
        return members or None

    def _wrapped_definitions(self, node: Node) -> list[Node] | None:
        """Members of a wrapper that is not a class but holds definitions.

        Whole libraries are often wrapped in one expression (a JavaScript IIFE or UMD factory),
        and Python modules put definitions under ``if``/``try``. Following the child that holds
        most of the node down to a statement list with at least two named definitions lets
        those definitions be chunked one by one instead of as anonymous slabs of lines.
        """
        size = node.end_byte - node.start_byte
        current = node
        for _ in range(16):
            kids = current.named_children
            if current is not node and sum(1 for kid in kids if self._name(kid)) >= 2:
                return kids
            biggest = max(kids, key=lambda kid: kid.end_byte - kid.start_byte, default=None)
            if biggest is None or (biggest.end_byte - biggest.start_byte) * 10 < size * 6:
                return None
            current = biggest
        return None

    # --- units ---------------------------------------------------------------------------

    def _qualify(self, parent: str | None, name: str | None) -> str | None:
        if name and parent:
            return f"{parent}.{name}"
        return name

    def _sequence(self, nodes: list[Node], parent: str | None) -> list[_Unit]:
        """Units for sibling nodes, attaching comment runs to the node right below them."""
        assert self.grammar is not None
        units: list[_Unit] = []
        pending_start: int | None = None
        pending_end = -1
        for node in nodes:
            start, end = node.start_point.row, _end_row(node)
            if node.type in self.grammar.attached:
                if pending_start is not None and start > pending_end + 1:
                    # A blank line separates this comment run from what follows: standalone.
                    units.append(_Unit(pending_start, pending_end, None, parent))
                    pending_start = None
                if pending_start is None:
                    pending_start = start
                pending_end = max(pending_end, end)
                continue
            if pending_start is not None:
                if start <= pending_end + 1:
                    start = pending_start
                else:
                    units.append(_Unit(pending_start, pending_end, None, parent))
                pending_start = None
            units.extend(self._node_units(node, start, end, parent))
        if pending_start is not None:
            units.append(_Unit(pending_start, pending_end, None, parent))
        return units

    def _node_units(self, node: Node, start: int, end: int, parent: str | None) -> list[_Unit]:
        symbol = self._qualify(parent, self._name(node))
        tokens = self.table.tokens(start, end)
        members = self._members(node) if tokens > CLASS_SPLIT_TOKENS else None
        if tokens <= self.budget and not members:
            return [_Unit(start, end, symbol, parent)]
        if members is None and tokens > self.budget:
            members = self._wrapped_definitions(node)
        if members:
            owner = symbol or parent
            first = members[0].start_point.row
            units = self._sequence(members, owner)
            if first > start:
                units.insert(0, _Unit(start, first - 1, symbol, owner))
            elif units:
                units[0].start = min(units[0].start, start)
            if units:
                # Closing braces after the last member belong to it.
                units[-1].end = max(units[-1].end, end)
                return units
        return self._split(node, start, end, symbol, parent)

    def _split(
        self, node: Node | None, start: int, end: int, symbol: str | None, parent: str | None
    ) -> list[_Unit]:
        segments = self._segments(node, start, end) if node is not None else self._lines(start, end)
        parts = pack(segments, self.table, self.budget, OVERLAP_TOKENS)
        count = len(parts)
        return [
            _Unit(
                part.start,
                part.end,
                symbol,
                parent,
                mergeable=False,
                display_start=part.display_start,
                part=(index + 1, count) if count > 1 else None,
                text=part.text,
            )
            for index, part in enumerate(parts)
        ]

    def _lines(self, start: int, end: int) -> list[tuple[int, int]]:
        return [(index, index) for index in range(start, end + 1)]

    def _segments(self, node: Node, start: int, end: int) -> list[tuple[int, int]]:
        """Cut ``start..end`` at the boundaries of the deepest children needed to fit."""
        if start > end:
            return []
        if start == end or self.table.tokens(start, end) <= self.segment_budget:
            return [(start, end)]
        kids = [c for c in node.children if _end_row(c) >= start and c.start_point.row <= end]
        if not kids:
            return self._lines(start, end)
        if len(kids) == 1:
            return self._segments(kids[0], start, end)
        segments: list[tuple[int, int]] = []
        cursor = start
        for kid in kids:
            kid_end = min(_end_row(kid), end)
            if kid_end < cursor:
                continue
            # Lines between siblings (blank lines) travel with the next sibling.
            segments.extend(self._segments(kid, cursor, kid_end))
            cursor = kid_end + 1
            if cursor > end:
                break
        segments.extend(self._lines(cursor, end))
        return segments

    def _fallback_units(self) -> list[_Unit]:
        """Blank-line separated blocks, for files the grammar cannot handle."""
        units: list[_Unit] = []
        block_start: int | None = None
        for index in range(len(self.table) + 1):
            blank = index == len(self.table) or self.table.is_blank(index)
            if not blank and block_start is None:
                block_start = index
            elif blank and block_start is not None:
                if self.table.tokens(block_start, index - 1) <= self.budget:
                    units.append(_Unit(block_start, index - 1, None, None))
                else:
                    units.extend(self._split(None, block_start, index - 1, None, None))
                block_start = None
        return units

    def units(self) -> list[_Unit]:
        if self.grammar is not None:
            try:
                parser = Parser(_language(grammar_key(self.doc.language, self.doc.path)))
                tree = parser.parse(self.doc.text.encode("utf-8"))
                units = self._sequence(list(tree.root_node.children), None)
            except Exception:  # noqa: BLE001 - a grammar problem must not stop ingestion
                logger.warning(
                    "tree-sitter failed on %s; using line chunks", self.doc.path, exc_info=True
                )
                units = self._fallback_units()
        else:
            units = self._fallback_units()
        return self._tidy(self._fit(units))

    def _fit(self, units: list[_Unit]) -> list[_Unit]:
        # Comment runs (a licence header) and class heads (a long docstring) can exceed the
        # budget without being splittable nodes themselves: cut those at line boundaries.
        out: list[_Unit] = []
        for unit in units:
            if unit.part is None and self.table.tokens(unit.start, unit.end) > self.budget:
                out.extend(self._split(None, unit.start, unit.end, unit.symbol, unit.parent))
            else:
                out.append(unit)
        return out

    def _tidy(self, units: list[_Unit]) -> list[_Unit]:
        """Make unit ranges ordered, disjoint and covering every non-blank line."""
        out: list[_Unit] = []
        for unit in units:
            if out and out[-1].text is None and unit.text is None:
                previous = out[-1]
                if unit.start <= previous.end:
                    # Two nodes share a line (``a = 1; b = 2``): the line stays with the first.
                    if unit.end <= previous.end:
                        continue
                    if unit.part is None:
                        unit.start = previous.end + 1
                    else:
                        unit.start = max(unit.start, previous.end + 1)
                gap_end = self.table.last_nonblank(previous.end + 1, unit.start - 1)
                if gap_end is not None and previous.part is None and previous.text is None:
                    previous.end = gap_end
                elif gap_end is not None:
                    unit.start = self.table.first_nonblank(previous.end + 1, unit.start - 1) or 0
            out.append(unit)
        if out and out[-1].text is None:
            tail = self.table.last_nonblank(out[-1].end + 1, len(self.table) - 1)
            if tail is not None:
                out[-1].end = tail
        for unit in out:
            first = self.table.first_nonblank(unit.start, unit.end)
            if first is not None and unit.text is None:
                unit.start = first
            if unit.display_start is None or unit.display_start > unit.start:
                unit.display_start = unit.start
        return out

    # --- chunks --------------------------------------------------------------------------

    def _merge(self, units: list[_Unit]) -> list[list[_Unit]]:
        groups: list[list[_Unit]] = []
        group_tokens = 0
        for index, unit in enumerate(units):
            # Repeated overlap lines are part of the chunk text, so they count too.
            start = unit.start if unit.display_start is None else unit.display_start
            tokens = self.table.tokens(start, unit.end)
            following = units[index + 1] if index + 1 < len(units) else None
            if groups and self._can_merge(groups[-1], group_tokens, unit, tokens, following):
                groups[-1].append(unit)
                group_tokens += tokens
            else:
                groups.append([unit])
                group_tokens = tokens
        return groups

    def _can_merge(
        self,
        group: list[_Unit],
        group_tokens: int,
        unit: _Unit,
        tokens: int,
        following: _Unit | None,
    ) -> bool:
        last = group[-1]
        combined = group_tokens + tokens
        if not (last.mergeable and unit.mergeable):
            # Parts of a cut node are already near the budget and never merge with each other;
            # they only take in a runt neighbour (an import line, a one-line function) that
            # would be a useless chunk on its own.
            if last.text is not None or unit.text is not None or last.parent != unit.parent:
                return False
            if combined > self.budget:
                return False
            if unit.mergeable:
                return tokens < MIN_TOKENS
            return all(member.mergeable for member in group) and group_tokens < MIN_TOKENS
        if last.parent != unit.parent:
            # Units only merge with siblings, except that a runt of top-level statements
            # (package and import lines) may lead into the head of the class that follows.
            entering = last.parent is None or (unit.parent or "").startswith(f"{last.parent}.")
            if not (entering and unit.parent is not None and group_tokens < MIN_TOKENS):
                return False
        if tokens < MIN_TOKENS or group_tokens < MIN_TOKENS:
            if combined <= MERGE_LIMIT:
                return True
            # A runt would be a poor chunk on its own, so it may overshoot the limit a little
            # to join the group before it, but only when no sibling follows that it could lead.
            if tokens < MIN_TOKENS and following is not None and following.mergeable:
                if following.parent == unit.parent:
                    return False
            return combined <= MERGE_LIMIT + MIN_TOKENS
        if combined > MERGE_LIMIT:
            return False
        # Merge only when the result is closer to the target than the group is now: this keeps
        # the median near TARGET_TOKENS instead of piling every chunk up to MERGE_LIMIT.
        return combined - TARGET_TOKENS < TARGET_TOKENS - group_tokens

    def chunks(self, chunker_version: str) -> list[Chunk]:
        assert self.doc.text.strip(), "empty documents have no chunks"
        comment = self.grammar.comment if self.grammar else "#"
        groups = self._merge(self.units())
        drafts: list[Draft] = []
        for group in groups:
            symbols: list[str] = []
            for unit in group:
                if unit.symbol and unit.symbol not in symbols:
                    symbols.append(unit.symbol)
            if not symbols and group[0].parent:
                symbols.append(group[0].parent)
            label = ", ".join(symbols[:MAX_HEADER_SYMBOLS])
            if len(symbols) > MAX_HEADER_SYMBOLS:
                label += f" +{len(symbols) - MAX_HEADER_SYMBOLS} more"
            part = next((unit.part for unit in group if unit.part is not None), None)
            if part is not None:
                label = f"{label} (part {part[0]}/{part[1]})".strip()
            header = f"{comment} {self.doc.path}" + (f" · {label}" if label else "")
            first, last = group[0], group[-1]
            display_start = first.display_start if first.display_start is not None else first.start
            if first.text is not None:
                body = first.text
            else:
                body = self.table.text(display_start, last.end)
            symbol = symbols[0] if symbols else None
            drafts.append(
                (
                    symbol or "module",
                    label or posixpath.basename(self.doc.path),
                    tuple(symbol.split(".")) if symbol else (),
                    symbol,
                    f"{header}\n{body}",
                    display_start + 1,
                    last.end + 1,
                )
            )
        return build_chunks(drafts, language=self.doc.language, namespace="code",
                            chunker_version=chunker_version)


def chunk_code(doc: NormalizedDocument, *, chunker_version: str) -> list[Chunk]:
    """Chunks of a source file; falls back to blank-line blocks if the grammar fails."""
    if not doc.text.strip():
        return []
    grammar = GRAMMARS.get(grammar_key(doc.language, doc.path))
    return _CodeChunker(doc, grammar).chunks(chunker_version)


def definitions(doc: NormalizedDocument) -> dict[str, str]:
    """Every named definition of a source file at any depth — ``refill_bucket``,
    ``TokenBucket.refill`` — as qualified name → the definition's own text (decorators and
    all, without the comments above it). What a fragment citing a symbol rests on
    (``contexts.governance.evidence``): one definition, however the chunker grouped it with
    its neighbours, so a change to another function of the same file changes nothing here.
    Empty for a language without a grammar, or when the grammar fails on the text."""
    key = grammar_key(doc.language, doc.path)
    grammar = GRAMMARS.get(key)
    if grammar is None or not doc.text.strip():
        return {}
    # Only the naming half of the chunker (no line table: nothing is sized here).
    namer = object.__new__(_CodeChunker)
    namer.doc, namer.grammar = doc, grammar
    try:
        root = Parser(_language(key)).parse(doc.text.encode("utf-8")).root_node
    except Exception:  # noqa: BLE001 - a grammar problem means no definitions, not an error
        logger.warning("tree-sitter failed on %s", doc.path, exc_info=True)
        return {}
    found: dict[str, str] = {}
    stack: list[tuple[Node, str | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        for child in reversed(node.named_children):
            name = None if child.type in grammar.attached else namer._name(child)
            if name:
                qualified = f"{parent}.{name}" if parent else name
                # A wrapper's text (decorators, ``export``) is the definition's; its members
                # are the wrapped declaration's children.
                found.setdefault(qualified, _text(child))
                stack.append((namer._unwrap(child), qualified))
            else:
                stack.append((child, parent))
    return found
