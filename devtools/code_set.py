"""Identifier and pasted-error queries over another project's source tree (issue 41).

Retrieval is judged on source trees this repository never saw; this builds such a check from any
Python package installed here, so a bound or a weight chosen on the golden set can be tried on
code it was not chosen on:

- **identifiers** — the name of a function or class defined at top level or in a top-level
  class (what a label can name), six characters or longer, not a dunder, and defined nowhere
  else in the tree (nested definitions counted); its label is that definition. Some are plain
  words (``Response``), as agents ask them;
- **pasted errors** — ``raise Name("a literal message")`` of 3–30 words, raised nowhere else
  in the tree, asked as ``Name: message`` the way a log prints it; its label is the
  definition around the raise (a nested function's raise: the function around it), and a raise
  inside a name defined twice in its file (an ``@overload``, a property's setter) is not asked.

At most ``per_type`` of each, sampled with a fixed seed. The tree's ``.py`` files are copied
under ``OUT/src`` (labels stay true if the package is upgraded) with a ``source.txt`` that
ingests them, and the labels go to ``qrels/dev.tsv`` only: these trees are for choosing, never
for a bar. ``manage.py derive_code_set PACKAGE OUT`` writes one; ``manage.py eval OUT --split
dev`` scores it.

Questions in words cannot be derived: a docstring's sentence asked back is not how people ask.
People write them (``tests/other_trees/<package>/``: ``queries.jsonl`` typed ``nl`` or
``file``, ``qrels.tsv``, ``version``), and ``--questions DIR`` adds them to the derived set,
once every label is found in the copied tree (:func:`add_questions`).
"""

from __future__ import annotations

import ast
import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

PER_TYPE = 40
SEED = 41
MIN_NAME = 6
MESSAGE_WORDS = (3, 30)


class CodeSetError(ValueError):
    """The package or the output directory cannot be used (the message says why)."""


@dataclass(frozen=True)
class Query:
    qid: str
    text: str
    kind: str   # "id" or "error"; written by people (add_questions): "nl" or "file"
    label: str  # path#Qualified.name, or a file's path


def _definitions(tree: ast.Module) -> list[tuple[str, int, int]]:
    """(qualified name, first line, last line) of every definition a label can name — at top
    level and inside classes, as the code chunker cuts them — duplicates kept (an ``@overload``,
    a property's setter)."""
    found: list[tuple[str, int, int]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{node.name}"
                found.append((name, node.lineno, node.end_lineno or node.lineno))
                if isinstance(node, ast.ClassDef):
                    visit(node.body, name + ".")

    visit(tree.body, "")
    return found


def _raised_messages(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, "Name: message") of every ``raise Name("literal")`` whose message fits."""
    found = []
    low, high = MESSAGE_WORDS
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue
        call = node.exc
        name = (call.func.id if isinstance(call.func, ast.Name)
                else call.func.attr if isinstance(call.func, ast.Attribute) else None)
        if not (name and call.args and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            continue
        message = call.args[0].value.strip()
        if "\n" not in message and low <= len(message.split()) <= high:
            found.append((node.lineno, f"{name}: {message}"))
    return found


def _innermost(definitions: list[tuple[str, int, int]], line: int) -> str | None:
    """The innermost definition around ``line``; None outside any, or when its name is
    defined twice in the file (which of them raised would be a guess)."""
    inside = [(end - start, name) for name, start, end in definitions if start <= line <= end]
    if not inside:
        return None
    name = min(inside)[1]
    return name if sum(1 for other, _, _ in definitions if other == name) == 1 else None


def queries(files: dict[str, str], *, per_type: int = PER_TYPE, seed: int = SEED) -> list[Query]:
    """The set's queries over ``files`` (path → source text). A name or a message that occurs
    twice anywhere in the tree is not asked: its answer would be ambiguous."""
    names: Counter[str] = Counter()    # every definition's name, at any depth
    defined: dict[str, str] = {}       # name → label, for those a label can name
    raised: Counter[str] = Counter()   # every fitting message, at every raise
    errors: dict[str, str] = {}        # message → label
    for path in sorted(files):
        try:
            tree = ast.parse(files[path])
        except (SyntaxError, ValueError):
            continue
        names.update(node.name for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
        definitions = _definitions(tree)
        for qualified, _, _ in definitions:
            if qualified.count(".") <= 1:  # top level, or in a top-level class
                defined[qualified.rsplit(".", 1)[-1]] = f"{path}#{qualified}"
        for line, text in _raised_messages(tree):
            raised[text] += 1
            enclosing = _innermost(definitions, line)
            if enclosing:
                errors.setdefault(text, f"{path}#{enclosing}")
    rng = random.Random(seed)
    ids = sorted(name for name in defined
                 if names[name] == 1 and len(name) >= MIN_NAME and not name.startswith("__"))
    rng.shuffle(ids)
    messages = sorted(text for text in errors if raised[text] == 1)
    rng.shuffle(messages)
    return ([Query(f"id{i:03}", name, "id", defined[name])
             for i, name in enumerate(ids[:per_type])]
            + [Query(f"er{i:03}", text, "error", errors[text])
               for i, text in enumerate(messages[:per_type])])


def _sources(package: Path) -> dict[Path, str]:
    """The package's ``.py`` files (a module: itself) → their path under ``src``."""
    if package.is_file():
        if package.suffix != ".py":
            raise CodeSetError(f"{package}: not a Python file")
        return {package: package.name}
    found = {file: file.relative_to(package.parent).as_posix()
             for file in sorted(package.rglob("*.py"))
             if file.is_file() and "__pycache__" not in file.parts}
    if not found:
        raise CodeSetError(f"{package}: no .py files")
    return found


def derive(package: Path, out: Path, *, per_type: int = PER_TYPE, seed: int = SEED) -> list[Query]:
    """Write the set for ``package`` (a package directory or a module file) into ``out``, which
    must be new or empty and apart from the package; returns its queries."""
    package, out = Path(package).resolve(), Path(out).resolve()
    if out == package or package in out.parents or out in package.parents:
        raise CodeSetError(f"{out}: overlaps {package}; choose a directory apart from it")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CodeSetError(f"{out}: exists and is not empty")
    sources = _sources(package)
    files: dict[str, str] = {}
    for file, relative in sources.items():
        target = out / "src" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
        # utf-8-sig: a byte-order mark is not Python (ingestion drops it too)
        files[relative] = file.read_text(encoding="utf-8-sig", errors="replace")
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


def _labels_of(table: Path) -> dict[str, list[str]]:
    """query id → its labels, from a ``query-id<TAB>corpus-id<TAB>score`` file whose scores are
    all positive (a written question names what answers it, not what does not)."""
    labels: dict[str, list[str]] = {}
    lines = table.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].split("\t")[:2] != ["query-id", "corpus-id"]:
        raise CodeSetError(f"{table}: the first line must be query-id<TAB>corpus-id<TAB>score")
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise CodeSetError(f"{table}:{number}: three tab-separated fields, not {len(fields)}")
        if not fields[2].strip().isdigit() or int(fields[2]) < 1:
            raise CodeSetError(f"{table}:{number}: the score must be a positive whole number, "
                               f"not {fields[2]!r}")
        labels.setdefault(fields[0], []).append(fields[1])
    return labels


def _questions_of(file: Path) -> list[tuple[str, str, str]]:
    """(id, text, type) of each line of a ``queries.jsonl``."""
    asked = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            asked.append((str(record["_id"]), str(record["text"]),
                          str(record.get("metadata", {}).get("type", ""))))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CodeSetError(f"{file}:{number}: not a query with an _id and a text "
                               f"({type(exc).__name__}: {exc})") from exc
    return asked


def _missing_label(src: Path, label: str) -> str | None:
    """Why ``label`` names nothing in the tree under ``src``; None when it names a file, or a
    definition a label can name (top level, or in a top-level class)."""
    path, _, anchor = label.partition("#")
    try:
        file = (src / path).resolve()
        found = file.is_relative_to(src.resolve()) and file.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long
        found = False
    if not found:
        return f"{label}: no file {path!r} in the tree"
    if not anchor:
        return None
    try:
        tree = ast.parse(file.read_text(encoding="utf-8-sig", errors="replace"))
    except (SyntaxError, ValueError):
        return f"{label}: {path} is not Python the parser reads"
    names = {name for name, _, _ in _definitions(tree) if name.count(".") <= 1}
    return None if anchor in names else f"{label}: {path} defines no {anchor}"


def add_questions(out: Path, questions: Path, *, version: str | None = None) -> list[Query]:
    """Add the questions people wrote (``questions``: ``queries.jsonl``, ``qrels.tsv`` and a
    ``version`` file naming the package version they were written against) to the set in
    ``out``; returns them. Refused, with nothing added, when a label names no file or
    definition of the copied tree, an id is the derived set's too, a query has no label, or
    ``version`` (the installed one, when known) is not the version they were written for."""
    out, questions = Path(out), Path(questions)
    missing = [name for name in ("queries.jsonl", "qrels.tsv", "version")
               if not (questions / name).is_file()]
    if missing:
        raise CodeSetError(f"{questions}: no {', '.join(missing)}")
    written_for = (questions / "version").read_text(encoding="utf-8").strip()
    if version is not None and version != written_for:
        raise CodeSetError(f"{questions}: written for version {written_for}, "
                           f"not the installed {version}")
    labels = _labels_of(questions / "qrels.tsv")
    taken = {json.loads(line)["_id"] for line in
             (out / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}
    asked = _questions_of(questions / "queries.jsonl")
    problems: list[str] = []
    for qid, _text, _kind in asked:
        if qid in taken:
            problems.append(f"{qid}: the derived set has this id, or another question")
        if not labels.get(qid):
            problems.append(f"{qid}: no label in qrels.tsv")
        problems += [why for label in labels.get(qid, ())
                     if (why := _missing_label(out / "src", label))]
        taken.add(qid)
    if problems:
        raise CodeSetError(f"{questions}: " + "; ".join(problems))
    with (out / "queries.jsonl").open("a", encoding="utf-8") as handle:
        for qid, text, kind in asked:
            handle.write(json.dumps({"_id": qid, "text": text, "metadata": {"type": kind}})
                         + "\n")
    added = [Query(qid, text, kind, label) for qid, text, kind in asked for label in labels[qid]]
    with (out / "qrels" / "dev.tsv").open("a", encoding="utf-8") as handle:
        for query in added:
            handle.write(f"{query.qid}\t{query.label}\t1\n")
    return added
