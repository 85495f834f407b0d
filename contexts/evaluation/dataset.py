"""Reading a dataset in BEIR layout, plus the two extensions the harness understands.

Layout::

    corpus.jsonl[.gz]      {"_id", "title", "text"} per line          (a static corpus), or
    source.txt             root + include/exclude patterns              (a live source tree)
    queries.jsonl[.gz]     {"_id", "text"} per line, optionally {"metadata": {"type": …}}
    qrels/<split>.tsv      header "query-id<TAB>corpus-id<TAB>score"
    scopes.tsv             optional: "doc|query<TAB>id<TAB>scope-name" rows

With ``source.txt`` the corpus is a directory (usually this repository) ingested with normal
chunking, and the qrels' corpus ids are labels ``path#anchor`` (see ``labels.py``).

A query's ``metadata.type`` (BEIR's per-query metadata; the golden set uses ``id``, ``error``,
``path`` and ``nl``) makes the report break every metric down by type as well.
"""

from __future__ import annotations

import ast
import csv
import gzip
import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO

import pathspec

CODE_SAMPLE = 200  # documents looked at to decide whether a corpus is source code


class DatasetError(ValueError):
    """The dataset directory is not usable (missing or malformed file)."""


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class SourceManifest:
    """``source.txt``: which files of a source tree make up the corpus.

    Lines are ``root: PATH`` (relative to the dataset directory), ``include: PATTERN`` and
    ``exclude: PATTERN`` (gitignore-style, relative to the root); a line starting with ``#``
    is a comment.
    """

    root: Path
    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @cached_property
    def _specs(self) -> tuple[pathspec.GitIgnoreSpec, pathspec.GitIgnoreSpec]:
        return (pathspec.GitIgnoreSpec.from_lines(self.include),
                pathspec.GitIgnoreSpec.from_lines(self.exclude))

    def wants(self, path: str) -> bool:
        included, excluded = self._specs
        return included.match_file(path) and not excluded.match_file(path)


@dataclass
class Dataset:
    path: Path
    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id → {corpus id (or label) → grade}
    doc_scopes: dict[str, str] = field(default_factory=dict)
    query_scopes: dict[str, str] = field(default_factory=dict)
    query_types: dict[str, str] = field(default_factory=dict)  # query id → metadata.type
    manifest: SourceManifest | None = None
    corpus_file: Path | None = None

    @property
    def scoped(self) -> bool:
        return bool(self.doc_scopes or self.query_scopes)

    def documents(self) -> Iterator[Document]:
        """The static corpus, streamed (a source-tree dataset has none)."""
        if self.corpus_file is None:
            return
        with _open(self.corpus_file) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    yield Document(str(row["_id"]), row.get("title") or "", row.get("text") or "")
                except (ValueError, KeyError) as exc:
                    raise DatasetError(f"{self.corpus_file}:{number}: {exc}") from exc


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - the caller closes it


def _find(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def load(directory: str | Path, split: str, source: str | Path | None = None) -> Dataset:
    """The dataset in ``directory``; ``source`` names another ``source.txt`` to ingest instead
    of the directory's own (the same questions over a larger or smaller tree)."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise DatasetError(f"{directory}: not a directory")
    corpus = _find(root, "corpus.jsonl")
    manifest_file = Path(source) if source is not None else root / "source.txt"
    if source is not None and not manifest_file.is_file():
        raise DatasetError(f"{source}: no such source manifest")
    manifest = read_manifest(manifest_file) if manifest_file.is_file() else None
    if corpus is None and manifest is None:
        raise DatasetError(f"{directory}: neither corpus.jsonl[.gz] nor source.txt")
    queries_file = _find(root, "queries.jsonl")
    if queries_file is None:
        raise DatasetError(f"{directory}: no queries.jsonl[.gz]")
    qrels_file = root / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        known = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
        raise DatasetError(f"{directory}: no qrels/{split}.tsv (splits here: "
                           f"{', '.join(known) or 'none'})")
    queries, types = read_queries(queries_file)
    dataset = Dataset(path=root, name=root.name, queries=queries, qrels=read_qrels(qrels_file),
                      query_types=types, manifest=manifest, corpus_file=corpus)
    if (root / "scopes.tsv").is_file():
        dataset.doc_scopes, dataset.query_scopes = read_scopes(root / "scopes.tsv")
    return dataset


def read_queries(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(query id → text, query id → ``metadata.type`` for the queries that have one)."""
    queries: dict[str, str] = {}
    types: dict[str, str] = {}
    with _open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not row:
                    continue
                qid = str(row["_id"])
                queries[qid] = row["text"]
            except (ValueError, KeyError, TypeError) as exc:
                raise DatasetError(f"{path}:{number}: {exc!r}") from exc
            metadata = row.get("metadata")
            kind = metadata.get("type") if isinstance(metadata, dict) else None
            if kind is None:
                continue
            if not isinstance(kind, str) or not kind.strip():
                raise DatasetError(f"{path}:{number}: metadata.type must be a non-empty string")
            types[qid] = kind.strip()
    return queries, types


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t")
        header = next(rows, None)
        if header != ["query-id", "corpus-id", "score"]:
            raise DatasetError(f"{path}: header must be 'query-id<TAB>corpus-id<TAB>score', "
                               f"got {header!r}")
        for number, row in enumerate(rows, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise DatasetError(f"{path}:{number}: expected 3 tab-separated fields")
            try:
                grade = int(row[2])
            except ValueError as exc:
                raise DatasetError(f"{path}:{number}: score {row[2]!r} is not an integer") \
                    from exc
            qrels.setdefault(row[0], {})[row[1]] = grade
    return qrels


def read_scopes(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    docs: dict[str, str] = {}
    queries: dict[str, str] = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or row[0].startswith("#") or row == ["kind", "id", "scope"]:
                continue
            if len(row) != 3 or row[0] not in ("doc", "query") or not row[2].strip():
                raise DatasetError(f"{path}:{number}: expected 'doc|query<TAB>id<TAB>scope'")
            (docs if row[0] == "doc" else queries)[row[1]] = row[2].strip()
    return docs, queries


def read_manifest(path: Path) -> SourceManifest:
    root: Path | None = None
    include: list[str] = []
    exclude: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):  # whole-line comments only: '#' may be in a glob
            continue
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise DatasetError(f"{path}:{number}: expected 'root|include|exclude: VALUE'")
        if key == "root":
            root = (path.parent / value).resolve()
        elif key == "include":
            include.append(value)
        elif key == "exclude":
            exclude.append(value)
        else:
            raise DatasetError(f"{path}:{number}: unknown key {key!r}")
    if root is None or not root.is_dir():
        raise DatasetError(f"{path}: 'root:' must name an existing directory")
    return SourceManifest(root=root, include=tuple(include or ["**"]), exclude=tuple(exclude))


def looks_like_python(text: str) -> bool:
    """True when ``text`` parses as Python and says more than a bare expression (a single
    word or a number is valid Python too, and prose is never anything else)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: NUL bytes
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def is_code_corpus(dataset: Dataset) -> bool:
    """Whether the corpus is Python source: more than half of a sample of the documents
    without a title parse as Python.

    A content test rather than a README keyword: prose READMEs mention "code" for unrelated
    reasons (SciFact's mentions a "code index"), and it needs no per-dataset switch.
    """
    reservoir: list[Document] = []
    rng = random.Random(0)
    # Reservoir sample over the first few thousand documents: spread out, bounded cost.
    for seen, doc in enumerate(itertools.islice(dataset.documents(), 5000)):
        if len(reservoir) < CODE_SAMPLE:
            reservoir.append(doc)
        else:
            slot = rng.randint(0, seen)
            if slot < CODE_SAMPLE:
                reservoir[slot] = doc
    if not reservoir:
        return False
    python = sum(1 for doc in reservoir if not doc.title.strip() and looks_like_python(doc.text))
    return python * 2 > len(reservoir)
