"""The questions ``manage.py loadtest`` asks: a pool of distinct questions of the kinds agents send,
and the stream that draws from it.

**The pool**, built once per run from files in the checkout (no network):

- the golden set's queries (``tests/golden/queries.jsonl``, typed ``nl``, ``id``, ``error``,
  ``path``);
- the shared datasets' queries (``../shared/datasets/*/queries.jsonl``: SciFact's claims and
  CoSQA's web queries, as questions in words) when they are there;
- questions generated from the demo corpus — this repository's code and documentation, the
  files ``make run`` ingests into ``demo`` (``tests/golden/source.txt``'s selection): every
  function, class and constant gives its identifier (bare, qualified, in words), the
  traceback lines and the exception messages an agent pastes from it, its path and module, and
  a question in words about it; the documentation's headings give questions in words.

**The mix** is the golden set's, which is what agents were seen to send: about a quarter each
of identifiers and pasted errors, a sixth of paths, the rest questions in words
(:data:`MIX`). Each kind is shuffled with the run's seed, and a fresh question is the next of a
kind drawn by that weight; a kind that runs out leaves the draw.

**The stream** (:class:`QuestionStream`) hands the run's requests their questions, shared by
all clients: by default no question is asked twice within a run; with ``repeat_share`` P, a share
P of the requests repeats a question the stream already gave (scope and budget included), as an
agent fleet re-asks what it asked. Two streams with the same pool, share and seed give the same
sequence, so both sides of ``loadtest``'s ratio are asked the same. Only if the fresh questions run
out does a request repeat beyond the share; the stream counts those (``exhausted``) and the
report says so.
"""

from __future__ import annotations

import ast
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devtools.loadtest import Ask

# The golden set's mix of query types in its first 338 questions (95 error, 93 id, 80 path, 70
# nl); its later types (how the code behaves, which module does what) count as words here.
MIX = {"identifier": 0.27, "error": 0.28, "path": 0.24, "words": 0.21}
GOLDEN_KINDS = {"nl": "words", "id": "identifier", "error": "error", "path": "path"}
BUDGETS = (800, 1500, 3200)
MAX_CHARS = 300  # a pasted line, not a whole log: the endpoint allows far more

# What ``make run`` ingests as the demo (tests/golden/source.txt): code and documentation.
CODE_ROOTS = ("accounts", "contexts", "devtools")
DOC_ROOTS = ("docs",)
HEADING = re.compile(r"^#{1,4}\s+(.+?)\s*#*\s*$")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# Where a traceback says a deployment keeps the code: agents paste these from their logs.
INSTALL_PREFIXES = ("/app/", "/srv/contexts/", "/usr/src/app/")
WORD_TEMPLATES = (
    "how does {words} work", "where is {name} defined", "what calls {name}",
    "why does {name} fail", "when is {name} used", "what does {name} return",
    "how do I change {words}", "what is {words} for", "example of {name}",
    "tests for {words}",
)
PATH_TEMPLATES = ("{path}", "{module}", "what is in {module}", "what does {path} do",
                  "{path} {name}", "{module}.{name}", "{path}:{line}")
IDENTIFIER_TEMPLATES = ("{name}", "{qualified}", "{words}", "{name} {file}")


@dataclass(frozen=True)
class Pool:
    """Distinct questions by kind (each in the run's shuffled order) and where they came from."""

    kinds: dict[str, tuple[str, ...]]
    sources: Counter = field(default_factory=Counter)  # golden, scifact, cosqa, corpus
    missing: tuple[str, ...] = ()                       # dataset files that were not there

    @property
    def size(self) -> int:
        return sum(len(questions) for questions in self.kinds.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{kind} {len(self.kinds.get(kind, ()))}" for kind in MIX)
        sources = ", ".join(f"{name} {count}" for name, count in sorted(self.sources.items()))
        line = f"{self.size} distinct questions ({kinds}; from {sources})"
        if self.missing:
            line += f"; not found: {', '.join(self.missing)}"
        return line


def build_pool(root: Path, datasets: Path | None = None, *, seed: int = 7) -> Pool:
    """The pool from the checkout at ``root`` and the shared datasets under ``datasets``
    (default: ``root/../shared/datasets``); each text once, in the first kind that had it."""
    root = root.resolve()
    datasets = datasets if datasets is not None else root.parent / "shared" / "datasets"
    seen: set[str] = set()
    kinds: dict[str, list[str]] = {kind: [] for kind in MIX}
    sources: Counter = Counter()

    def add(source: str, items: Iterable[tuple[str, str]]) -> None:
        for kind, text in items:
            text = " ".join(text.split())[:MAX_CHARS]
            if len(text) > 2 and text not in seen:
                seen.add(text)
                kinds[kind].append(text)
                sources[source] += 1

    golden = root / "tests" / "golden" / "queries.jsonl"
    add("golden", ((GOLDEN_KINDS.get(meta, "words"), text)
                   for text, meta in _queries(golden, typed=True)))
    missing = []
    for name in ("cosqa", "scifact"):
        path = datasets / name / "queries.jsonl"
        if path.is_file():
            add(name, (("words", text) for text, _meta in _queries(path)))
        else:
            missing.append(str(path))
    add("corpus", corpus_questions(root))
    rng = random.Random(seed)
    for questions in kinds.values():
        rng.shuffle(questions)
    return Pool({kind: tuple(q) for kind, q in kinds.items()}, sources, tuple(missing))


def _queries(path: Path, *, typed: bool = False) -> Iterator[tuple[str, str]]:
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                meta = (record.get("metadata") or {}).get("type", "") if typed else ""
                yield record["text"], meta


# --- generated from the demo corpus --------------------------------------------------------------
def corpus_questions(root: Path) -> Iterator[tuple[str, str]]:
    """(kind, question) for the code and documentation ``make run`` ingests as the demo."""
    for top in CODE_ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            if "migrations" in path.parts or "__pycache__" in path.parts:
                continue
            yield from _code_questions(path.relative_to(root).as_posix(), path)
    for top in DOC_ROOTS:
        for path in sorted([root / "README.md", *(root / top).rglob("*.md")]):
            yield from _doc_questions(path)


@dataclass(frozen=True)
class _Definition:
    name: str
    qualified: str
    line: int
    end: int
    raises: tuple[tuple[int, str, str], ...]  # (line, exception, message)


def _code_questions(rel: str, path: Path) -> Iterator[tuple[str, str]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return
    module = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    file = rel.rsplit("/", 1)[-1]
    yield "path", rel
    yield "path", module
    for n, d in enumerate(_definitions(tree)):
        # Each definition takes its turn through the templates, so that every kind of question
        # comes from every part of the code, deterministically.
        values = {"name": d.name, "qualified": d.qualified, "words": _words(d.name),
                  "file": file, "path": rel, "module": module, "line": d.line}
        for template in (IDENTIFIER_TEMPLATES[n % len(IDENTIFIER_TEMPLATES)],
                         IDENTIFIER_TEMPLATES[(n + 1) % len(IDENTIFIER_TEMPLATES)]):
            yield "identifier", template.format(**values)
        yield "path", PATH_TEMPLATES[n % len(PATH_TEMPLATES)].format(**values)
        yield "words", WORD_TEMPLATES[n % len(WORD_TEMPLATES)].format(**values)
        yield "words", WORD_TEMPLATES[(n + 3) % len(WORD_TEMPLATES)].format(**values)
        prefix = INSTALL_PREFIXES[n % len(INSTALL_PREFIXES)]
        line = d.line + 1 + n % max(1, d.end - d.line)
        yield "error", f'File "{prefix}{rel}", line {line}, in {d.name}'
        for raised_at, exception, message in d.raises:
            yield "error", f"{exception}: {message}" if message else exception
            yield "error", f'File "{prefix}{rel}", line {raised_at}, in {d.name} {exception}'


def _definitions(tree: ast.Module) -> Iterator[_Definition]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield _definition(node, node.name)
            if isinstance(node, ast.ClassDef):
                for child in node.body:
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield _definition(child, f"{node.name}.{child.name}")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            name = node.targets[0].id
            yield _Definition(name, name, node.lineno, node.end_lineno or node.lineno, ())


def _definition(node: ast.AST, qualified: str) -> _Definition:
    raises = tuple(raised for child in ast.walk(node) if isinstance(child, ast.Raise)
                   if (raised := _raised(child)) is not None)
    return _Definition(qualified.rsplit(".", 1)[-1], qualified, node.lineno,
                       node.end_lineno or node.lineno, raises)


def _raised(node: ast.Raise) -> tuple[int, str, str] | None:
    """(line, exception name, its message as a log would show it) of ``raise Name("…")``."""
    call = node.exc
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    if name is None or not name[:1].isupper():
        return None
    message = _text(call.args[0]) if call.args else ""
    return node.lineno, name, message


def _text(node: ast.AST) -> str:
    """A message's words: a literal as is, an f-string with each value shown as ``x``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "'x'"
                       for part in node.values)
    return ""


def _words(identifier: str) -> str:
    return " ".join(word.lower() for part in identifier.split("_") for word in CAMEL.findall(part))


def _doc_questions(path: Path) -> Iterator[tuple[str, str]]:
    if not path.is_file():
        return
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        match = HEADING.match(line)
        if match and len(heading := match.group(1).replace("`", "")) > 3:
            yield "words", heading
            yield "words", f"{('how', 'what about', 'docs on')[n % 3]} {heading.lower()}"


# --- the stream -----------------------------------------------------------------------------------
class QuestionStream:
    """The run's asks, drawn from ``pool`` by every client (thread-safe); see the module."""

    def __init__(self, pool: Pool, scopes: Sequence[dict[str, str]], *,
                 repeat_share: float = 0.0, seed: int = 7,
                 budgets: Sequence[int] = BUDGETS) -> None:
        if not 0.0 <= repeat_share < 1.0:
            raise ValueError("repeat_share must be at least 0 and below 1")
        self._pool = pool
        self._scopes = list(scopes)
        self._budgets = list(budgets)
        self._share = repeat_share
        self._rng = random.Random(seed)
        self._next = {kind: 0 for kind in pool.kinds}
        self._asked: list[Ask] = []
        self._lock = threading.Lock()
        self.repeats = 0    # requests that repeated an earlier ask by the share
        self.exhausted = 0  # requests that repeated one because the fresh questions ran out

    @property
    def requests(self) -> int:
        return len(self._asked) + self.repeats + self.exhausted

    @property
    def distinct(self) -> int:
        return len(self._asked)

    def __call__(self) -> Ask:
        with self._lock:
            if self._asked and self._rng.random() < self._share:
                self.repeats += 1
                return self._rng.choice(self._asked)
            question = self._fresh()
            if question is None:
                if not self._asked:
                    raise ValueError("the question pool is empty")
                self.exhausted += 1
                return self._rng.choice(self._asked)
            ask = Ask(question, self._rng.choice(self._scopes), self._rng.choice(self._budgets))
            self._asked.append(ask)
            return ask

    def _fresh(self) -> str | None:
        left = [kind for kind, questions in self._pool.kinds.items()
                if self._next[kind] < len(questions)]
        if not left:
            return None
        kind = self._rng.choices(left, weights=[MIX.get(kind, 0.0) or 0.01 for kind in left])[0]
        self._next[kind] += 1
        return self._pool.kinds[kind][self._next[kind] - 1]

    def summary(self) -> str:
        line = (f"{self.requests} questions asked, {self.distinct} distinct, "
                f"{self.repeats} repeats ({100 * self.repeats / max(1, self.requests):.1f} %)")
        if self.exhausted:
            line += f", {self.exhausted} more repeated: the pool ran out of fresh questions"
        return line
