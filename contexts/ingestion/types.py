"""Plain data passed between the ingestion stages (normalize -> chunk -> embed/index)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CODE_LANGUAGES: frozenset[str] = frozenset(
    {"python", "javascript", "typescript", "go", "java", "rust"}
)
PROSE_LANGUAGES: frozenset[str] = frozenset({"markdown", "text"})


@dataclass(frozen=True)
class NormalizedDocument:
    """One source file after noise stripping.

    ``text`` is the normalized body (Markdown front matter removed, parsed into
    ``front_matter``); chunk line numbers refer to lines of this text. ``content_hash`` is the
    sha256 hex digest of ``text`` only, so a front-matter-only edit keeps the same hash.
    """

    path: str
    text: str
    language: str
    natural_language: str | None
    content_hash: str
    # Excluded from hashing so the frozen document stays hashable despite holding a dict.
    front_matter: dict[str, Any] = field(default_factory=dict, hash=False)
    kind: str | None = None
    title: str | None = None
    links: tuple[str, ...] = ()
    # Where the document sits in a larger hierarchy (a wiki page's ancestors: front matter
    # ``breadcrumbs``); every prose chunk's heading path starts with it.
    heading_prefix: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """One indexable fragment of a document.

    ``text`` is exactly what gets embedded and indexed, including its one-line context header
    (code) or heading-path line (prose). ``anchor`` is unique within the document and stable
    for the same content location, so re-ingesting unchanged input maps onto the same rows.
    """

    anchor: str
    title: str
    heading_path: tuple[str, ...]
    symbol: str | None
    text: str
    start_line: int
    end_line: int
    token_count: int
    language: str
    namespace: str
    chunker_version: str
