"""The documentation question → answer set (issue 41): newcomers' questions about this
repository, each answered by a section of its documentation.

The corpus is derived at run time from the checkout, so it follows the documentation as it
changes: ``README.md``, ``docs/*.md`` and ``docs/adr/*.md`` are split at their ``##`` and
``###`` headings (deeper headings stay in their section's body; text before the first ``##``
is the file's own section). A section's id is ``path#slug/slug/…`` — the slugs of the
enclosing headings joined by ``/``, the anchor the prose chunker and the golden set use
(``docs/evaluation.md#evaluation/the-metrics``) — its title is the heading path
(``Evaluation > The metrics``) and its text the body under the heading; sections with an
empty body are dropped.

The questions and labels live in ``tests/docs_qa/`` (``queries.jsonl``, ``qrels/dev.tsv``,
``qrels/test.tsv``). :func:`build` writes a complete BEIR-layout directory (corpus, queries,
qrels) and fails with :class:`LabelError` when a label names no section — a heading was
renamed or removed, so the question must be relabelled.

``manage.py build_docs_qa OUT`` writes it; evaluate with ``manage.py eval OUT --split dev``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

from contexts.evaluation.dataset import read_qrels
from contexts.ingestion.chunk_prose import slugify

SOURCES = ("README.md", "docs/*.md", "docs/adr/*.md")
SPLIT_LEVELS = (2, 3)  # headings that start a section; "#" is the file's title, "####" stays inside
LABELS_DIR = Path(__file__).resolve().parent.parent / "tests" / "docs_qa"


class LabelError(ValueError):
    """A label of the question set names no section of the documentation."""


@dataclass(frozen=True)
class Section:
    doc_id: str
    title: str
    text: str


def _heading_text(token) -> str:
    if token.children:
        text = "".join(c.content for c in token.children
                       if c.type in ("text", "code_inline", "html_inline"))
    else:
        text = token.content
    return " ".join(text.split())


def split_markdown(path: str, source: str) -> list[Section]:
    """The sections of one Markdown file (see the module docstring)."""
    lines = source.split("\n")
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    heads: list[tuple[int, int, str]] = []  # (line, level, text) of every heading
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            heads.append((token.map[0], int(token.tag[1:]), _heading_text(tokens[index + 1])))
    cuts = [(line, level, text) for line, level, text in heads if level in SPLIT_LEVELS]
    stack: list[tuple[int, str]] = []
    sections: list[Section] = []
    seen: dict[str, int] = {}

    def emit(start: int, end: int, body_from: int) -> None:
        body = "\n".join(lines[body_from:end]).strip()
        if not body or not stack:
            return
        anchor = "/".join(slugify(name) for _, name in stack)
        doc_id = f"{path}#{anchor}"
        if doc_id in seen:  # two headings with the same path: GitHub-style -1, -2 suffix
            seen[doc_id] += 1
            doc_id = f"{doc_id}-{seen[doc_id] - 1}"
        else:
            seen[doc_id] = 1
        sections.append(Section(doc_id, " > ".join(name for _, name in stack), body))

    # The file's own section: from its title (or the top) to the first ## / ### heading.
    first_cut = cuts[0][0] if cuts else len(lines)
    top = [h for h in heads if h[0] < first_cut and h[1] == 1]
    if top:
        stack.append((1, top[0][2]))
        emit(top[0][0], first_cut, top[0][0] + 1)
    else:
        stack.append((1, Path(path).stem))
        emit(0, first_cut, 0)
    for index, (line, level, text) in enumerate(cuts):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, text or f"h{level}"))
        end = cuts[index + 1][0] if index + 1 < len(cuts) else len(lines)
        emit(line, end, line + 1)
    return sections


def sections(root: Path) -> list[Section]:
    """Every section of the documentation under ``root``, in file order."""
    found: list[Section] = []
    for pattern in SOURCES:
        for file in sorted(root.glob(pattern)):
            rel = file.relative_to(root).as_posix()
            found.extend(split_markdown(rel, file.read_text(encoding="utf-8")))
    return found


def check_labels(corpus_ids: set[str], labels: Path = LABELS_DIR) -> dict[str, int]:
    """Raise :class:`LabelError` naming every label that resolves to no section; returns the
    number of queries per split."""
    queries = {json.loads(line)["_id"] for line in
               (labels / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}
    missing: list[str] = []
    counts: dict[str, int] = {}
    for split_file in sorted((labels / "qrels").glob("*.tsv")):
        qrels = read_qrels(split_file)
        counts[split_file.stem] = len(qrels)
        for query, docs in qrels.items():
            if query not in queries:
                missing.append(f"{split_file.name}: query {query} is not in queries.jsonl")
            missing.extend(f"{split_file.name}: {query} → {doc}"
                           for doc in docs if doc not in corpus_ids)
    if missing:
        raise LabelError("labels that name no documentation section (heading renamed or "
                         "removed?):\n  " + "\n  ".join(missing))
    return counts


def build(out: Path, root: Path | None = None, labels: Path = LABELS_DIR) -> dict[str, int]:
    """Write corpus.jsonl (from the documentation), queries.jsonl and qrels/ into ``out``."""
    root = Path(root) if root else labels.parent.parent
    found = sections(root)
    ids = [s.doc_id for s in found]
    if len(ids) != len(set(ids)):
        raise LabelError("duplicate section ids")
    counts = check_labels(set(ids), labels)
    out = Path(out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for section in found:
            handle.write(json.dumps({"_id": section.doc_id, "title": section.title,
                                     "text": section.text}, ensure_ascii=False) + "\n")
    shutil.copyfile(labels / "queries.jsonl", out / "queries.jsonl")
    for split_file in (labels / "qrels").glob("*.tsv"):
        shutil.copyfile(split_file, out / "qrels" / split_file.name)
    counts["sections"] = len(found)
    return counts
