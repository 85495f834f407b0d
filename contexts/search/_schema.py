"""The tantivy schema of the lexical index and the one way to open it.

Everything tantivy-specific about *what* is indexed lives here; `_backend.py` decides *how* it is
written and searched. Callers outside this package never import tantivy.
"""

from __future__ import annotations

from pathlib import Path

import tantivy

# Name under which the identifier analyzer is registered. The schema stores only this name, not
# the analyzer itself, so every process that opens the index must register it again (tantivy
# raises on indexing/querying an unknown tokenizer). `open_index` is the only sanctioned way in.
IDENTIFIER_TOKENIZER = "contexts_identifier"

# One token = a run of word characters joined by `::`, `.` or `/` (a word character must follow
# each separator, so sentence-final dots and leading `/` or `./` are not part of the token).
# Keeps `rate_limiter.acquire`, `ERR_CONN_RESET`, `RateLimiter`, `foo::bar`, `a/b/c.py` whole.
# Rust regex syntax: `\w` is Unicode-aware, like Python's `re` default for str patterns.
IDENTIFIER_PATTERN = r"\w+(?:(?:::|[./])\w+)*"

# Tantivy's hard limit on a term is ~65 KB; a pasted minified blob or base64 string must not be
# able to fail an indexing batch, and terms this long never help ranking anyway.
MAX_IDENTIFIER_CHARS = 200

# Field names, shared with the backend so a typo is an import error instead of a silent no-match.
FRAGMENT_ID = "fragment_id"
SCOPE = "scope"
KIND = "kind"
ORG = "org"
TITLE = "title"
BODY = "body"
IDENTIFIERS = "identifiers"

# Fields a free-text query is matched against (the others are filters / keys).
TEXT_FIELDS: tuple[str, ...] = (TITLE, BODY, IDENTIFIERS)


def identifier_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of the `identifiers` field; also used to tokenize queries for that field."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(IDENTIFIER_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_IDENTIFIER_CHARS))
        # Lowercase so `RateLimiter`, `ratelimiter` and `RATELIMITER` are one term: agents rarely
        # get the case of a symbol right, and collisions that differ only by case are rare.
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # The only stored field: search results are mapped back to rows by their public id, and a
    # small doc store keeps `searcher.doc()` cheap for the top-100 hits.
    builder.add_text_field(FRAGMENT_ID, stored=True, tokenizer_name="raw", index_option="basic")
    # Multi-valued: one value per scope the fragment is visible in. Indexed so the scope filter is
    # a term-set lookup in the inverted index.
    builder.add_unsigned_field(SCOPE, indexed=True)
    builder.add_text_field(KIND, tokenizer_name="raw", index_option="basic")
    builder.add_text_field(ORG, tokenizer_name="raw", index_option="basic")
    # `en_stem` is tantivy's built-in default tokenizer + lowercase + English stemmer, so
    # `limiting` matches `limits`. Positions are kept (default) for phrase queries.
    builder.add_text_field(TITLE, stored=False, tokenizer_name="en_stem")
    builder.add_text_field(BODY, stored=False, tokenizer_name="en_stem")
    # Freqs but no positions: identifiers are matched term-by-term, never as phrases.
    builder.add_text_field(
        IDENTIFIERS, stored=False, tokenizer_name=IDENTIFIER_TOKENIZER, index_option="freq"
    )
    return builder.build()


class IndexSchemaMismatch(RuntimeError):
    """The index on disk was built with another schema; delete the directory and reindex."""


class IndexUnavailable(RuntimeError):
    """The index cannot be read: its directory is missing, or tantivy reports it corrupted.

    Retrieval answers from the dense leg alone and says so in the trace; `rebuild_index`
    restores the index from PostgreSQL.
    """


def open_index(path: Path, *, create: bool = True) -> tantivy.Index:
    """Open the index at `path` with the custom tokenizer registered; `create` makes a missing
    one (writers do), otherwise a missing index raises :class:`IndexUnavailable` (readers: a
    deleted index must not silently become an empty one).

    The reader is put on a manual reload policy: the backend calls `reload()` before every search
    (≈20 µs), which also picks up commits made by other processes, and no file-watcher thread is
    started per open index.
    """
    path = Path(path)
    if not create and not (path / "meta.json").exists():
        raise IndexUnavailable(f"no lexical index at {path}")
    path.mkdir(parents=True, exist_ok=True)
    try:
        index = tantivy.Index(build_schema(), path=str(path), reuse=True)
    except ValueError as exc:
        # tantivy: "Schema error: 'An index exists but the schema does not match.'"
        if "schema does not match" in str(exc):
            raise IndexSchemaMismatch(
                f"lexical index at {path} has an outdated schema; remove it and reindex"
            ) from exc
        raise
    index.register_tokenizer(IDENTIFIER_TOKENIZER, identifier_analyzer())
    index.config_reader(reload_policy="manual")
    return index
