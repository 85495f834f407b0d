"""Identifier and pasted-error queries over another project's tree (devtools/code_set.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from contexts.evaluation import dataset as datasets
from contexts.evaluation.labels import Label, SourceTree
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


    def aid():
        raise RuntimeError("too short")


    def shared_name(key):
        raise KeyError(key)
    ''')
OTHER = "def shared_name():\n    return 1\n"


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("from .core import compute_total\n")
    (root / "core.py").write_text(CORE)
    (root / "other.py").write_text(OTHER)
    (root / "broken.py").write_text("def broken(:\n")
    return root


def test_the_set_asks_for_names_defined_once_and_messages_raised_with_words(package, tmp_path):
    out = tmp_path / "set"
    found = code_set.derive(package, out)
    asked = {(q.kind, q.text): q.label for q in found}
    assert asked == {
        ("id", "compute_total"): "pkg/core.py#compute_total",
        ("id", "Ledger"): "pkg/core.py#Ledger",
        ("id", "record_entry"): "pkg/core.py#Ledger.record_entry",
        ("error", "ValueError: no items were given to total"): "pkg/core.py#compute_total",
        ("error", "LedgerError: the ledger is closed for writing"):
            "pkg/core.py#Ledger.record_entry",
    }  # not: a short name, a dunder, a name defined twice, a short or computed message
    # The dataset reader takes it, typed, with the labels on dev only.
    data = datasets.load(out, "dev")
    assert data.manifest is not None and set(data.queries) == {q.qid for q in found}
    assert {data.query_types[q.qid] for q in found} == {"id", "error"}
    assert not (out / "qrels" / "test.tsv").exists()
    # Every label names a definition of the copied tree.
    files = {p.relative_to(out / "src").as_posix(): p.read_bytes()
             for p in (out / "src").rglob("*.py")}
    assert set(files) == {"pkg/__init__.py", "pkg/core.py", "pkg/other.py", "pkg/broken.py"}
    tree = SourceTree(files)
    assert all(tree.resolves(Label.parse(q.label)) for q in found)


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
    with pytest.raises(CommandError, match="neither a directory nor an installed package"):
        call_command("derive_code_set", "no_such_package_here", str(tmp_path / "x"))
    with pytest.raises(CommandError, match="--per-type must be at least 1"):
        call_command("derive_code_set", "json", str(tmp_path / "y"), "--per-type", "0")
