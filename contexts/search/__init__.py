"""Lexical search index (tantivy, BM25), private to this package.

Callers use only what is re-exported here and never import tantivy themselves, so the engine,
schema and tokenizers can change behind this API (the way Paperless-ngx wraps whoosh/tantivy).
"""

from ._backend import (
    DEFAULT_FIELD_BOOSTS,
    IndexLockBusy,
    LexicalDoc,
    LexicalIndex,
    identifiers_from_text,
)
from ._schema import IndexSchemaMismatch, IndexUnavailable, open_index
from ._terms import looks_like_error, message_literals

__all__ = [
    "DEFAULT_FIELD_BOOSTS",
    "IndexLockBusy",
    "IndexSchemaMismatch",
    "IndexUnavailable",
    "LexicalDoc",
    "LexicalIndex",
    "identifiers_from_text",
    "looks_like_error",
    "message_literals",
    "open_index",
]
