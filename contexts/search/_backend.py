"""Lexical (BM25) index of fragments on top of tantivy.

One index directory per deployment, shared by web processes (readers) and Celery workers
(writers). tantivy allows one writer per index across all processes, so writes are short, batched
(one writer and one commit per call) and retried when the lock is busy.
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import tantivy

from . import _saturation
from . import _schema as s
from . import _terms as t

logger = logging.getLogger(__name__)

# Weights of the query's clauses. Text is plain BM25 over title+body, the score bm25s gives; the
# others only fire for what a query holds beyond words. An identifier typed in the query is also
# scored as its parts on the text field (`err conn reset`), so a doc spelling those parts out many
# times can outscore the doc with the exact `ERR_CONN_RESET` unless the exact match weighs more:
# 2.0 (measured in tests/search). A definition or path match says "this is the thing itself",
# not "this mentions it", and weighs as much again. Phrases score the sum of their terms' IDF
# once more: a pasted message found verbatim outranks pages that share its words. A pasted
# error's words found in a code fragment's string literals say "this code says the message" and
# weigh as a definition does (golden dev, pasted errors: lexical MRR@10 0.84 → 0.92 at 1.0, 0.94
# at 2.0; docs/retrieval-quality.md).
DEFAULT_FIELD_BOOSTS: Mapping[str, float] = {
    s.TEXT: 1.0, s.IDENTIFIERS: 2.0, s.SYMBOLS: 2.0, s.PATHS: 2.0, s.PHRASES: 1.0,
    s.MESSAGES: 2.0,
}

# No query is cut: every word of a pasted document is scored (the API bounds a query's length,
# `CONTEXTS_MAX_QUERY_CHARS`). These bounds only guard the index against a caller that bypasses
# it; beyond them the rarest terms are kept and a warning is logged, never silently.
MAX_QUERY_TERMS = 4096
MAX_IDENTIFIER_TERMS = 512
MAX_PHRASES = 64


@dataclass(frozen=True, slots=True)
class LexicalDoc:
    """One fragment as the lexical index sees it.

    The text field holds `title` and `body` (pass a title only when the body does not already
    start with it, or its words count twice); `identifiers` are identifier-like tokens as
    `identifiers_from_text` finds them.

    `scope_ids` lists every scope the fragment is visible in; a doc with no scopes is indexed but
    can never be found (the filter fails closed). An index holds one organization's fragments
    (one directory per organization), so a document names no organization.
    """

    fragment_id: str
    scope_ids: tuple[int, ...]
    kind: str
    title: str
    body: str
    identifiers: str
    # Qualified names of the definitions in the fragment (`LexicalIndex.search`), and the
    # source paths it comes from; whitespace-separated.
    symbols: str = ""
    paths: str = ""
    # Code only: its run-time messages (`message_literals`), one per line.
    messages: str = ""


class IndexLockBusy(RuntimeError):
    """Another writer held the index lock through every retry.

    Raised instead of tantivy's `ValueError(... LockBusy ...)` so a Celery task can declare
    `autoretry_for=(IndexLockBusy,)` and retry later without swallowing real errors. Only a message
    is passed to the constructor so the exception pickles across the Celery result backend.
    """


def _is_lock_busy(exc: BaseException) -> bool:
    # tantivy-py 0.27 has no dedicated exception type: `Index.writer()` raises
    # ValueError("Failed to acquire Lockfile: LockBusy. ...").
    return isinstance(exc, ValueError) and "LockBusy" in str(exc)


class LexicalIndex:
    """BM25 search over fragments, filtered by scope inside the query.

    Cheap to construct: the index is opened lazily on first use, so a module-level instance does
    not touch the disk at import time. Safe to share between threads for searching.
    """

    # Indirection so tests can observe the backoff without waiting for it.
    _sleep = staticmethod(time.sleep)

    def __init__(
        self,
        path: Path,
        *,
        lock_retries: int = 6,
        lock_backoff: float = 0.05,
        lock_backoff_max: float = 1.0,
        writer_heap_bytes: int = 64_000_000,
        writer_threads: int = 1,
        field_boosts: Mapping[str, float] | None = None,
    ) -> None:
        self.path = Path(path)
        self.lock_retries = lock_retries
        self.lock_backoff = lock_backoff
        self.lock_backoff_max = lock_backoff_max
        # One indexing thread by default: batches are small (one upsert per ingested source) and
        # the worker shares 2 cores with the web process; more threads mostly add segments.
        self.writer_heap_bytes = writer_heap_bytes
        self.writer_threads = writer_threads
        self.field_boosts = _validate_boosts({**DEFAULT_FIELD_BOOSTS, **(field_boosts or {})})
        self._index: tantivy.Index | None = None
        self._open_lock = threading.Lock()

    # -- plumbing -------------------------------------------------------------------------------

    @property
    def index(self) -> tantivy.Index:
        """The open index, created if missing (the write path)."""
        return self._open(create=True)

    def create(self) -> LexicalIndex:
        """Make sure the index exists (empty if new); searches never create it."""
        self._open(create=True)
        return self

    def _open(self, *, create: bool) -> tantivy.Index:
        if self._index is None:
            with self._open_lock:
                if self._index is None:
                    self._index = s.open_index(self.path, create=create)
        return self._index

    def _acquire_writer(self) -> tantivy.IndexWriter:
        attempt = 0
        while True:
            try:
                return self.index.writer(
                    heap_size=self.writer_heap_bytes, num_threads=self.writer_threads
                )
            except ValueError as exc:
                if not _is_lock_busy(exc):
                    raise
                if attempt >= self.lock_retries:
                    raise IndexLockBusy(
                        f"lexical index {self.path} writer lock still busy after "
                        f"{attempt + 1} attempts"
                    ) from exc
                # Exponential backoff with jitter so two workers that collided do not collide
                # again in lock-step.
                delay = min(self.lock_backoff * 2**attempt, self.lock_backoff_max)
                self._sleep(delay * random.uniform(0.5, 1.0))
                attempt += 1

    @contextmanager
    def _writer(self) -> Iterator[tantivy.IndexWriter]:
        """One writer, one commit; the lock is released on every exit path.

        Dropping the Python object is not a reliable release (it depends on refcounting), so the
        writer is consumed explicitly with `wait_merging_threads()`.
        """
        writer = self._acquire_writer()
        try:
            yield writer
        except BaseException:
            writer.rollback()
            raise
        else:
            writer.commit()
        finally:
            writer.wait_merging_threads()

    def _searcher(self) -> tantivy.Searcher:
        """A searcher on the latest commit; never creates the index.

        Raises :class:`IndexUnavailable` when the index is missing or unreadable, and forgets
        the open handle so that the next search reopens whatever `rebuild_index` puts there.
        """
        try:
            index = self._open(create=False)
            # Manual reload policy (see open_index): picks up commits from any process, ≈20 µs.
            index.reload()
            return index.searcher()
        except s.IndexUnavailable:
            self._index = None
            raise
        except ValueError as exc:  # tantivy reports I/O errors and corruption as ValueError
            self._index = None
            raise s.IndexUnavailable(f"lexical index at {self.path} is unreadable: {exc}") from exc

    # -- writes ---------------------------------------------------------------------------------

    def upsert(self, docs: Iterable[LexicalDoc]) -> int:
        """Replace-or-insert `docs` in one commit; returns how many were written.

        Within one batch the last doc for a given fragment_id wins.
        """
        latest: dict[str, LexicalDoc] = {}
        for doc in docs:
            latest[doc.fragment_id] = doc
        if not latest:
            return 0
        # Build documents before taking the lock: a bad doc fails without blocking other writers.
        built = [(_utf8_safe(fid), _to_document(doc)) for fid, doc in latest.items()]
        with self._writer() as writer:
            for fragment_id, document in built:
                # tantivy applies a delete to documents added *before* it (by opstamp), so
                # delete-then-add replaces the old version and keeps the new one.
                writer.delete_documents_by_term(s.FRAGMENT_ID, fragment_id)
                writer.add_document(document)
        return len(built)

    def delete(self, fragment_ids: Iterable[str]) -> None:
        ids = list(dict.fromkeys(_utf8_safe(f) for f in fragment_ids))
        if not ids:
            return
        with self._writer() as writer:
            for fragment_id in ids:
                writer.delete_documents_by_term(s.FRAGMENT_ID, fragment_id)

    def clear(self) -> None:
        with self._writer() as writer:
            writer.delete_all_documents()

    def recreate(self) -> None:
        """Start over with an empty index: for an index too damaged for `clear()` to open.

        The directory is removed, so a writer in another process loses its lock; callers
        rebuild from PostgreSQL, the source of truth, right after.
        """
        with self._open_lock:
            self._index = None
            shutil.rmtree(self.path, ignore_errors=True)
        self.create()

    def count(self) -> int:
        return self._searcher().num_docs

    def all_fragment_ids(self) -> list[str]:
        """Every fragment id the index holds (for consistency checks, not for serving)."""
        searcher = self._searcher()
        hits = searcher.search(tantivy.Query.all_query(), max(searcher.num_docs, 1),
                               count=False).hits
        return [searcher.doc(address).get_first(s.FRAGMENT_ID) for _, address in hits]

    # -- search ---------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        allowed_scope_ids: Collection[int],
        limit: int = 100,
        kinds: Collection[str] | None = None,
        field_boosts: Mapping[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """Return up to `limit` (fragment_id, bm25 score) pairs, best first.

        Only fragments visible in at least one of `allowed_scope_ids` (and, if given, of one of
        `kinds`) are returned; both filters are zero-score MUST clauses, so scores equal those of
        an unfiltered search. No scopes, no kinds, or a blank query return [] without searching.
        The user's `query` never raises: invalid syntax degrades to plain terms.
        """
        scopes = _scope_values(allowed_scope_ids)
        if not scopes or limit <= 0 or not isinstance(query, str):
            return []
        if isinstance(kinds, str):  # `kinds="note"` would otherwise mean {"n", "o", "t", "e"}
            kinds = (kinds,)
        kind_values = None if kinds is None else sorted({_utf8_safe(str(k)) for k in kinds})
        if kind_values is not None and not kind_values:
            return []
        boosts = (
            self.field_boosts
            if field_boosts is None
            else _validate_boosts({**self.field_boosts, **field_boosts})
        )
        # The searcher first: it opens the index without creating it.
        searcher = self._searcher()
        scored = self._text_query(query, boosts)
        if scored is None:
            return []
        text_query, term_weights = scored
        filters = self._filters(scopes, kind_values)
        hits = self._run(searcher, text_query, filters, limit)
        return _saturation.resaturate(searcher, hits, term_weights)

    def _filters(self, scopes: list[int], kinds: list[str] | None) -> list[tantivy.Query]:
        schema = self.index.schema
        # const_score(..., 0.0): a bare term-set query scores 1.0 per match, which would shift
        # every BM25 score; inside a MUST with score 0 it only restricts the candidate set.
        filters = [
            tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(schema, s.SCOPE, scopes), 0.0
            )
        ]
        if kinds is not None:
            filters.append(
                tantivy.Query.const_score_query(
                    tantivy.Query.term_set_query(schema, s.KIND, kinds), 0.0
                )
            )
        return filters

    @staticmethod
    def _run(
        searcher: tantivy.Searcher,
        text_query: tantivy.Query,
        filters: list[tantivy.Query],
        limit: int,
    ) -> list[tuple[float, tantivy.DocAddress]]:
        clauses = [(tantivy.Occur.Must, text_query)]
        clauses += [(tantivy.Occur.Must, f) for f in filters]
        query = tantivy.Query.boolean_query(clauses)
        # count=False: we never show totals, and counting visits every match.
        return searcher.search(query, limit, count=False).hits

    def _text_query(self, query: str, boosts: Mapping[str, float]
                    ) -> tuple[tantivy.Query, dict[str, float]] | None:
        """The scoring part of the query and its text terms' weights; the query is an OR of:

        * every term of the query on the text field, weighted by how often it occurs — plain
          BM25 over title+body, as bm25s scores it (no query syntax: a pasted message full of
          `:`, `"` and `-` is text, not operators);
        * each identifier-like token, whole and canonical, on the identifiers, symbols and
          paths fields (an exception name heading a pasted error line not on the symbols
          field: :func:`_terms.raised_types`);
        * the pasted-message phrases (runs of three or more words between numbers, quoted
          values and line or `: ` breaks) on the text field;
        * for a pasted error (:func:`_terms.looks_like_error`), its words on the messages field:
          the code whose string literals say them.
        """
        text = _utf8_safe(query.strip())
        if not text:
            return None
        found = t.identifiers_in(text)
        analyzed = t.analyze_query(text, _analyze_token, max_phrases=MAX_PHRASES,
                                   identifiers=found)
        schema = self.index.schema
        clauses: list[tuple[tantivy.Occur, tantivy.Query]] = []
        counts = self._bounded(analyzed.counts, MAX_QUERY_TERMS)
        term_weights: dict[str, float] = {}
        if boosts.get(s.TEXT, 0.0) > 0.0:
            for term, count in counts.items():
                query_ = tantivy.Query.term_query(schema, s.TEXT, term, index_option="freq")
                term_weights[term] = weight = boosts[s.TEXT] * count
                clauses.append((tantivy.Occur.Should, _boosted(query_, weight)))
        if boosts.get(s.MESSAGES, 0.0) > 0.0 and t.looks_like_error(text):
            for term, count in counts.items():
                query_ = tantivy.Query.term_query(schema, s.MESSAGES, term, index_option="freq")
                clauses.append((tantivy.Occur.Should, _boosted(query_, boosts[s.MESSAGES] * count)))
        if boosts.get(s.PHRASES, 0.0) > 0.0:
            for phrase in analyzed.phrases:
                query_ = tantivy.Query.phrase_query(schema, s.TEXT, phrase)
                clauses.append((tantivy.Occur.Should, _boosted(query_, boosts[s.PHRASES])))
        identifiers = t.query_identifier_terms(text, found)
        if len(identifiers) > MAX_IDENTIFIER_TERMS:
            logger.warning("lexical query has %d identifiers; scoring the first %d",
                           len(identifiers), MAX_IDENTIFIER_TERMS)
            identifiers = identifiers[:MAX_IDENTIFIER_TERMS]
        raised = t.raised_types(text)
        for field in (s.IDENTIFIERS, s.SYMBOLS, s.PATHS):
            if boosts.get(field, 0.0) <= 0.0:
                continue
            for term in identifiers:
                if field == s.SYMBOLS and term in raised:
                    continue
                query_ = tantivy.Query.term_query(schema, field, term, index_option="freq")
                clauses.append((tantivy.Occur.Should, _boosted(query_, boosts[field])))
        if not clauses:
            return None
        return tantivy.Query.boolean_query(clauses), term_weights

    def _bounded(self, counts: dict[str, int], limit: int) -> dict[str, int]:
        """All of `counts`, or — past `limit` distinct terms, which the API's query length
        cannot reach — the `limit` rarest ones (the ones BM25 weighs most), with a warning."""
        if len(counts) <= limit:
            return counts
        searcher = self._searcher()
        by_rarity = sorted(counts, key=lambda term: searcher.doc_freq(s.TEXT, term))
        logger.warning("lexical query has %d distinct terms; scoring the %d rarest",
                       len(counts), limit)
        return {term: counts[term] for term in by_rarity[:limit]}


# -- helpers ------------------------------------------------------------------------------------

_ANALYZER_LOCAL = threading.local()


def _text_analyzer() -> tantivy.TextAnalyzer:
    # Built once per thread: TextAnalyzer wraps a Rust object whose thread-safety the Python
    # binding does not document, and building one compiles the regex (~tens of µs).
    analyzer = getattr(_ANALYZER_LOCAL, "analyzer", None)
    if analyzer is None:
        analyzer = _ANALYZER_LOCAL.analyzer = s.text_analyzer()
    return analyzer


@lru_cache(maxsize=65_536)
def _analyze_token(token: str) -> tuple[str, ...]:
    """One query token through the text analyzer: () for a stop word, else (stem,). Cached:
    a pasted document repeats its words, and the analyzer is a call into Rust per token."""
    return tuple(_text_analyzer().analyze(token))


def _boosted(query: tantivy.Query, weight: float) -> tantivy.Query:
    return query if weight == 1.0 else tantivy.Query.boost_query(query, weight)


def _utf8_safe(text: str) -> str:
    """`text` with lone surrogates replaced by `?`.

    A lone surrogate (e.g. `"\\ud800"` from a JSON body) is a valid Python str but not UTF-8, and
    the binding raises UnicodeEncodeError while converting it; the fast path costs one encode.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _scope_values(scope_ids: Collection[int]) -> list[int]:
    # The scope field is unsigned: negative or non-integer ids cannot match anything, and passing
    # them to tantivy would raise, so they are dropped (fail closed) rather than trusted.
    values = set()
    for scope_id in scope_ids:
        if isinstance(scope_id, bool) or not isinstance(scope_id, int) or scope_id < 0:
            continue
        values.add(scope_id)
    return sorted(values)


def _validate_boosts(boosts: Mapping[str, float]) -> dict[str, float]:
    unknown = set(boosts) - set(s.BOOSTABLE)
    if unknown:
        raise ValueError(f"unknown field(s) in field_boosts: {sorted(unknown)}")
    clean = {}
    for field, boost in boosts.items():
        boost = float(boost)
        if not math.isfinite(boost) or boost < 0.0:
            raise ValueError(f"field boost for {field!r} must be finite and >= 0, got {boost}")
        clean[field] = boost
    return clean


def _to_document(doc: LexicalDoc) -> tantivy.Document:
    if not doc.fragment_id:
        raise ValueError("LexicalDoc.fragment_id must not be empty")
    document = tantivy.Document()
    document.add_text(s.FRAGMENT_ID, _utf8_safe(doc.fragment_id))
    for scope_id in dict.fromkeys(doc.scope_ids):
        if isinstance(scope_id, bool) or not isinstance(scope_id, int) or scope_id < 0:
            raise ValueError(f"scope ids must be non-negative ints, got {scope_id!r}")
        document.add_unsigned(s.SCOPE, scope_id)
    document.add_text(s.KIND, _utf8_safe(doc.kind))
    # Text from ingested files may carry lone surrogates (`surrogateescape` decoding); one bad
    # character must not fail the whole batch.
    body = _utf8_safe(doc.body)
    identifiers = _utf8_safe(doc.identifiers).split()
    # The words inside camelCase identifiers, so `hash token secret` finds `HashTokenSecret`;
    # appended once each, after the body.
    words = " ".join(dict.fromkeys(t.camel_parts(identifiers)))
    title = _utf8_safe(doc.title)
    text = "\n".join(part for part in (title, body, words) if part)
    document.add_text(s.TEXT, text)
    terms = _text_analyzer().analyze(text)
    document.add_bytes(s.TEXT_TERMS, _saturation.encode_terms(terms))
    document.add_unsigned(s.TEXT_LENGTH, len(terms))
    paths = _utf8_safe(doc.paths).split()
    symbols = _utf8_safe(doc.symbols).split()
    document.add_text(s.IDENTIFIERS, " ".join(t.identifier_terms([*identifiers, *symbols])))
    document.add_text(s.SYMBOLS, " ".join(t.symbol_terms(symbols, paths)))
    document.add_text(s.PATHS, " ".join(t.path_terms(paths)))
    document.add_text(s.MESSAGES, _utf8_safe(doc.messages))
    return document


# -- identifier extraction ----------------------------------------------------------------------


def identifiers_from_text(text: str) -> str:
    """Space-separated identifier-like tokens of `text`, first occurrence order, deduplicated.

    Picks snake_case, CONSTANT_CASE, camelCase/PascalCase, dotted paths (`os.path.join`),
    `::` paths and slash paths (`a/b/c.py`), plus every token inside `backtick` code spans, since
    markdown authors mark code that way even when it is a plain word (`acquire`).
    """
    return " ".join(t.identifiers_in(text))
