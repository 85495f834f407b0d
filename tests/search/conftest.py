"""Fixtures for the lexical index tests: plain tmp_path indexes, no Django database.

Helpers are handed out as fixtures rather than imported (`from conftest import ...`): with a
`tests/conftest.py` next to this one, which module `conftest` names depends on load order.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from contexts.search import LexicalDoc, LexicalIndex, identifiers_from_text

REPO_ROOT = Path(__file__).resolve().parents[2]

MakeDoc = Callable[..., LexicalDoc]
SpawnPython = Callable[..., "subprocess.Popen[str]"]


def _make_doc(
    fragment_id: str,
    body: str,
    scopes: tuple[int, ...] = (1,),
    *,
    kind: str = "note",
    title: str = "",
    identifiers: str | None = None,
) -> LexicalDoc:
    # Identifiers default to what the ingestion pipeline would extract from title + body.
    if identifiers is None:
        identifiers = identifiers_from_text(f"{title}\n{body}")
    return LexicalDoc(fragment_id, scopes, kind, title, body, identifiers)


@pytest.fixture
def index_path(tmp_path: Path) -> Path:
    return tmp_path / "lexical"


@pytest.fixture
def index(index_path: Path) -> LexicalIndex:
    return LexicalIndex(index_path).create()


def _spawn_python(script: str, *args: str) -> subprocess.Popen[str]:
    """Run `script` in a fresh interpreter that imports the project from the repo root.

    Line-buffered text pipes: tests drive the child with one command per line and read one
    reply per line.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


@pytest.fixture(scope="session")
def make_doc() -> MakeDoc:
    return _make_doc


@pytest.fixture(scope="session")
def spawn_python() -> SpawnPython:
    return _spawn_python
