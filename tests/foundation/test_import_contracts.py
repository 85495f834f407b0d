"""The layers the build enforces (ADR 0013): import-linter's contracts in ``pyproject.toml`` hold
on this tree and break on a tree that crosses them, and the package-level import graph has no
cycle.

Run as a script to print that graph (grimp, the graph library import-linter is built on):
``.venv/bin/python tests/foundation/test_import_contracts.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contexts", "accounts", "devtools")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the tree under ``root`` (its own pyproject.toml and packages first
    on the path, not the installed ones)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """This tree's packages and pyproject.toml, copied once for the module."""
    copy = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, copy / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def broken(tree_copy: Path, module: str, line: str, tmp_path: Path) -> Path:
    """A fresh copy of ``tree_copy`` with ``line`` appended to ``module`` (a file path)."""
    copy = tmp_path / "broken"
    shutil.copytree(tree_copy, copy)
    with open(copy / module, "a") as out:
        out.write(f"\n{line}\n")
    return copy


def test_this_tree_keeps_every_import_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_copy_of_the_tree_keeps_them_too(tree_copy):
    # What the two tests below change is all that differs from a passing tree.
    result = lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_adapter_importing_another_adapter_breaks_the_contracts(tree_copy, tmp_path):
    copy = broken(tree_copy, "contexts/mcp/server.py",
                  "from contexts.api.retrieve import retrieve_view  # noqa: E402,F401",
                  tmp_path)
    result = lint_imports(copy)
    assert result.returncode != 0
    assert "Adapters are independent: REST, MCP, the console and the management commands " \
           "BROKEN" in " ".join(result.stdout.split())
    assert "contexts.mcp.server -> contexts.api.retrieve" in result.stdout


def test_a_model_importing_a_stage_breaks_the_layers(tree_copy, tmp_path):
    copy = broken(tree_copy, "contexts/models/fragments.py",
                  "from contexts.ingestion import chunk  # noqa: E402,F401", tmp_path)
    result = lint_imports(copy)
    assert result.returncode != 0
    output = " ".join(result.stdout.split())
    assert "Layers: adapters" in output and "BROKEN" in output
    assert "contexts.models.fragments -> contexts.ingestion.chunk" in result.stdout


def test_the_product_importing_the_lab_breaks_the_contracts(tree_copy, tmp_path):
    copy = broken(tree_copy, "contexts/retrieval/fuse.py",
                  "from devtools import bench_corpus  # noqa: E402,F401", tmp_path)
    result = lint_imports(copy)
    assert result.returncode != 0
    output = " ".join(result.stdout.split())
    assert "The product never imports the lab" in output and "BROKEN" in output
    assert "contexts.retrieval.fuse -> devtools.bench_corpus" in result.stdout


def test_an_adapter_importing_a_write_module_breaks_the_one_door(tree_copy, tmp_path):
    copy = broken(tree_copy, "contexts/console/views/fragments.py",
                  "from contexts.services.fragments import retire_fragment  # noqa: E402,F401",
                  tmp_path)
    result = lint_imports(copy)
    assert result.returncode != 0
    output = " ".join(result.stdout.split())
    assert "Adapters write only through the use cases" in output and "BROKEN" in output
    assert "contexts.console.views.fragments -> contexts.services.fragments" in result.stdout


def test_every_package_sits_in_a_layer_and_the_root_keeps_only_entry_points():
    """A new package must be given its place (``contexts.operations`` once sat in none), and the
    root of ``contexts/`` holds Django's entry points, at most ten modules (issue 39)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["id"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    packages = {f"contexts.{path.parent.name}"
                for path in (ROOT / "contexts").glob("*/__init__.py")}
    assert packages - {"contexts.migrations"} <= named, packages - named
    assert "accounts" in named
    root_modules = sorted(path.stem for path in (ROOT / "contexts").glob("*.py"))
    assert len(root_modules) <= 10, root_modules


def package_graph() -> dict[str, set[str]]:
    """Package (or top-level module) → the packages it imports, one level under each root
    package (``contexts.retrieval``, ``accounts.tokens``, …), function-level imports included."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, cache_dir=None)

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if package(module) != package(imported):
                edges[package(module)].add(package(imported))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if node not in index:
            visit(node)
    return found


def test_cycles_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_graph_has_no_cycle():
    edges = package_graph()
    assert edges["contexts.api"]  # the graph is really there
    assert cycles(edges) == []
    # Neither root package imports the other both ways: accounts sits below contexts.
    assert not any(target.startswith("contexts")
                   for source, targets in edges.items() if source.startswith("accounts")
                   for target in targets)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    edges = package_graph()
    for source in sorted(edges):
        print(f"{source} -> {', '.join(sorted(edges[source]))}")
    found = cycles(edges)
    print(f"\n{len(edges)} packages, {sum(map(len, edges.values()))} package-level imports, "
          f"cycles: {found or 'none'}")
    sys.exit(1 if found else 0)
