"""Golden-set labels (``path#anchor``) against source pointers, without the database."""

from __future__ import annotations

import textwrap

from contexts.evaluation.labels import (
    Label,
    Pointer,
    SourceTree,
    markdown_anchor_lines,
    python_anchor_lines,
)
from contexts.ingestion.chunk import chunk
from contexts.ingestion.normalize import normalize

MARKDOWN = textwrap.dedent("""\
    # Data model

    Intro.

    ## Scopes

    Scope text.

    ### The visibility rule

    Rule text.

    ## Service functions

    Services.
    """)

PYTHON = textwrap.dedent('''\
    """Module docstring."""


    def readable_scopes(user):
        return []


    class Index:
        def search(self, query):
            return []
    ''')


def test_markdown_anchors_are_the_chunkers_heading_slug_paths():
    lines = markdown_anchor_lines(MARKDOWN)
    assert lines == {"data-model": 1, "data-model/scopes": 5,
                     "data-model/scopes/the-visibility-rule": 9,
                     "data-model/service-functions": 13}
    # The prose chunker builds its anchors the same way.
    anchors = {c.anchor for c in chunk(normalize("docs/data-model.md", MARKDOWN))}
    assert anchors <= set(lines)


def test_python_anchors_are_qualified_definition_names():
    assert python_anchor_lines(PYTHON) == {"readable_scopes": 4, "Index": 8,
                                           "Index.search": 9}


def test_a_label_matches_by_anchor_continuation_line_or_path_prefix():
    tree = SourceTree({"docs/data-model.md": MARKDOWN.encode(), "src/scopes.py": PYTHON.encode()})
    merged = [Pointer("docs/data-model.md", "data-model/scopes", 5, 16)]  # scopes + services
    assert tree.matches(Label.parse("docs/data-model.md#data-model/scopes"), merged)
    assert tree.matches(Label.parse("docs/data-model.md#data-model/service-functions"), merged)
    assert not tree.matches(Label.parse("docs/data-model.md#data-model"), merged)

    part = [Pointer("src/scopes.py", "Index#2", 10, 11)]
    assert tree.matches(Label.parse("src/scopes.py#Index"), part)  # a continuation part
    assert not tree.matches(Label.parse("src/scopes.py#readable_scopes"), part)

    assert tree.matches(Label.parse("src/scopes.py"), part)
    assert tree.matches(Label.parse("src/"), part)
    assert not tree.matches(Label.parse("src/scope"), part)  # a file label is not a prefix
    assert not tree.matches(Label.parse("docs/data-model.md"), part)


def test_a_definition_label_matches_any_part_of_it():
    """Issue 19: a fragment cut from inside a long function or class is part of it."""
    source = PYTHON + textwrap.dedent("""\


        def long_one(x):
            a = 1
            b = 2
            return a + b
        """)
    tree = SourceTree({"src/scopes.py": source.encode()})
    inside = [Pointer("src/scopes.py", "long_one#3", 17, 18)]  # the tail, not the def line
    assert tree.matches(Label.parse("src/scopes.py#long_one"), inside)
    member = [Pointer("src/scopes.py", "Index.search", 9, 10)]
    assert tree.matches(Label.parse("src/scopes.py#Index"), member)
    assert tree.matches(Label.parse("src/scopes.py#Index.search"), member)
    # Only parts of it: the neighbouring definition is not.
    assert not tree.matches(Label.parse("src/scopes.py#readable_scopes"), inside)
    assert not tree.matches(Label.parse("src/scopes.py#long_one"), member)
    assert not tree.matches(Label.parse("src/scopes.py#Index.search"),
                            [Pointer("src/scopes.py", "Index", 8, 8)])


def test_labels_that_name_nothing_are_detected():
    tree = SourceTree({"src/scopes.py": PYTHON.encode()})
    assert tree.resolves(Label.parse("src/scopes.py#Index.search"))
    assert not tree.resolves(Label.parse("src/scopes.py#gone"))
    assert not tree.resolves(Label.parse("src/missing.py"))
    tree.remember_pointer_anchors([Pointer("src/scopes.py", "module", 1, 2)])
    assert tree.resolves(Label.parse("src/scopes.py#module"))
