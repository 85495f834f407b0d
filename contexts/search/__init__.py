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
from ._terms import EXCEPTION_HEAD

__all__ = [
    "DEFAULT_FIELD_BOOSTS",
    "EXCEPTION_HEAD",
    "IndexLockBusy",
    "IndexSchemaMismatch",
    "IndexUnavailable",
    "LexicalDoc",
    "LexicalIndex",
    "identifiers_from_text",
    "open_index",
]
