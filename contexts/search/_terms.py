"""How identifiers, definitions, paths and pasted messages become index terms and query clauses.

Pure Python (no tantivy): the same functions canonicalize what is indexed and what is asked, so
`hash_token_secret`, `HashTokenSecret` and `hashTokenSecret` are one term (`hashtokensecret`),
and a dotted or slashed name matches any contiguous run of its parts (`QuerySet.bulk_create`
matches the definition `django.db.models.query.QuerySet.bulk_create`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath

from . import _schema as s

_IDENTIFIER_RE = re.compile(s.IDENTIFIER_PATTERN)
_TEXT_TOKEN_RE = re.compile(s.TEXT_TOKEN_PATTERN)
_CODE_SPAN_RE = re.compile(r"`([^`\n]+)`")
# camelCase hump (`getUser`, `utf8Decode`) or an acronym followed by a word (`HTTPServer`); the
# latter needs two lower-case letters so prose plurals (`APIs`, `URLs`) and `3D` stay out.
_CAMEL_RE = re.compile(r"[a-z][0-9]*[A-Z]|[A-Z]{2,}[a-z]{2}")
_HAS_WORD_START = re.compile(r"(?:^|[./:])[^\W\d]")
# Parts of a camelCase / PascalCase / ACRONYMWord identifier: `HTTPServerError` → HTTP, Server,
# Error; `utf8Decode` → utf8, Decode.
_CAMEL_PART_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+")

# A dotted name with more parts than this is indexed by its last MAX_PARTS parts only: the
# number of contiguous runs grows with the square of the parts.
MAX_PARTS = 8
# Query-language keywords of the old parser; never identifiers.
_NOT_IDENTIFIERS = frozenset({"and", "or", "not", "in", "to"})


def looks_like_identifier(token: str) -> bool:
    """snake_case, CONSTANT_CASE, camelCase/PascalCase, dotted, `::` and slash paths."""
    if token.isalnum():  # the common case, a plain word: only camelCase makes it one
        return bool(_CAMEL_RE.search(token))
    if not any(ch.isalnum() for ch in token):
        return False  # `_`, `__`
    if "::" in token or "/" in token:
        return True
    if "_" in token:
        return True
    if "." in token:
        # Dotted paths, but not numbers/versions (`3.14`, `1.2.3`) nor abbreviations (`e.g`).
        parts = token.split(".")
        return bool(_HAS_WORD_START.search(token)) and any(len(p) > 1 for p in parts)
    # camelCase / PascalCase with at least two humps / HTTPServer; not `Hello`, `HTTP`, `APIs`.
    return bool(_CAMEL_RE.search(token))


def identifiers_in(text: str) -> list[str]:
    """Identifier-like tokens of `text`, first occurrence order, deduplicated, plus every token
    inside a `backtick` code span (markdown authors mark code that way even for plain words)."""
    if not text:
        return []
    found: dict[str, None] = {}
    for span in _CODE_SPAN_RE.findall(text):
        for token in _IDENTIFIER_RE.findall(span):
            if any(ch.isalnum() for ch in token):
                found.setdefault(token, None)
    for token in _IDENTIFIER_RE.findall(text):
        if looks_like_identifier(token):
            found.setdefault(token, None)
    return list(found)


def _parts(name: str) -> list[str]:
    """A slash path's directories and file name (`_backend.py` stays one part), or the parts of
    a dotted or `::` name."""
    if "/" in name:
        return [p for p in name.split("/") if p]
    return [p for p in re.split(r"::|\.", name) if p]


def canonical(part: str) -> str:
    """One identifier part, case and `_` folded: `hash_token_secret`, `HashTokenSecret` and
    `HASH_TOKEN_SECRET` are all `hashtokensecret`."""
    return part.replace("_", "").lower()


def _runs(parts: list[str], sep: str) -> Iterable[str]:
    parts = [canonical(p) for p in parts[-MAX_PARTS:]]
    parts = [p for p in parts if p]
    for start in range(len(parts)):
        for end in range(start + 1, len(parts) + 1):
            yield sep.join(parts[start:end])


def identifier_terms(names: Iterable[str]) -> list[str]:
    """Index terms of identifiers as used in a fragment: every contiguous run of the parts of
    each (dotted and `::` names joined by `.`, slash paths by `/`)."""
    terms: dict[str, None] = {}
    for name in names:
        sep = "/" if "/" in name else "."
        for term in _runs(_parts(name), sep):
            terms.setdefault(term[: s.MAX_IDENTIFIER_CHARS], None)
    return list(terms)


def symbol_terms(symbols: Iterable[str], paths: Iterable[str]) -> list[str]:
    """Index terms of the definitions a fragment holds: each qualified name alone and under
    each of its source files' module names (`contexts.search._backend.LexicalIndex.search`),
    every contiguous run of the parts."""
    modules = [module_name(p) for p in paths]
    names: list[str] = []
    for symbol in symbols:
        names.append(symbol)
        names.extend(f"{m}.{symbol}" for m in modules if m)
    return identifier_terms(names)


def module_name(path: str) -> str:
    """`contexts/search/_backend.py` → `contexts.search._backend`; `pkg/__init__.py` → `pkg`."""
    pure = PurePosixPath(path)
    parts = [*pure.parent.parts, pure.stem] if pure.suffix else list(pure.parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(p for p in parts if p not in ("", ".", "/"))


def path_terms(paths: Iterable[str]) -> list[str]:
    """Index terms of source paths: every contiguous run of directories and file name (with and
    without its extension) and of the module name, so `_backend.py`, `search/_backend.py`,
    `contexts.search._backend` and `contexts/search` all match `contexts/search/_backend.py`."""
    names: list[str] = []
    for path in paths:
        if not path:
            continue
        names.append(path)
        stem = str(PurePosixPath(path).with_suffix("")) if PurePosixPath(path).suffix else ""
        if stem:
            names.append(stem)
        module = module_name(path)
        if module:
            names.append(module)
    return identifier_terms(names)


def camel_parts(identifiers: Iterable[str]) -> list[str]:
    """The words inside camelCase identifiers (`HashTokenSecret` → Hash Token Secret), which the
    text analyzer cannot see; snake_case and dotted names it already splits."""
    words: list[str] = []
    for name in identifiers:
        for part in re.split(r"::|[./]", name):
            for piece in part.split("_"):
                if piece and _CAMEL_RE.search(piece):
                    words.extend(_CAMEL_PART_RE.findall(piece))
    return words


def query_identifier_terms(query: str, identifiers: list[str] | None = None) -> list[str]:
    """Canonical terms for the identifier-like tokens of a query (each whole: a dotted query
    asks for that run of parts, not for each part alone)."""
    terms: dict[str, None] = {}
    for token in identifiers_in(query) if identifiers is None else identifiers:
        if token.lower() in _NOT_IDENTIFIERS:
            continue
        sep = "/" if "/" in token else "."
        parts = [canonical(p) for p in _parts(token)]
        term = sep.join(p for p in parts if p)
        if term:
            terms.setdefault(term[: s.MAX_IDENTIFIER_CHARS], None)
    return list(terms)


# -- pasted messages ------------------------------------------------------------------------------

# The head of a pasted error line: the raised exception's name, dotted or not, opening a line and
# followed by `: ` or `(` (`InvalidOperation: body must not be empty`,
# `django.core.signing.BadSignature: …`, `ValueError('…')`). A two-hump CamelCase name or a
# conventional suffix, so a capitalised word before a colon ("Note: …") is not one.
EXCEPTION_HEAD = re.compile(
    r"^\s*((?:[a-z_]\w*\.)*(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[A-Z]\w*(?:Error|Exception|Warning)))"
    r"(?::\s|\()", re.MULTILINE)


# What marks a pasted error, stack or log line. Case matters: "ERROR" and "InvalidOperation:"
# are machine output, "error" and "Invalid:" in a question are not. The shapes, one per line:
_ERROR_SHAPES = (
    r'Traceback \(most recent call last\)|File "[^"]+", line \d+',          # Python stacks
    EXCEPTION_HEAD.pattern,  # `InvalidOperation: …`, `django.core.signing.BadSignature: …`
    r"\b[A-Z]\w*(?:Error|Exception|Warning|Denied|Refused|NotFound|Unavailable)\b\s*[:(]",
    # A log level opening a line, after a timestamp or in brackets: `ERROR …`, `[WARNING] …`.
    r"^[\s\d:,.T+-]*\[?(?:ERROR|WARNING|WARN|CRITICAL|FATAL|INFO|DEBUG)\b[\s:\]]",
    r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d)?",                             # log timestamps
    r'\{\s*"(?:error|errors|detail)"\s*:',                                 # JSON error bodies
    r"^\s*(?:HTTP/[\d.]+ )?[45]\d\d [A-Z][a-z]+",                        # HTTP status lines
    r"(?i:\b(?:error|fatal|panic)\s*[:\[]|\bexit (?:code|status) \d+|\berrno\b)",
    r"\b[EW]\d{3,4}\b",                                                     # linter codes
)
_ERROR = re.compile("|".join(f"(?:{shape})" for shape in _ERROR_SHAPES), re.MULTILINE)

# A message pasted without its exception class (`unknown kind 'recipe'`, `a fragment cannot
# supersede itself`, `LexicalDoc.fragment_id must not be empty`): a statement, not a question,
# in the words by which programs say what went wrong, and either carrying a mark of machine
# text or a sentence opening in lower case, as messages of code do (a search typed as keywords,
# `python setuptools command not found`, is not a sentence: it has fewer than two function
# words). Chosen on the golden dev split's messages and the raise messages of Python's standard
# library (half of them match), and against every query of SciFact (no claim matches: claims
# open in capitals and name genes, not values), CoSQA (none: 5 of 500 did before the sentence
# test, and CoSQA dev lost 0.003 nDCG@10 on them), docs-QA (none) and the paragraph set (a
# message is one line of at most 40 words).
# Asked, not pasted: broader than the fusion's rule of a question in words
# (contexts.retrieval.adaptive), since a wh-word anywhere ("python how to …") rules a message out.
_ASKED = re.compile(
    r"\?|(?i:\b(?:how|what|which|why|where|when|who)\b"
    r"|^\s*(?:does|do|did|is|are|can|could|should|would|will|explain|describe)\b)")
# The words by which programs say what went wrong: enough on their own in a sentence ...
_WENT_WRONG = (r"cannot|can't|can not|could not|couldn't|unable|must not|should not|unknown|"
               r"unsupported|invalid|illegal|unexpected|missing|not (?:found|allowed|supported|"
               r"permitted)|no such|denied|refused|failed|died|hung|timed out|unreadable|"
               r"deactivated|out of range|exceeds?|too (?:many|few|long|short|large|big)")
# ... and beside a mark of machine text only: phrases and questions use these too ("documents
# with no owner", "fragments that must be reviewed", "body limit and timeout").
_SAID_WRONG = re.compile(rf"(?i)\b(?:{_WENT_WRONG})\b")
_SAID_WRONG_MARKED = re.compile(
    rf"(?i)\b(?:{_WENT_WRONG}|must|needs|requires?|expected|got|not (?:be|an?)|with no|"
    r"no \w+ (?:to|in|for|and|left)|shouldn't|don't|doesn't|isn't|wasn't|won't|already|bad|"
    r"closed|timeout)\b")
# Marks of machine text: a quoted value (not the stretch between two apostrophes: "Alice's
# key isn't"), a `--flag`, a `field: ` head, a dotted, slashed or snake_case name, a call.
_MACHINE_TEXT = re.compile(
    r"""(?<!\w)'[^'\s][^']*'(?!\w)|"[^"]+"|`[^`]+`|(?<!\w)--?[a-z][\w-]*|^\s*[\w.-]+:\s|"""
    r"""\b\w+[_./]\w+|\b\w+\(\)""")
_FUNCTION_WORDS = re.compile(
    r"(?i)\b(?:a|an|the|this|that|its|itself|is|was|are|were|be|been|has|have|had|no|of|to|or|"
    r"for|with)\b")
_MESSAGE_MAX_WORDS = 40


def _message_without_class(query: str) -> bool:
    """Whether ``query`` is one line of a program's message, pasted without its exception."""
    query = query.strip()
    if "\n" in query or len(query.split()) > _MESSAGE_MAX_WORDS:
        return False  # a message is a line; a paragraph that says "failed" is prose
    if _ASKED.search(query):
        return False
    if _MACHINE_TEXT.search(query):
        return _SAID_WRONG_MARKED.search(query) is not None
    return (query[:1].islower() and _SAID_WRONG.search(query) is not None
            and len(_FUNCTION_WORDS.findall(query)) >= 2)


@lru_cache(maxsize=64)
def looks_like_error(query: str) -> bool:
    """Whether the query is (or holds) a pasted error, stack or log line, or a program's message
    pasted without them: the one rule for the lexical leg's message clauses and the fusion's
    `error_like` feature. Both ask it of the same query in one request (≈0.6 ms for a
    4,000-character one), so the second answer is cached."""
    return _ERROR.search(query) is not None or _message_without_class(query)


def raised_types(query: str) -> set[str]:
    """Canonical identifier terms of the exception names heading the query's lines. They say
    what was raised, not where: the place that raises the message is the answer, so the
    exception class's own definition earns no definition bonus for them."""
    return set(query_identifier_terms(query, [m.group(1) for m in EXCEPTION_HEAD.finditer(query)]))


# Where a pasted message is cut into phrases: line breaks, `: ` (the `Error: message` and log
# field separators), sentence ends, `|`, tabs and quotes (not the apostrophe inside `doesn't`).
# A quoted value is its own phrase: it may be the constant part (a JSON error body's message,
# `expected 'root|include: VALUE'`) or the part that differs (`'users'` for `'{name}'`); either
# way it is not required next to its neighbours. Numbers end a phrase too (analyze_query).
_SEGMENT_BREAK = re.compile(r"[\n\r\t|]+|:\s|\.\s|\.$|(?<!\w)['\"`]|['\"`](?!\w)")
MIN_PHRASE_TERMS = 3


@dataclass
class AnalyzedQuery:
    """The query's text terms (with their counts) and its phrases as (offset, term) lists."""

    counts: dict[str, int] = field(default_factory=dict)
    phrases: list[list[tuple[int, str]]] = field(default_factory=list)


def analyze_query(query: str, analyze_token, *, max_phrases: int,
                  identifiers: list[str] | None = None) -> AnalyzedQuery:
    """Terms of `query` as the text field indexes them, each counted as often as it occurs (as
    bm25s scores a query), plus the words of camelCase identifiers, plus phrases.

    `analyze_token` is the text analyzer applied to one token (it returns [] for stop words and
    over-long tokens, else [stem]); positions count every token the tokenizer emits, stop words
    included, exactly as the index assigns them, so a phrase keeps its stop-word gaps.
    """
    result = AnalyzedQuery()
    if identifiers is None:
        identifiers = identifiers_in(query)
    for part in camel_parts(identifiers):
        for term in analyze_token(part):
            result.counts[term] = result.counts.get(term, 0) + 1
    seen_phrases: set[tuple[tuple[int, str], ...]] = set()
    for segment in _SEGMENT_BREAK.split(query):
        run: list[tuple[int, str]] = []
        position = 0
        for match in _TEXT_TOKEN_RE.finditer(segment):
            token = match.group()
            analyzed = analyze_token(token)
            for term in analyzed:
                result.counts[term] = result.counts.get(term, 0) + 1
            if any(ch.isdigit() for ch in token):
                _keep_phrase(result, run, seen_phrases, max_phrases)
                run = []
            elif analyzed:
                run.append((position, analyzed[0]))
            position += 1
        _keep_phrase(result, run, seen_phrases, max_phrases)
    return result


def _keep_phrase(result: AnalyzedQuery, run: list[tuple[int, str]],
                 seen: set[tuple[tuple[int, str], ...]], max_phrases: int) -> None:
    if len(run) < MIN_PHRASE_TERMS or len(result.phrases) >= max_phrases:
        return
    start = run[0][0]
    phrase = tuple((offset - start, term) for offset, term in run)
    if phrase not in seen:
        seen.add(phrase)
        result.phrases.append(list(phrase))


# -- messages in code -----------------------------------------------------------------------------

# A one-line string literal of code: Python (with its prefixes), JavaScript/TypeScript (template
# literals too), Go, Rust, Java. Triple-quoted strings are docstrings, prose about the code rather
# than what it says at run time, and are left out; a literal cannot span lines, so an apostrophe
# inside a word (`owner's`) opens or closes none.
_LITERAL = re.compile(
    r"""(?<![\w'"])[rbfuRBFU]{0,2}"""
    r"""(?:"((?:[^"\\\n]|\\.)*)"|'((?:[^'\\\n]|\\.)*)'|`([^`\n]*)`)(?![\w'"])""")
# Placeholders of format strings (`{name!r}`, `${value}`, `%(field)s`, `%d`): the part that differs
# from one run to the next, not the message.
_PLACEHOLDER = re.compile(r"\$?\{[^{}]*\}|%\(\w+\)[sdrf]|%[sdrfi]")


def message_literals(code: str) -> str:
    """The run-time messages a code fragment holds: its one-line string literals with a space in
    them (a message, not a key or a name), placeholders removed, one per line. Indexed on their
    own field, so a pasted error finds the code that says it even when the values filled into its
    placeholders break the phrase (`--queries must be at least 1, not 0`)."""
    messages = []
    for match in _LITERAL.finditer(code):
        literal = next(group for group in match.groups() if group is not None)
        literal = _PLACEHOLDER.sub(" ", literal)
        if " " in literal.strip():
            messages.append(literal.strip())
    return "\n".join(messages)
