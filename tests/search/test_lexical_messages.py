"""A pasted error finds the code that says it: the run-time messages of code (its one-line string
literals, placeholders removed) are indexed on their own field and queried for pasted errors."""

from __future__ import annotations

import pytest

from contexts.search import LexicalDoc, LexicalIndex, identifiers_from_text, message_literals


@pytest.mark.parametrize(("code", "expected"), [
    ('raise CommandError(f"{name} must be at least 1, not {value}")', ["must be at least 1, not"]),
    ("msg = 'unknown field %r; expected one of: %s' % (a, b)",
     ["unknown field  ; expected one of:"]),
    ('log.warning("%(job)s failed after %d tries", job)', ["failed after   tries"]),
    ("throw new Error(`tree-sitter failed on ${file}; using line chunks`)",
     ["tree-sitter failed on  ; using line chunks"]),
    # An apostrophe inside a word neither opens nor closes a literal.
    ("why = \"the owner's account is deactivated\"  # the owner's, isn't it",
     ["the owner's account is deactivated"]),
])
def test_message_literals_are_the_messages_without_their_placeholders(
        code: str, expected: list[str]) -> None:
    assert message_literals(code).splitlines() == expected


@pytest.mark.parametrize("code", [
    '"""A docstring is prose about the code, not what it says."""',
    "row = {'code': 'invalid', 'field': name}",         # keys and single words are not messages
    "# a comment's words aren't a literal",
])
def test_docstrings_keys_and_comments_are_not_messages(code: str) -> None:
    assert message_literals(code) == ""


def _code(fragment_id: str, body: str) -> LexicalDoc:
    return LexicalDoc(fragment_id, (1,), "code", "", body, identifiers_from_text(body),
                      messages=message_literals(body))


def _prose(fragment_id: str, body: str) -> LexicalDoc:
    return LexicalDoc(fragment_id, (1,), "note", "", body, identifiers_from_text(body))


@pytest.fixture
def corpus(index: LexicalIndex) -> LexicalIndex:
    index.upsert([
        _code("raiser", "# bench/options.py · check_positive\n"
              "def check_positive(name, value):\n    if value < 1:\n"
              "        raise CommandError(f\"{name} must be at least 1, not {value}\")"),
        # The neighbour shares the error's words in its code and comments, not in a message.
        _code("neighbour", "# bench/options.py · add_arguments\n"
              "def add_arguments(parser):\n    # --queries: how many queries; at least one\n"
              "    parser.add_argument('--queries', type=int, default=200)\n"
              "    queries = max(1, queries)  # queries must be positive, never 0 queries\n"
              "    raise CommandError"),
        *(_prose(f"runbook{i}", f"Runbook {i}: a CommandError means the queries option "
                 "is wrong; queries must be given, at least one query.") for i in range(3)),
    ])
    return index


def test_a_pasted_error_finds_the_code_that_says_its_message(corpus: LexicalIndex) -> None:
    query = "CommandError: --queries must be at least 1, not 0"
    assert corpus.search(query, [1])[0][0] == "raiser"
    # Without the messages field the words alone do not put the raiser first: the values
    # filled into its placeholders break every phrase of the message.
    assert corpus.search(query, [1], field_boosts={"messages": 0.0})[0][0] != "raiser"


def test_a_question_is_not_scored_on_messages(corpus: LexicalIndex) -> None:
    """Only a pasted error queries the messages field: a question in words is plain BM25 over
    the text (the lexical leg is measured against a plain implementation)."""
    question = "how many queries must be given at least"
    assert (corpus.search(question, [1])
            == corpus.search(question, [1], field_boosts={"messages": 0.0}))
