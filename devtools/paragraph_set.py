"""A paragraph-query set derived from SciFact (issue 41): "find the abstracts that answer this one".

A query is a SciFact abstract longer than ``MIN_WORDS`` words; its relevant documents are the
*other* abstracts SciFact cites as evidence for the same claim(s) — the abstracts its qrels mark
relevant to a claim this abstract is also relevant to. The query carries the abstract's own
``_id``, so ``manage.py eval … --ignore-identical-ids`` (and ``beir_peers.py
--ignore-identical-ids``) drop the abstract itself from the ranking, as BEIR does for ArguAna.

- ``qrels/dev.tsv`` comes from SciFact's ``train`` qrels, ``qrels/test.tsv`` from its ``test``
  qrels; nothing is tuned on test. An abstract cited for claims of both splits is a test query
  only: a fit on dev never sees a test query's text.
- The query text is the abstract's text without its title (a paragraph, as an agent pastes one).
- The corpus is SciFact's own ``corpus.jsonl``, symlinked (or copied) into the output directory at
  run time, so nothing licensed (CC BY-NC) is committed; the derived files are written there too.

``manage.py derive_paragraph_set OUT [--source ../shared/datasets/scifact]`` writes the set.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

from contexts.evaluation.dataset import read_qrels

MIN_WORDS = 150
SPLITS = {"dev": "train", "test": "test"}  # our split → SciFact's qrels split


def _read_qrels(path: Path) -> dict[str, set[str]]:
    """Claim → the abstracts judged relevant to it (the dataset reader's checks included)."""
    return {claim: {doc for doc, grade in judged.items() if grade > 0}
            for claim, judged in read_qrels(path).items()}


def paragraph_qrels(claims: dict[str, set[str]], corpus: dict[str, dict],
                    min_words: int = MIN_WORDS) -> dict[str, dict[str, int]]:
    """Query abstract id → {other abstract id: 1}, for every long cited abstract that has a
    co-cited one."""
    claims_of: dict[str, set[str]] = defaultdict(set)
    for claim, docs in claims.items():
        for doc in docs:
            claims_of[doc].add(claim)
    qrels: dict[str, dict[str, int]] = {}
    for doc in sorted(claims_of, key=lambda d: (len(d), d)):
        if doc not in corpus or len(corpus[doc]["text"].split()) <= min_words:
            continue
        others = set().union(*(claims[c] for c in claims_of[doc])) - {doc}
        others &= corpus.keys()
        if others:
            qrels[doc] = {other: 1 for other in sorted(others)}
    return qrels


def derive(source: Path, out: Path, *, copy: bool = False,
           min_words: int = MIN_WORDS) -> dict[str, int]:
    """Write the set into ``out``; returns the number of queries per split."""
    source, out = Path(source), Path(out)
    corpus_file = source / "corpus.jsonl"
    corpus: dict[str, dict] = {}
    with corpus_file.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                doc = json.loads(line)
                corpus[doc["_id"]] = doc
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    target = out / "corpus.jsonl"
    if target.is_symlink() or target.exists():
        target.unlink()
    if copy:
        shutil.copyfile(corpus_file, target)
    else:
        target.symlink_to(corpus_file.resolve())
    counts: dict[str, int] = {}
    queries: set[str] = set()
    by_split = {ours: paragraph_qrels(_read_qrels(source / "qrels" / f"{theirs}.tsv"), corpus,
                                      min_words) for ours, theirs in SPLITS.items()}
    by_split["dev"] = {query: docs for query, docs in by_split["dev"].items()
                       if query not in by_split["test"]}
    for ours, qrels in by_split.items():
        counts[ours] = len(qrels)
        queries |= qrels.keys()
        with (out / "qrels" / f"{ours}.tsv").open("w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for query, docs in qrels.items():
                for doc, grade in docs.items():
                    handle.write(f"{query}\t{doc}\t{grade}\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query in sorted(queries, key=lambda d: (len(d), d)):
            handle.write(json.dumps({"_id": query, "text": corpus[query]["text"]},
                                    ensure_ascii=False) + "\n")
    return counts
