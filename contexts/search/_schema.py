"""The tantivy schema of the lexical index and the one way to open it.

Everything tantivy-specific about *what* is indexed lives here; `_backend.py` decides *how* it is
written and searched. Callers outside this package never import tantivy.
"""

from __future__ import annotations

from pathlib import Path

import tantivy

# Names under which the custom analyzers are registered. The schema stores only these names, not
# the analyzers, so every process that opens the index must register them again (tantivy raises
# on indexing/querying an unknown tokenizer). `open_index` is the only sanctioned way in.
TEXT_TOKENIZER = "contexts_text"
IDENTIFIER_TOKENIZER = "contexts_identifier"

# One token = a run of word characters joined by `::`, `.` or `/` (a word character must follow
# each separator, so sentence-final dots and leading `/` or `./` are not part of the token).
# Keeps `rate_limiter.acquire`, `ERR_CONN_RESET`, `RateLimiter`, `foo::bar`, `a/b/c.py` whole.
# Rust regex syntax: `\w` is Unicode-aware, like Python's `re` default for str patterns.
IDENTIFIER_PATTERN = r"\w+(?:(?:::|[./])\w+)*"

# The text field's tokens: runs of two or more letters/digits, what bm25s (and scikit-learn)
# take as a word (`\b\w\w+\b`) except that `_` separates, so `hash_token_secret` is read as
# `hash token secret` and a question in words finds the snake_case identifier.
TEXT_TOKEN_PATTERN = r"[^\W_]{2,}"
# Lucene's classic English stop set, the one bm25s uses (`stopwords="en"`): the lexical leg is
# measured against that plain implementation, and a list tuned on our own corpora would not
# generalise.
STOP_WORDS: tuple[str, ...] = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
)
MAX_TEXT_TOKEN_BYTES = 40  # as tantivy's en_stem: longer runs are hashes and blobs, not words

# Tantivy's hard limit on a term is ~65 KB; a pasted minified blob or base64 string must not be
# able to fail an indexing batch, and terms this long never help ranking anyway.
MAX_IDENTIFIER_CHARS = 200

# Field names, shared with the backend so a typo is an import error instead of a silent no-match.
FRAGMENT_ID = "fragment_id"
SCOPE = "scope"
KIND = "kind"
# Title (when the body does not already hold it) + body: the one BM25 field every query is
# scored on, as bm25s scores title+text. One field, because tantivy sums per-field BM25 scores,
# which is not BM25 over the concatenation and over-weights whatever sits in two fields.
TEXT = "text"
# Canonical identifier terms (see `_terms.identifier_terms`): identifiers used in the fragment,
# the definitions it holds (qualified by module), and its source paths and module names. Only
# queried for the identifier-like tokens of a query, so a question in words is scored by TEXT
# alone.
IDENTIFIERS = "identifiers"
# The text field's analyzed terms with their counts (stored, not indexed) and its token count (a
# fast field, so the index's average length is one aggregation): what re-saturating the top hits
# with another BM25 k1 needs (`_saturation.py`), since tantivy fixes k1 at 1.2.
TEXT_TERMS = "text_terms"
TEXT_LENGTH = "text_length"
SYMBOLS = "symbols"
PATHS = "paths"
# The run-time messages of a code fragment, its one-line string literals with placeholders
# removed (`_terms.message_literals`): queried only for a pasted error's words, so the code that
# says a message outranks pages that merely share its words.
MESSAGES = "messages"

# Query clauses whose weight `field_boosts` sets ("phrases": pasted messages matched as phrases
# on the text field).
PHRASES = "phrases"
BOOSTABLE: tuple[str, ...] = (TEXT, IDENTIFIERS, SYMBOLS, PATHS, PHRASES, MESSAGES)

# Bumped whenever the schema or an analyzer changes what is indexed: an index on disk built by
# another version is rebuilt from PostgreSQL (`rebuild_index`, and `runstack` at start).
SCHEMA_VERSION = 5  # 3: the unused `org` field dropped; 4: text term counts and length; 5: messages
VERSION_FILE = "contexts-schema-version"


def text_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of the `text` field; also used to analyze queries for it."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TEXT_TOKEN_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_TEXT_TOKEN_BYTES))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.custom_stopword(list(STOP_WORDS)))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def identifier_analyzer() -> tantivy.TextAnalyzer:
    """Splits an identifier field on whitespace: its terms are canonicalized in Python before
    indexing (`_terms.canonical`), the same function queries go through."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.remove_long(MAX_IDENTIFIER_CHARS))
        .build()
    )


def build_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # Stored: the public id (results are mapped back to rows by it) and the text's term counts
    # (re-saturation reads them for the top hits); a small doc store keeps `searcher.doc()`
    # cheap for the top-100 hits.
    builder.add_text_field(FRAGMENT_ID, stored=True, tokenizer_name="raw", index_option="basic")
    # Multi-valued: one value per scope the fragment is visible in. Indexed so the scope filter is
    # a term-set lookup in the inverted index.
    builder.add_unsigned_field(SCOPE, indexed=True)
    builder.add_text_field(KIND, tokenizer_name="raw", index_option="basic")
    # Positions kept (the default) for the phrase clauses of pasted messages.
    builder.add_text_field(TEXT, stored=False, tokenizer_name=TEXT_TOKENIZER)
    builder.add_bytes_field(TEXT_TERMS, stored=True, indexed=False)
    builder.add_unsigned_field(TEXT_LENGTH, fast=True, indexed=False)
    builder.add_text_field(MESSAGES, stored=False, tokenizer_name=TEXT_TOKENIZER,
                           index_option="freq")
    # Freqs but no positions: identifiers are matched term by term, never as phrases.
    for field in (IDENTIFIERS, SYMBOLS, PATHS):
        builder.add_text_field(
            field, stored=False, tokenizer_name=IDENTIFIER_TOKENIZER, index_option="freq"
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
    existed = (path / "meta.json").exists()
    path.mkdir(parents=True, exist_ok=True)
    version_file = path / VERSION_FILE
    if existed and version_file.exists() and version_file.read_text().strip() != str(
        SCHEMA_VERSION
    ):
        # Same fields, other analyzers: tantivy's own schema check cannot see that.
        raise IndexSchemaMismatch(
            f"lexical index at {path} was built by schema version "
            f"{version_file.read_text().strip()!r}, not {SCHEMA_VERSION}; rebuild it"
        )
    try:
        index = tantivy.Index(build_schema(), path=str(path), reuse=True)
    except ValueError as exc:
        # tantivy: "Schema error: 'An index exists but the schema does not match.'"
        if "schema does not match" in str(exc):
            raise IndexSchemaMismatch(
                f"lexical index at {path} has an outdated schema; remove it and reindex"
            ) from exc
        raise
    if not existed:
        version_file.write_text(f"{SCHEMA_VERSION}\n")
    index.register_tokenizer(TEXT_TOKENIZER, text_analyzer())
    index.register_tokenizer(IDENTIFIER_TOKENIZER, identifier_analyzer())
    index.config_reader(reload_policy="manual")
    return index
