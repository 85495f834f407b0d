"""How a text longer than the model's window should be represented, measured with the model
alone (brute-force cosine search, no index, no fusion), so the choice is the model's and not
the pipeline's.

* Documents: the head (what the model reads of the whole text) against the best passage (max
  over :meth:`Embedder.passages`), and blends of the two, on the dataset's own queries.
* Queries: on a long-query proxy built from the same data — the query is a whole relevant
  document of a query (longer than the window), the answers are the other documents relevant
  to that query (papers cited for the same claim) — the head of the query against the mean of
  its passages' vectors and against the best passage per document.

``manage.py passage_study DATASET --splits train,test`` prints both tables
(docs/retrieval-quality.md, "Long documents and long queries").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contexts.embedding.embedder import Embedder
from contexts.evaluation import metrics
from contexts.evaluation.dataset import Dataset


@dataclass
class Corpus:
    ids: list[str]
    texts: list[str]
    head: np.ndarray          # one row per document
    windows: np.ndarray       # rows for the passages after the head
    owner: np.ndarray         # windows row → document row


def embed_corpus(dataset: Dataset, embedder: Embedder) -> Corpus:
    ids, texts = [], []
    for doc in dataset.documents():
        ids.append(doc.doc_id)
        texts.append(f"{doc.title}\n{doc.text}".strip())
    extra, owner = [], []
    for row, text in enumerate(texts):
        later = embedder.passages(text)[1:]
        extra.extend(later)
        owner.extend([row] * len(later))
    head = embedder.encode(texts)
    windows = embedder.encode(extra) if extra else np.zeros((0, head.shape[1]), np.float32)
    return Corpus(ids, texts, head, windows, np.asarray(owner, dtype=np.int64))


def _fold(corpus: Corpus, head_scores: np.ndarray, window_scores: np.ndarray) -> np.ndarray:
    """Per document, the best of its head's and its windows' scores (rows: queries)."""
    best = head_scores.copy()
    for column, document in enumerate(corpus.owner):
        np.maximum(best[:, document], window_scores[:, column], out=best[:, document])
    return best


def _ndcg(corpus: Corpus, scores: np.ndarray, qids: list[str],
          qrels: dict[str, dict[str, int]], exclude: list[int] | None = None) -> float:
    total = 0.0
    for row, qid in enumerate(qids):
        ranking = scores[row].copy()
        if exclude is not None:
            ranking[exclude[row]] = -np.inf
        top = np.argsort(-ranking)[:10]
        total += metrics.ndcg_at_k([corpus.ids[i] for i in top], qrels[qid], 10)
    return total / len(qids) if qids else 0.0


def document_side(corpus: Corpus, dataset: Dataset, embedder: Embedder
                  ) -> dict[str, float]:
    qids = list(dataset.qrels)
    queries = embedder.encode([dataset.queries[q] for q in qids])
    head = queries @ corpus.head.T
    best = _fold(corpus, head, queries @ corpus.windows.T)
    return {"head": _ndcg(corpus, head, qids, dataset.qrels),
            "best passage": _ndcg(corpus, best, qids, dataset.qrels),
            "head + 0.5 (best - head)": _ndcg(corpus, head + 0.5 * (best - head), qids,
                                              dataset.qrels)}


def query_side(corpus: Corpus, dataset: Dataset, embedder: Embedder
               ) -> tuple[int, dict[str, float]]:
    """(long queries, nDCG@10 by query representation) on the document-as-query proxy."""
    row_of = {doc_id: row for row, doc_id in enumerate(corpus.ids)}
    cases: list[tuple[int, dict[str, int]]] = []
    for relevant in dataset.qrels.values():
        docs = sorted(d for d, grade in relevant.items() if grade > 0 and d in row_of)
        for doc in docs:
            others = {d: 1 for d in docs if d != doc}
            if others and len(embedder.passages(corpus.texts[row_of[doc]])) > 1:
                cases.append((row_of[doc], others))
    qids = [str(i) for i in range(len(cases))]
    qrels = {qid: rel for qid, (_, rel) in zip(qids, cases, strict=True)}
    exclude = [row for row, _ in cases]  # the query document itself
    reps: dict[str, list[np.ndarray]] = {"head": [], "mean of passages": [],
                                         "best passage per document": []}
    for row, _ in cases:
        vectors = embedder.encode(embedder.passages(corpus.texts[row]))
        mean = vectors.mean(axis=0)
        reps["head"].append(vectors[0] @ corpus.head.T)
        reps["mean of passages"].append((mean / np.linalg.norm(mean)) @ corpus.head.T)
        reps["best passage per document"].append((vectors @ corpus.head.T).max(axis=0))
    return len(cases), {name: _ndcg(corpus, np.stack(rows), qids, qrels, exclude)
                        for name, rows in reps.items() if rows}
