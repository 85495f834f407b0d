"""Identifier and pasted-error queries over another project's tree (devtools/code_set.py)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from contexts.evaluation import dataset as datasets
from devtools import code_set

CORE = textwrap.dedent('''\
    """Totals."""


    def compute_total(items):
        if not items:
            raise ValueError("no items were given to total")
        return sum(items)


    class Ledger:
        def record_entry(self, entry):
            raise LedgerError("the ledger is closed for writing")

        def __repr__(self):
            return "Ledger()"

        @property
        def balance_due(self):
            return 0

        @balance_due.setter
        def balance_due(self, value):
            raise AttributeError("the balance due is computed, not set")


    def aid():
        raise RuntimeError("too short")


    def shared_name(key):
        raise KeyError(key)


    def first_caller():
        raise ValueError("the same words raised twice")


    def second_caller():
        def nested_twin():
            pass
        raise ValueError("the same words raised twice")


    raise ImportError("a module that refuses to load at all")
    ''')
OTHER = "def shared_name():\n    return 1\n\n\ndef nested_twin():\n    return 2\n"
BOM = "\ufeffdef bom_marked_function():\n    return 3\n"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("from .core import compute_total\n")
    (root / "core.py").write_text(CORE)
    (root / "other.py").write_text(OTHER)
    (root / "bom.py").write_text(BOM, encoding="utf-8")
    (root / "broken.py").write_text("def broken(:\n")
    return root


def test_the_set_asks_for_what_has_one_answer(package, tmp_path):
    out = tmp_path / "set"
    found = code_set.derive(package, out)
    asked = {(q.kind, q.text): q.label for q in found}
    assert asked == {
        ("id", "compute_total"): "pkg/core.py#compute_total",
        ("id", "Ledger"): "pkg/core.py#Ledger",
        ("id", "record_entry"): "pkg/core.py#Ledger.record_entry",
        ("id", "first_caller"): "pkg/core.py#first_caller",
        ("id", "second_caller"): "pkg/core.py#second_caller",
        ("id", "bom_marked_function"): "pkg/bom.py#bom_marked_function",
        ("error", "ValueError: no items were given to total"): "pkg/core.py#compute_total",
        ("error", "LedgerError: the ledger is closed for writing"):
            "pkg/core.py#Ledger.record_entry",
    }  # not: a short name, a dunder, a name defined twice (nested, or a property and its
    #      setter), a short or computed
    #      message, one raised twice, one raised at module level or inside a setter
    # The dataset reader takes it, typed, with the labels on dev only.
    data = datasets.load(out, "dev")
    assert data.manifest is not None and set(data.queries) == {q.qid for q in found}
    assert {data.query_types[q.qid] for q in found} == {"id", "error"}
    assert sorted(p.name for p in (out / "qrels").iterdir()) == ["dev.tsv"]
    files = {p.relative_to(out / "src").as_posix() for p in (out / "src").rglob("*.py")}
    assert files == {"pkg/__init__.py", "pkg/core.py", "pkg/other.py", "pkg/bom.py",
                     "pkg/broken.py"}


def test_the_output_is_new_and_apart_from_the_package(package, tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    for out, why in ((tmp_path / "used", "not empty"), (package, "overlaps"),
                     (package / "sub", "overlaps"), (tmp_path, "overlaps")):
        with pytest.raises(code_set.CodeSetError, match=why):
            code_set.derive(package, out)
    assert (tmp_path / "used" / "keep.txt").read_text() == "mine"
    assert (package / "core.py").read_text() == CORE
    with pytest.raises(code_set.CodeSetError, match="no .py files"):
        code_set.derive(tmp_path / "used", tmp_path / "empty-set")
    # A module alone is a tree of one file.
    found = code_set.derive(package / "core.py", tmp_path / "module-set")
    assert {q.label for q in found} >= {"core.py#compute_total"}


def test_a_sample_is_fixed_by_its_seed(package, tmp_path):
    first = code_set.derive(package, tmp_path / "a", per_type=1, seed=3)
    again = code_set.derive(package, tmp_path / "b", per_type=1, seed=3)
    assert first == again and [q.kind for q in first] == ["id", "error"]


def test_the_command_finds_a_package_by_name_and_refuses_what_it_cannot_use(tmp_path, capsys):
    call_command("derive_code_set", "json", str(tmp_path / "json-set"))
    assert "identifiers" in capsys.readouterr().out
    lines = (tmp_path / "json-set" / "queries.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line)["metadata"]["type"] in {"id", "error"}
                         for line in lines)
    call_command("derive_code_set", "textwrap", str(tmp_path / "module-set"))  # one module
    assert (tmp_path / "module-set" / "src" / "textwrap.py").is_file()
    for args, why in ((["no_such_package_here", "x"], "not an installed package or module"),
                      (["./no/such/dir", "y"], "no such file or directory"),
                      (["json", "json-set"], "not empty"),
                      (["json", "z", "--per-type", "0"], "--per-type must be at least 1")):
        with pytest.raises(CommandError, match=why):
            call_command("derive_code_set", args[0], str(tmp_path / args[1]), *args[2:])


def _questions(root: Path, version: str, asked: dict[str, tuple[str, str, list[str]]]) -> Path:
    """A questions directory as tests/other_trees/PACKAGE holds: id → (type, text, labels)."""
    root.mkdir()
    (root / "version").write_text(f"{version}\n")
    (root / "queries.jsonl").write_text("".join(
        json.dumps({"_id": qid, "text": text, "metadata": {"type": kind}}) + "\n"
        for qid, (kind, text, _labels) in asked.items()))
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{qid}\t{label}\t1\n" for qid, (_kind, _text, labels) in asked.items()
        for label in labels))
    return root


def test_questions_people_wrote_join_the_set_once_their_labels_are_found(package, tmp_path):
    out = tmp_path / "set"
    derived = code_set.derive(package, out)
    good = _questions(tmp_path / "good", "1.0", {
        "pn001": ("nl", "what refuses an empty list of amounts?", ["pkg/core.py#compute_total"]),
        "pn002": ("nl", "can a closed book still take new lines?",
                  ["pkg/core.py#Ledger.record_entry", "pkg/core.py#Ledger"]),
        "pf001": ("file", "which module keeps the money code?", ["pkg/core.py"]),
    })
    added = code_set.add_questions(out, good, version="1.0")
    assert [(q.qid, q.kind, q.label) for q in added] == [
        ("pn001", "nl", "pkg/core.py#compute_total"),
        ("pn002", "nl", "pkg/core.py#Ledger.record_entry"),
        ("pn002", "nl", "pkg/core.py#Ledger"),
        ("pf001", "file", "pkg/core.py")]
    data = datasets.load(out, "dev")
    assert set(data.queries) == {q.qid for q in derived} | {"pn001", "pn002", "pf001"}
    assert {data.query_types[qid] for qid in ("pn001", "pn002", "pf001")} == {"nl", "file"}
    assert set(data.qrels["pn002"]) == {"pkg/core.py#Ledger.record_entry", "pkg/core.py#Ledger"}


def test_questions_whose_labels_name_nothing_are_refused_and_nothing_is_added(package, tmp_path):
    out = tmp_path / "set"
    code_set.derive(package, out)
    before = {p: p.read_text() for p in (out / "queries.jsonl", out / "qrels" / "dev.tsv")}
    for n, (asked, why) in enumerate((
        ({"pn001": ("nl", "q", ["pkg/core.py#no_such_function"])}, "defines no no_such_function"),
        ({"pn001": ("nl", "q", ["pkg/missing.py"])}, "no file 'pkg/missing.py'"),
        ({"pn001": ("nl", "q", ["../../pkg/core.py"])}, "no file '../../pkg/core.py' in the tree"),
        ({"pn001": ("nl", "q", ["pkg/co\x00re.py"])}, r"no file 'pkg/co\\x00re.py'"),
        # nested in a function: no label can name it (the chunker cuts its enclosing function)
        ({"pn001": ("nl", "q", ["pkg/core.py#second_caller.nested_twin"])}, "defines no"),
        ({"id000": ("nl", "q", ["pkg/core.py"])}, "the derived set has this id"),
        ({"pn001": ("nl", "q", [])}, "no label"),
    )):
        with pytest.raises(code_set.CodeSetError, match=why):
            code_set.add_questions(out, _questions(tmp_path / f"q{n}", "1.0", asked))
    bad = _questions(tmp_path / "scored", "1.0", {"pn001": ("nl", "q", ["pkg/core.py"])})
    (bad / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\npn001\tpkg/core.py\t0\n")
    with pytest.raises(code_set.CodeSetError, match="score must be a positive whole number"):
        code_set.add_questions(out, bad)
    (bad / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\npn001\tpkg/core.py\t1\n")
    (bad / "queries.jsonl").write_text('{"text": "no id"}\n')
    with pytest.raises(code_set.CodeSetError, match="queries.jsonl:1: not a query"):
        code_set.add_questions(out, bad)
    (bad / "version").unlink()
    with pytest.raises(code_set.CodeSetError, match="no version"):
        code_set.add_questions(out, bad)
    with pytest.raises(code_set.CodeSetError, match="pkg/broken.py is not Python"):
        code_set.add_questions(out, _questions(tmp_path / "broken", "1.0", {
            "pn001": ("nl", "q", ["pkg/broken.py#broken"])}))
    with pytest.raises(code_set.CodeSetError, match="written for version 1.0, not the installed 2"):
        code_set.add_questions(out, _questions(tmp_path / "old", "1.0", {
            "pn001": ("nl", "q", ["pkg/core.py"])}), version="2")
    assert {p: p.read_text() for p in before} == before


def test_the_command_adds_the_questions_and_says_so(tmp_path, capsys):
    asked = _questions(tmp_path / "json-questions", "stdlib", {
        "jn001": ("nl", "what turns a string of text back into objects?",
                  ["json/decoder.py#JSONDecoder.decode"]),
        "jf001": ("file", "which module writes objects out as text?", ["json/encoder.py"])})
    call_command("derive_code_set", "json", str(tmp_path / "set"), "--questions", str(asked))
    assert "1 questions in words, 1 asking which file" in capsys.readouterr().out
    assert datasets.load(tmp_path / "set", "dev").query_types["jf001"] == "file"
    wrong = _questions(tmp_path / "wrong", "stdlib", {
        "jn001": ("nl", "q", ["json/decoder.py#no_such_method"])})
    with pytest.raises(CommandError, match="defines no no_such_method"):
        call_command("derive_code_set", "json", str(tmp_path / "set2"), "--questions", str(wrong))


@pytest.mark.parametrize("package", ["click", "requests", "jinja2"])
def test_the_shipped_questions_name_what_their_tree_defines(package, tmp_path):
    from devtools.management.commands.derive_code_set import installed_version, package_path

    questions = Path(__file__).parents[1] / "other_trees" / package
    written_for = (questions / "version").read_text().strip()
    if installed_version(package) != written_for:  # a transitive dependency, not pinned here
        pytest.skip(f"{package} {installed_version(package)} installed; the questions were "
                    f"written for {written_for}")
    code_set.derive(package_path(package), tmp_path / "set")
    added = code_set.add_questions(tmp_path / "set", questions, version=written_for)
    kinds = {query.qid: query.kind for query in added}
    assert sorted(Counter(kinds.values()).items()) == [("file", 20), ("nl", 40)]
