"""Relevance labels that survive re-chunking: ``path#anchor`` instead of fragment ids.

A golden set over a live source tree cannot name fragments — every chunker change would break
it. Its qrels name a source path and, optionally, an anchor:

* ``docs/data-model.md#data-model/scopes`` — a Markdown section (the chunker's heading-slug
  path: the slugs of the enclosing headings joined by ``/``);
* ``accounts/scopes.py#readable_scopes``, ``contexts/search/_backend.py#LexicalIndex.search``
  — a Python definition (dotted for methods);
* ``docs/adr/0002-one-scope-table-and-one-visibility-function.md`` — a whole file, and
  ``docs/adr/`` — every file under a directory (a label without an anchor matches by prefix).

A retrieved fragment matches a label when one of its source pointers is in that path and

1. its anchor is the label's anchor, a continuation part of it (``retrieve#2``) or, for a
   definition, a member of it (``Index.search`` is part of ``Index``), or
2. its line range covers the line where the label's heading or definition starts — so a
   label still matches after small sections or functions were merged into one chunk whose
   anchor names the first of them — or, for a Python definition, overlaps the definition's
   lines: a fragment cut from the middle of a long function or class is part of it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from markdown_it import MarkdownIt

from contexts.ingestion.chunk_prose import _heading_text, slugify
from contexts.ingestion.normalize import normalize


@dataclass(frozen=True)
class Pointer:
    """The parts of a SourcePointer a label is matched against."""

    path: str
    anchor: str
    start_line: int | None
    end_line: int | None


@dataclass(frozen=True)
class Label:
    text: str
    path: str
    anchor: str | None

    @classmethod
    def parse(cls, text: str) -> Label:
        path, sep, anchor = text.partition("#")
        return cls(text, path, anchor if sep and anchor else None)

    def path_matches(self, path: str) -> bool:
        if self.anchor is not None:
            return path == self.path
        return path == self.path or (self.path.endswith("/") and path.startswith(self.path))


class SourceTree:
    """The ingested files (path → raw bytes) and where each anchor starts in them."""

    def __init__(self, files: Mapping[str, bytes]) -> None:
        self.files = dict(files)
        self._starts: dict[str, dict[str, int]] = {}
        self._spans: dict[str, dict[str, tuple[int, int]]] = {}
        self._chunk_anchors: dict[str, set[str]] = {}

    def starts(self, path: str) -> dict[str, int]:
        """anchor → 1-based line of the normalized text (the lines pointers refer to)."""
        if path not in self._starts:
            raw = self.files.get(path)
            self._starts[path] = {} if raw is None else anchor_lines(path, raw)
        return self._starts[path]

    def spans(self, path: str) -> dict[str, tuple[int, int]]:
        """Python definition → its (first, last) line; empty for other languages."""
        if path not in self._spans:
            raw = self.files.get(path)
            doc = None if raw is None else normalize(path, raw)
            self._spans[path] = ({} if doc is None or doc.language != "python"
                                 else python_definition_spans(doc.text))
        return self._spans[path]

    def resolves(self, label: Label) -> bool:
        """Whether the label names something that exists in the ingested tree."""
        if label.anchor is None:
            return any(label.path_matches(path) for path in self.files)
        return label.path in self.files and (label.anchor in self.starts(label.path)
                                             or self._is_chunk_anchor(label))

    def remember_pointer_anchors(self, pointers: Iterable[Pointer]) -> None:
        """Anchors the chunker actually produced are valid labels too (``module``, parts)."""
        for pointer in pointers:
            self._chunk_anchors.setdefault(pointer.path, set()).add(pointer.anchor)

    def _is_chunk_anchor(self, label: Label) -> bool:
        return label.anchor in self._chunk_anchors.get(label.path, set())

    def matches(self, label: Label, pointers: Iterable[Pointer]) -> bool:
        for pointer in pointers:
            if not label.path_matches(pointer.path):
                continue
            if label.anchor is None:
                return True
            if pointer.anchor == label.anchor or pointer.anchor.startswith(label.anchor + "#"):
                return True
            span = self.spans(pointer.path).get(label.anchor)
            if span is not None and pointer.anchor.startswith(label.anchor + "."):
                return True  # a member of the labelled class
            if pointer.start_line is None or pointer.end_line is None:
                continue
            line = self.starts(pointer.path).get(label.anchor)
            if line is not None and pointer.start_line <= line <= pointer.end_line:
                return True
            if span is not None and pointer.start_line <= span[1] and span[0] <= pointer.end_line:
                return True
        return False


def anchor_lines(path: str, raw: bytes) -> dict[str, int]:
    doc = normalize(path, raw)
    if doc.language == "markdown":
        return markdown_anchor_lines(doc.text)
    if doc.language == "python":
        return python_anchor_lines(doc.text)
    return {}


def markdown_anchor_lines(text: str) -> dict[str, int]:
    """Heading-slug paths (as the prose chunker builds its anchors) → heading line."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    stack: list[tuple[int, str]] = []
    found: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        level = int(token.tag[1:])
        while stack and stack[-1][0] >= level:
            stack.pop()
        title = _heading_text(tokens[index + 1]) or f"h{level}"
        stack.append((level, slugify(title)))
        found.setdefault("/".join(slug for _, slug in stack), token.map[0] + 1)
    return found


def python_anchor_lines(text: str) -> dict[str, int]:
    """Qualified names of classes and functions (``Class.method``) → their ``def`` line."""
    return {name: start for name, (start, _) in python_definition_spans(text).items()}


def python_definition_spans(text: str) -> dict[str, tuple[int, int]]:
    """Qualified names of classes and functions → (``def`` line, last line)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, tuple[int, int]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{node.name}"
                found.setdefault(name, (node.lineno, node.end_lineno or node.lineno))
                if isinstance(node, ast.ClassDef):
                    visit(node.body, name + ".")

    visit(tree.body, "")
    return found
