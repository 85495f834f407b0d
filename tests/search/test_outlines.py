"""A file's outline gives its place to the best chunk of its file below it
(``contexts.retrieval.outlines``): the outline points at the file, the chunk answers."""

from __future__ import annotations

from contexts.kernel.anchors import FILE_OUTLINE_ANCHOR
from contexts.retrieval.outlines import files_of, trade
from contexts.retrieval.types import Candidate

OUTLINE = FILE_OUTLINE_ANCHOR


def ranked(*pks: int) -> list[Candidate]:
    """Candidates best first, with falling final scores."""
    return [Candidate(pk, final=1.0 - i / 10) for i, pk in enumerate(pks)]


def order(candidates: list[Candidate]) -> list[int]:
    return [c.fragment_id for c in sorted(candidates, key=lambda c: -c.final)]


def test_an_outline_trades_places_with_the_first_chunk_of_its_file_below_it() -> None:
    # 1: tokens.py's outline, 2: a chunk of another file, 3 and 4: chunks of tokens.py.
    files = files_of([(1, "accounts/tokens.py", OUTLINE), (2, "accounts/models.py", "Membership"),
                      (3, "accounts/tokens.py", "hash_token_secret"),
                      (4, "accounts/tokens.py", "create_token")])
    candidates = ranked(1, 2, 3, 4)
    scores = [c.final for c in candidates]

    trade(candidates, files)

    assert order(candidates) == [3, 2, 1, 4]
    assert sorted(c.final for c in candidates) == sorted(scores)  # scores trade, none is made up
    assert [c.fragment_id for c in candidates] == [3, 2, 1, 4]  # and the list follows


def test_an_outline_without_a_chunk_of_its_file_below_it_keeps_its_place() -> None:
    files = files_of([(1, "a.py", "f"), (2, "b.py", OUTLINE), (3, "c.py", "g"),
                      (4, "b.py", OUTLINE)])
    candidates = ranked(1, 2, 3)
    trade(candidates, files)
    # b.py's chunk 1 is above its outline: the definition already leads.
    assert order(candidates) == [1, 2, 3]


def test_an_outline_trades_once_and_never_with_another_outline() -> None:
    files = files_of([(1, "a.py", OUTLINE), (2, "a.py", "f"), (3, "a.py", "g"),
                      (4, "b.py", OUTLINE), (5, "a.py", OUTLINE)])
    candidates = ranked(1, 4, 2, 3)
    trade(candidates, files)
    # a.py's outline moves down to its chunk's place and stays there (not on below 3);
    # b.py's outline has no chunk to give its place to.
    assert order(candidates) == [2, 4, 1, 3]


def test_a_fragment_that_stands_for_several_files_is_paired_by_its_first() -> None:
    files = files_of([(7, "z.py", "f"), (7, "a.py", "f"), (8, "a.py", OUTLINE)])
    assert files == {7: ("a.py", False), 8: ("a.py", True)}
