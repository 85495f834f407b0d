"""The lexical leg on what agents paste: identifiers in any spelling, qualified names, paths,
error messages whose numbers and quoted values differ, and whole documents as queries."""

from __future__ import annotations

import pytest

from contexts.search import LexicalDoc, LexicalIndex, identifiers_from_text


def _code(fragment_id: str, body: str, *, symbols: str = "", paths: str = "") -> LexicalDoc:
    return LexicalDoc(fragment_id, (1,), "code", "", body, identifiers_from_text(body),
                      symbols=symbols, paths=paths)


def _prose(fragment_id: str, body: str, *, paths: str = "") -> LexicalDoc:
    return LexicalDoc(fragment_id, (1,), "note", "", body, identifiers_from_text(body),
                      paths=paths)


@pytest.fixture
def corpus(index: LexicalIndex) -> LexicalIndex:
    index.upsert([
        _code("def_hash", "# accounts/tokens.py · hash_token_secret\n"
              "def hash_token_secret(secret: str) -> str:\n"
              "    return hashlib.sha256(secret.encode()).hexdigest()",
              symbols="hash_token_secret", paths="accounts/tokens.py"),
        _code("use_hash", "# accounts/auth.py · authenticate\n"
              "def authenticate(raw):\n    digest = hash_token_secret(raw)\n"
              "    return Token.objects.filter(digest=digest).first()",
              symbols="authenticate", paths="accounts/auth.py"),
        _prose("prose_hash", "Every secret token is a hash: we hash the token secret, store the "
               "hash of the token and never the secret. Token secrets, token hashes.",
               paths="docs/tokens.md"),
        _code("def_policy", "# net/policy.py · RateLimitPolicy\nclass RateLimitPolicy:\n"
              "    burst = 10", symbols="RateLimitPolicy", paths="net/policy.py"),
        _prose("prose_policy", "Our policy on rate limits: the limit is a policy per rate class."),
        _code("def_bulk", "# django/db/models/query.py · QuerySet.bulk_create\n"
              "    def bulk_create(self, objs, batch_size=None):\n        return objs",
              symbols="QuerySet.bulk_create", paths="django/db/models/query.py"),
        _code("use_bulk", "# app/load.py · load\ndef load(rows):\n"
              "    Item.objects.bulk_create(rows)  # QuerySet create in bulk",
              symbols="load", paths="app/load.py"),
        _code("def_update", "# django/db/models/query.py · QuerySet.update\n"
              "    def update(self, **kwargs):\n        return self.bulk_update(kwargs)",
              symbols="QuerySet.update", paths="django/db/models/query.py"),
        _code("backend", "# contexts/search/_backend.py · LexicalIndex.search\n"
              "    def search(self, query):\n        return []",
              symbols="LexicalIndex.search", paths="contexts/search/_backend.py"),
        _prose("prose_backend", "The search backend: the backend searches. Search backend "
               "notes about the lexical search backend and its contexts.",
               paths="docs/search.md"),
        _code("raise_int", "# conv/parse.py · parse_int\ndef parse_int(value, base):\n"
              "    raise ValueError(f\"invalid literal for int() with base {base}: "
              "{value!r}\")", symbols="parse_int", paths="conv/parse.py"),
        _prose("prose_int", "An invalid int literal? The base of an int literal must be valid; "
               "ValueError for invalid literals with a wrong base, int literal base rules."),
        _code("raise_table", "# db/errors.py · missing_table\ndef missing_table(name, db):\n"
              "    return f\"Table '{name}' doesn't exist in database {db}\"",
              symbols="missing_table", paths="db/errors.py"),
        _prose("prose_table", "A database table may not exist; the table exists in another "
               "database. Table, table, database table doesn't exist."),
    ])
    return index


def _first(index: LexicalIndex, query: str, **kwargs) -> str:
    hits = index.search(query, [1], **kwargs)
    assert hits, query
    return hits[0][0]


@pytest.mark.parametrize("query", ["hash_token_secret", "hash token secret", "HashTokenSecret",
                                   "hashTokenSecret", "HASH_TOKEN_SECRET sha256"])
def test_every_spelling_of_an_identifier_finds_its_definition(corpus: LexicalIndex,
                                                               query: str) -> None:
    assert _first(corpus, query) == "def_hash"


@pytest.mark.parametrize("query", ["RateLimitPolicy", "rate_limit_policy", "rate limit policy"])
def test_camel_case_definitions_are_found_by_their_words(corpus: LexicalIndex,
                                                          query: str) -> None:
    assert _first(corpus, query) == "def_policy"


@pytest.mark.parametrize("query", ["QuerySet.bulk_create",
                                   "django.db.models.query.QuerySet.bulk_create",
                                   "where is QuerySet.bulk_create defined?", "bulk_create"])
def test_dotted_query_matches_the_qualified_name(corpus: LexicalIndex, query: str) -> None:
    assert _first(corpus, query) == "def_bulk"


@pytest.mark.parametrize("query", ["contexts/search/_backend.py", "_backend.py",
                                   "contexts.search._backend", "search/_backend.py",
                                   "LexicalIndex.search"])
def test_paths_and_module_names_match_the_source_path(corpus: LexicalIndex, query: str) -> None:
    assert _first(corpus, query) == "backend"


@pytest.mark.parametrize(("query", "expected"), [
    ("ValueError: invalid literal for int() with base 16: 'zz'", "raise_int"),
    ("ValueError: invalid literal for int() with base 10: '3.5'", "raise_int"),
    ("OperationalError: Table 'orders' doesn't exist in database 42", "raise_table"),
    ('Table "users_v2" doesn\'t exist in database 7', "raise_table"),
])
def test_pasted_messages_match_as_phrases_whatever_their_values(
        corpus: LexicalIndex, query: str, expected: str) -> None:
    assert _first(corpus, query) == expected
    # The phrase is what puts the message's source first: the prose that repeats its words
    # wins on words alone.
    assert _first(corpus, query, field_boosts={"phrases": 0.0}) != expected


def test_a_long_query_is_used_whole(corpus: LexicalIndex, index: LexicalIndex) -> None:
    """3,000 characters of a pasted note whose one telling word comes last, and a whole
    document of 10,000 characters: nothing is cut."""
    index.upsert([_prose("needle", "The frobnication quorum is reached at dawn.")])
    filler = " ".join(f"lorem{i} ipsum{i}" for i in range(2000))
    for size in (3_000, 10_000):
        query = (filler * (size // len(filler) + 1))[: size - 20] + " frobnication"
        assert len(query) >= size - 10
        assert _first(index, query) == "needle"


def test_a_query_with_hundreds_of_identifiers_keeps_the_last(index: LexicalIndex) -> None:
    index.upsert([_code("needle", "def zz_last_one(): pass", symbols="zz_last_one")])
    query = " ".join(f"module_{i}.func_{i}" for i in range(300)) + " zz_last_one"
    assert _first(index, query, field_boosts={"text": 0.0}) == "needle"


def test_a_pasted_json_error_body_finds_the_message_it_quotes(index: LexicalIndex) -> None:
    """The quoted part of a pasted message can be its constant part: every word is scored, and
    a quoted value is a phrase of its own."""
    index.upsert([
        _code("raise_write", "# api/fragments.py · write_fragment\n"
              "    raise Refused(\"you may not write fragments into this repository; "
              "agents write into sessions\")", symbols="write_fragment"),
        _prose("prose_write", "Agents write fragments. A repository holds fragments; sessions "
               "hold what agents write. Permission denied errors are JSON."),
    ])
    query = ('{"error": {"code": "permission_denied", "message": "you may not write fragments '
             'into this repository; agents write into sessions"}}')
    assert _first(index, query) == "raise_write"


def test_a_pasted_errors_exception_name_finds_the_raiser_not_the_class(
        index: LexicalIndex) -> None:
    """`BackupError: no backup at …` names what was raised; where it was raised is the answer.
    The class's definition still matches the name (identifiers and words), without the
    definition bonus that would put it first."""
    index.upsert([
        _code("def_error", "# ops/backup.py · BackupError\nclass BackupError(Exception):\n"
              "    \"\"\"Raised when a restore cannot proceed.\"\"\"", symbols="BackupError"),
        _code("raiser", "# ops/backup.py · restore\ndef restore(path):\n    if not exists(path):\n"
              "        raise BackupError(f\"no backup at {path}\")", symbols="restore"),
        *(_prose(f"note{i}", f"Runbook {i}: restart the worker, then check the queue.")
          for i in range(8)),
    ])
    assert _first(index, "BackupError: no backup at /backups/contexts-2026-11-30.dump") == "raiser"
    # Asked for by name alone, the class is still found by its definition.
    assert _first(index, "BackupError") == "def_error"
