"""Identifier and pasted-error queries over another project's tree (devtools/code_set.py)."""

from __future__ import annotations

import json
import textwrap
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
