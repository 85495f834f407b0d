"""Identifier and pasted-error queries over another project's source tree (issue 41).

Retrieval is judged on source trees this repository never saw; this builds such a check from any
Python package installed here, so a bound or a weight chosen on the golden set can be tried on
code it was not chosen on:

- **identifiers** — the name of a function or class defined once in the tree (at top level or in
  a top-level class), six characters or longer, not a dunder; its label is that definition;
- **pasted errors** — ``raise Name("a literal message")`` of 3–30 words, asked as
  ``Name: message`` the way a log prints it; its label is the function that raises it.

At most ``per_type`` of each, sampled with a fixed seed. The tree's ``.py`` files are copied
under ``OUT/src`` (labels stay true if the package is upgraded) with a ``source.txt`` that
ingests them, and the labels go to ``qrels/dev.tsv`` only: these trees are for choosing, never
for a bar. ``manage.py derive_code_set PACKAGE OUT`` writes one; ``manage.py eval OUT --split
dev`` scores it.
"""

from __future__ import annotations

import ast
import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from contexts.evaluation.labels import python_definition_spans

PER_TYPE = 40
SEED = 41
MIN_NAME = 6
MESSAGE_WORDS = (3, 30)


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    kind: str   # "id" or "error"
    label: str  # path#Qualified.name


def _raised_messages(text: str) -> list[tuple[int, str]]:
    """(line, "Name: message") of every ``raise Name("literal")`` whose message fits."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue
        call = node.exc
        name = (call.func.id if isinstance(call.func, ast.Name)
                else call.func.attr if isinstance(call.func, ast.Attribute) else None)
        if not (name and call.args and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            continue
        message = call.args[0].value.strip()
        low, high = MESSAGE_WORDS
        if "\n" not in message and low <= len(message.split()) <= high:
            found.append((node.lineno, f"{name}: {message}"))
    return found


def _innermost(spans: dict[str, tuple[int, int]], line: int) -> str | None:
    """The innermost definition around ``line``."""
    inside = [(end - start, name) for name, (start, end) in spans.items() if start <= line <= end]
    return min(inside)[1] if inside else None


def queries(files: dict[str, str], *, per_type: int = PER_TYPE, seed: int = SEED) -> list[Query]:
    """The set's queries over ``files`` (path → source text)."""
    names: Counter[str] = Counter()
    defined: dict[str, str] = {}
    errors: dict[str, str] = {}  # text → label, first raise of each message
    for path in sorted(files):
        try:
            raised = _raised_messages(files[path])
        except (SyntaxError, ValueError):
            continue
        spans = python_definition_spans(files[path])
        for qualified in spans:
            if qualified.count(".") <= 1:  # top level, or in a top-level class
                name = qualified.rsplit(".", 1)[-1]
                names[name] += 1
                defined[name] = f"{path}#{qualified}"
        for line, text in raised:
            enclosing = _innermost(spans, line)
            if enclosing:
                errors.setdefault(text, f"{path}#{enclosing}")
    rng = random.Random(seed)
    ids = sorted(name for name, n in names.items()
                 if n == 1 and len(name) >= MIN_NAME and not name.startswith("__"))
    rng.shuffle(ids)
    messages = sorted(errors)
    rng.shuffle(messages)
    return ([Query(f"id{i:03}", name, "id", defined[name])
             for i, name in enumerate(ids[:per_type])]
            + [Query(f"er{i:03}", text, "error", errors[text])
               for i, text in enumerate(messages[:per_type])])


def derive(package: Path, out: Path, *, per_type: int = PER_TYPE, seed: int = SEED) -> list[Query]:
    """Write the set for the package directory ``package`` into ``out``; returns its queries."""
    package, out = Path(package), Path(out)
    src = out / "src" / package.name
    if src.exists():
        shutil.rmtree(src)
    files: dict[str, str] = {}
    for file in sorted(package.rglob("*.py")):
        if "__pycache__" in file.parts:
            continue
        relative = file.relative_to(package.parent).as_posix()
        target = out / "src" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        files[relative] = file.read_text(encoding="utf-8", errors="replace")
    found = queries(files, per_type=per_type, seed=seed)
    (out / "source.txt").write_text(f"# {package.name}: manage.py derive_code_set\n"
                                    "root: src\ninclude: /**/*.py\n", encoding="utf-8")
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query in found:
            handle.write(json.dumps({"_id": query.qid, "text": query.text,
                                     "metadata": {"type": query.kind}}) + "\n")
    with (out / "qrels" / "dev.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query in found:
            handle.write(f"{query.qid}\t{query.label}\t2\n")
    return found
