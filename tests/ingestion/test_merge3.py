"""The three-way line merge a sync uses when a person's edit meets an upstream change
(``contexts/ingestion/merge3.py``, ADR 0020): examples, then properties over generated texts —
an unchanged side takes the other; changes with an unchanged line between them are both
applied; changes of the same lines that differ are a conflict that loses neither text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contexts.ingestion.merge3 import MINE_MARK, SEPARATOR, THEIRS_MARK, merge, merged_text

BASE = "# Limits\n\nEach key gets 100 requests a minute.\n\nBursts of 20 are allowed.\n\n" \
       "Limits reset at midnight UTC.\n"


def test_edit_and_upstream_change_in_different_paragraphs_merge():
    mine = BASE.replace("Bursts of 20 are allowed.", "Bursts of 20 are allowed.\n"
                        "Internal callers are exempt.")
    theirs = BASE.replace("100 requests", "120 requests")
    result = merge(BASE, mine, theirs)
    assert result.clean
    assert "Internal callers are exempt." in result.text
    assert "120 requests" in result.text and "100 requests" not in result.text


def test_same_line_changed_differently_is_a_conflict_with_both_texts():
    mine = BASE.replace("100 requests", "100 requests (200 for internal callers)")
    theirs = BASE.replace("100 requests", "150 requests")
    result = merge(BASE, mine, theirs, mine_label="ada", theirs_label="upstream abc123")
    assert not result.clean and result.conflicts == 1
    assert merged_text(BASE, mine, theirs) is None
    text = result.text
    assert (f"{MINE_MARK} ada\nEach key gets 100 requests (200 for internal callers) a minute.\n"
            f"{SEPARATOR}\nEach key gets 150 requests a minute.\n"
            f"{THEIRS_MARK} upstream abc123\n") in text
    # Outside the conflict, the text is the base's.
    assert text.startswith("# Limits\n\n") and text.endswith("Limits reset at midnight UTC.\n")


def test_the_same_change_on_both_sides_is_taken_once():
    changed = BASE.replace("midnight", "noon")
    assert merge(BASE, changed, changed).text == changed


def test_adjacent_line_changes_conflict():
    base = "a\nb\nc\nd\n"
    assert not merge(base, "a\nB\nc\nd\n", "a\nb\nC\nd\n").clean
    # One unchanged line between them: both applied.
    assert merge(base, "A\nb\nc\nd\n", "a\nb\nC\nd\n").text == "A\nb\nC\nd\n"


def test_deletion_against_untouched_lines_merges():
    base = "one\ntwo\nthree\nfour\nfive\n"
    assert merge(base, "one\nthree\nfour\nfive\n", "one\ntwo\nthree\nfour\nFIVE\n").text == \
        "one\nthree\nfour\nFIVE\n"


def test_deleting_what_the_other_side_changed_conflicts():
    base = "one\ntwo\nthree\n"
    assert not merge(base, "one\nthree\n", "one\nTWO\nthree\n").clean


def test_insertions_at_both_ends():
    base = "middle\n"
    assert merge(base, "top\nmiddle\n", "middle\nbottom\n").text == "top\nmiddle\nbottom\n"


def test_insertions_at_the_same_place_conflict_unless_equal():
    base = "a\nb\n"
    assert not merge(base, "a\nX\nb\n", "a\nY\nb\n").clean
    assert merge(base, "a\nX\nb\n", "a\nX\nb\n").text == "a\nX\nb\n"


def test_missing_final_newline_is_kept_and_markers_stay_on_their_own_lines():
    assert merge("a\nb", "a\nb", "a\nc").text == "a\nc"
    text = merge("a\nb", "a\nB", "a\nC").text
    assert text == f"a\n{MINE_MARK} curated\nB\n{SEPARATOR}\nC\n{THEIRS_MARK} upstream\n"


def test_empty_texts():
    assert merge("", "", "").text == ""
    assert merge("", "mine\n", "").text == "mine\n"
    assert merge("", "", "theirs\n").text == "theirs\n"
    assert not merge("", "mine\n", "theirs\n").clean


def test_repeated_blank_lines_do_not_misplace_a_change():
    base = "# A\n\npara a\n\n# B\n\npara b\n\n# C\n\npara c\n"
    mine = base.replace("para a", "para a, curated")
    theirs = base.replace("para c", "para c, upstream")
    assert merge(base, mine, theirs).text == base.replace("para a", "para a, curated").replace(
        "para c", "para c, upstream")


def test_form_feed_and_line_separator_do_not_split_lines():
    base = "a\x0cb\nc\u2028d\n"
    assert merge(base, base, "a\x0cb\nC\u2028d\n").text == "a\x0cb\nC\u2028d\n"


# --- properties --------------------------------------------------------------------------------
line = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"),
               max_size=12)
text = st.lists(line, max_size=12).map(lambda lines: "".join(f"{x}\n" for x in lines))
raw_text = st.text(max_size=80)


@given(raw_text, raw_text)
def test_unchanged_mine_takes_theirs(base, theirs):
    assert merge(base, base, theirs).text == theirs


@given(raw_text, raw_text)
def test_unchanged_theirs_keeps_mine(base, mine):
    assert merge(base, mine, base).text == mine


@given(raw_text, raw_text)
def test_identical_changes_merge_to_that_change(base, changed):
    assert merge(base, changed, changed).text == changed


@given(text, text, text)
def test_a_conflict_is_where_both_sides_changed_differently(base, mine, theirs):
    result = merge(base, mine, theirs)
    for region in result.regions:
        if region.conflict:
            assert region.mine != region.theirs
            assert region.mine != region.base and region.theirs != region.base
    if result.clean:
        assert result.text == "".join(x for region in result.regions for x in region.lines or ())


@st.composite
def two_separated_hunks(draw):
    """Unique base lines; mine replaces one range, theirs another, at least one unchanged line
    between them (either may come first); replacements unique too, possibly empty (a deletion)."""
    size = draw(st.integers(min_value=3, max_value=30))
    base = [f"base {i}\n" for i in range(size)]
    a_lo = draw(st.integers(0, size - 3))
    a_hi = draw(st.integers(a_lo + 1, size - 2))
    b_lo = draw(st.integers(a_hi + 1, size - 1))
    b_hi = draw(st.integers(b_lo + 1, size))
    first = [f"mine {i}\n" for i in range(draw(st.integers(0, 3)))]
    second = [f"theirs {i}\n" for i in range(draw(st.integers(0, 3)))]
    swap = draw(st.booleans())
    return base, (a_lo, a_hi), (b_lo, b_hi), first, second, swap


@given(two_separated_hunks())
def test_changes_with_an_unchanged_line_between_them_are_both_applied(case):
    base, (a_lo, a_hi), (b_lo, b_hi), first, second, swap = case
    one = base[:a_lo] + first + base[a_hi:]
    other = base[:b_lo] + second + base[b_hi:]
    both = base[:a_lo] + first + base[a_hi:b_lo] + second + base[b_hi:]
    mine, theirs = ("".join(other), "".join(one)) if swap else ("".join(one), "".join(other))
    result = merge("".join(base), mine, theirs)
    assert result.clean
    assert result.text == "".join(both)


@st.composite
def overlapping_hunks(draw):
    size = draw(st.integers(min_value=1, max_value=20))
    base = [f"base {i}\n" for i in range(size)]
    lo = draw(st.integers(0, size - 1))
    hi = draw(st.integers(lo + 1, size))
    mine = base[:lo] + [f"mine {i}\n" for i in range(draw(st.integers(1, 3)))] + base[hi:]
    theirs = base[:lo] + [f"theirs {i}\n" for i in range(draw(st.integers(1, 3)))] + base[hi:]
    return "".join(base), "".join(mine), "".join(theirs)


@given(overlapping_hunks())
def test_different_changes_of_the_same_lines_conflict_and_keep_both(case):
    base, mine, theirs = case
    result = merge(base, mine, theirs)
    assert not result.clean
    for line_ in (*mine.splitlines(keepends=True), *theirs.splitlines(keepends=True)):
        assert line_ in result.text
