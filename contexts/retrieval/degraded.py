"""What a retrieval tells its caller about a leg that did not run: a stable code, never the
exception's text.

The text named the index's absolute path and the organization's primary key; agents and
organization members have no use for either, and both help an attacker map the host. The
details go to the log (``contexts.retrieval.lexical``), where the operator looks.
"""

from __future__ import annotations

from contexts.search import IndexSchemaMismatch, IndexUnavailable

# The index is missing, corrupt or built with another schema: `rebuild_index` restores it.
LEXICAL_INDEX_UNAVAILABLE = "lexical_index_unavailable"
# Anything else went wrong in the lexical leg (a bug, or the host out of resources).
LEXICAL_SEARCH_FAILED = "lexical_search_failed"
# The leg answered, from an index more than INDEX_MAX_LAG seconds behind PostgreSQL (this
# node's follower is stopped, or far behind): recent changes may be missing from it.
LEXICAL_INDEX_BEHIND = "lexical_index_behind"
# This node was rebuilding the organization's index from PostgreSQL while the leg searched it
# (contexts/indexes/follower.py): emptied, then refilled, so hits may be missing — or all of them.
LEXICAL_INDEX_REBUILDING = "lexical_index_rebuilding"

CODES = frozenset({LEXICAL_INDEX_UNAVAILABLE, LEXICAL_SEARCH_FAILED, LEXICAL_INDEX_BEHIND,
                   LEXICAL_INDEX_REBUILDING})


def lexical_code(exc: BaseException) -> str:
    if isinstance(exc, IndexUnavailable | IndexSchemaMismatch | OSError):
        return LEXICAL_INDEX_UNAVAILABLE
    return LEXICAL_SEARCH_FAILED


def public(degraded: dict[str, str]) -> dict[str, str]:
    """A stored ``degraded`` as callers may see it: traces written before the codes hold the
    exception's text, shown as the code it stood for."""
    return {leg: reason if reason in CODES else
            LEXICAL_INDEX_UNAVAILABLE if "IndexUnavailable" in reason else f"{leg}_failed"
            for leg, reason in degraded.items()}
