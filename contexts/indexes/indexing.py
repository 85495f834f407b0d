"""Stage 4 — index: derived data (vectors in pgvector, text in tantivy) kept in step with
PostgreSQL, the source of truth.

Everything here can be rebuilt from the fragment table: ``embed_fragments`` writes missing
vectors; the tantivy index of each node is written only by ``contexts.indexes.follower``, from the
change feed, with the documents :func:`lexical_doc` describes.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from contexts.embedding.embedder import Embedder, load_embedder, resolve_model
from contexts.models import (
    Embedding,
    EmbeddingGeneration,
    Fragment,
    FragmentStatus,
    Namespace,
    VectorCache,
)
from contexts.models.embeddings import GenerationState
from contexts.search import (
    LexicalDoc,
    LexicalIndex,
    identifiers_from_text,
    message_literals,
)

logger = logging.getLogger(__name__)
NAMESPACES = ("prose", "code")


# --- embedding generations ---------------------------------------------------------------------
def active_generation(namespace: str) -> EmbeddingGeneration:
    """The generation retrieval reads for ``namespace``; created from settings on first use."""
    generation = EmbeddingGeneration.objects.filter(namespace=namespace,
                                                    state=GenerationState.ACTIVE).first()
    if generation is not None:
        return generation
    spec = resolve_model(settings.EMBEDDING_MODELS[namespace])
    with transaction.atomic():
        generation, _ = EmbeddingGeneration.objects.get_or_create(
            namespace=namespace, state=GenerationState.ACTIVE,
            defaults={"model_name": spec.name, "model_version": spec.version,
                      "activated_at": timezone.now()},
        )
    return generation


def embedder_for(generation: EmbeddingGeneration) -> Embedder:
    """The model that built ``generation`` (a re-embed may use another than settings name)."""
    return load_embedder(generation.model_name)


def embedding_text_for(title: str, heading_path: Sequence[str], body: str, *,
                       namespace: str = "prose", symbol: str = "") -> str:
    """What the dense model sees: a head line, then the body. Prose is headed by its heading
    path (or title), which helps short fragments; code only by the name of the definition it
    is cut from — a code file without one has for title its file name's stem, which for a
    dataset's ``123.py`` is noise in the vector (CoSQA dev: the dense leg 0.598 nDCG@10 with
    the stem, below plain dense search over the same text)."""
    head = symbol if namespace == "code" else (" > ".join(heading_path) or title)
    return body if not head or body.startswith(head) else f"{head}\n{body}"


def vector_key(text: str) -> str:
    """The vector cache's key: the hash of exactly what the model sees. (It was the body's hash,
    so a heading or title change, or a change to :func:`embedding_text_for`, kept serving the
    vector of another text.)"""
    return hashlib.sha256(b"embed\0" + text.encode()).hexdigest()


def embedding_text(fragment: Fragment) -> str:
    return embedding_text_for(fragment.title, fragment.heading_path, fragment.body,
                              namespace=fragment.namespace, symbol=fragment.symbol)


def embed_fragments(fragments: Sequence[Fragment],
                    generation: EmbeddingGeneration | None = None, *, reuse: bool = True) -> int:
    """Write vectors for the current version of ``fragments`` in their namespace's (or the
    given) generation — one per passage (:meth:`Embedder.passages`) — reusing any vector already
    computed for the same text and model (``reuse=False`` forces encoding, for benchmarks)."""
    written = 0
    by_namespace: dict[str, list[Fragment]] = {}
    for fragment in fragments:
        by_namespace.setdefault(fragment.namespace, []).append(fragment)
    for namespace, group in by_namespace.items():
        gen = generation or active_generation(namespace)
        embedder = embedder_for(gen)
        passages = [embedder.passages(embedding_text(f)) for f in group]
        flat = [text for texts in passages for text in texts]
        vectors = (encode_cached(gen, flat, [vector_key(t) for t in flat]) if reuse
                   else embedder.encode(flat))
        write_embeddings(gen, group, split_rows(vectors, [len(p) for p in passages]))
        written += len(group)
    return written


def split_rows(vectors: np.ndarray, counts: Sequence[int]) -> list[np.ndarray]:
    """The rows of ``vectors`` cut into consecutive groups of ``counts`` (one per fragment)."""
    bounds = np.cumsum([0, *counts])
    return [vectors[bounds[i]:bounds[i + 1]] for i in range(len(counts))]


def encode_cached(generation: EmbeddingGeneration, texts: Sequence[str],
                  hashes: Sequence[str]) -> np.ndarray:
    """Vectors for ``texts``; a text this generation's model already embedded is reused."""
    known = cached_vectors(generation, hashes)
    missing = [i for i, h in enumerate(hashes) if h not in known]
    vectors = np.zeros((len(texts), generation.dim), dtype=np.float32)
    if missing:
        fresh = embedder_for(generation).encode([texts[i] for i in missing])
        for row, i in enumerate(missing):
            vectors[i] = fresh[row]
    for i, h in enumerate(hashes):
        if h in known:
            vectors[i] = known[h]
    if missing:
        cache_vectors(generation, [hashes[i] for i in missing], vectors[missing])
    return vectors


def cached_vectors(generation: EmbeddingGeneration, keys: Sequence[str]
                   ) -> dict[str, np.ndarray]:
    """vector key (:func:`vector_key`) → vector this generation's model already computed for
    that text. Only the cache is asked: an embedding row is keyed by its fragment's content
    hash, which names no one text the model read (a long fragment has several passages)."""
    found = VectorCache.objects.filter(model_name=generation.model_name,
                                       content_hash__in=set(keys))
    return {h: np.asarray(v, dtype=np.float32)
            for h, v in found.values_list("content_hash", "vector")}


def cache_vectors(generation: EmbeddingGeneration, hashes: Sequence[str],
                  vectors: np.ndarray) -> None:
    VectorCache.objects.bulk_create(
        [VectorCache(model_name=generation.model_name, content_hash=h, vector=v)
         for h, v in zip(hashes, vectors, strict=True)],
        ignore_conflicts=True, batch_size=500)


def write_embeddings(generation: EmbeddingGeneration, fragments: Sequence[Fragment],
                     vectors: Sequence[np.ndarray]) -> None:
    """Replace each fragment's vectors in ``generation`` with those of its current version:
    ``vectors[i]`` is fragment i's passage vectors, one row each (a single 1-D vector is its
    head alone)."""
    with transaction.atomic():
        Embedding.objects.filter(generation=generation,
                                 fragment_id__in=[f.pk for f in fragments]).delete()
        Embedding.objects.bulk_create([
            Embedding(org_id=f.org_id, fragment_id=f.pk, fragment_version=f.version,
                      generation=generation, namespace=generation.namespace,
                      scope_ids=f.scope_ids, content_hash=f.content_hash, embedding=vector,
                      passage=passage)
            for f, rows in zip(fragments, vectors, strict=True)
            for passage, vector in enumerate(np.atleast_2d(rows))
        ], batch_size=500)


# --- lexical index -----------------------------------------------------------------------------
def index_path(org: Organization | int) -> Path:
    org_id = org if isinstance(org, int) else org.pk
    return Path(settings.LEXICAL_INDEX_DIR) / f"org-{org_id}"


@cache
def _index_at(path: str) -> LexicalIndex:
    return LexicalIndex(Path(path))


def lexical_index(org: Organization | int) -> LexicalIndex:
    return _index_at(str(index_path(org)))


def lexical_doc(fragment: Fragment, source_paths: Iterable[str] = ()) -> LexicalDoc:
    """The fragment as the lexical index sees it: title lines the body does not already hold
    (a chunk usually starts with its heading or its code header), the body, the identifiers it
    uses, the definitions it holds and the paths it comes from."""
    paths = [p for p in source_paths if p]
    symbols = fragment_symbols(fragment)
    lowered = fragment.body.lower()
    title_lines = dict.fromkeys(line.strip() for line in (
        " > ".join(fragment.heading_path), fragment.title) if line.strip())
    title = "\n".join(line for line in title_lines if line.lower() not in lowered)
    return LexicalDoc(
        fragment_id=fragment.public_id,
        scope_ids=tuple(fragment.scope_ids),
        kind=fragment.kind,
        title=title,
        body=fragment.body,
        identifiers=identifiers_from_text(f"{' '.join(symbols)} {fragment.body}"),
        symbols=" ".join(symbols),
        paths=" ".join(paths),
        messages=message_literals(fragment.body) if fragment.namespace == Namespace.CODE else "",
    )


def fragment_symbols(fragment: Fragment) -> list[str]:
    """Qualified names of the definitions a code fragment holds: its symbol (the enclosing
    definition of a part cut from a long one) and the others its chunk title lists
    (`A.f, A.g +2 more (part 1/3)`)."""
    names = [fragment.symbol] if fragment.symbol else []
    # Without a symbol the title is the file's name, not a definition.
    if fragment.namespace == "code" and fragment.symbol and fragment.title:
        label = re.sub(r"\s*\(part \d+/\d+\)$", "", fragment.title)
        label = re.sub(r"\s*\+\d+ more$", "", label)
        names += [n.strip() for n in label.split(",")
                  if n.strip() and re.fullmatch(r"[\w.:$<>-]+", n.strip())]
    return [n for n in dict.fromkeys(names) if n != "module"]


def stale_fragments(fragment_ids: Iterable[int]) -> list[Fragment]:
    """The active ones of these fragments that lack a vector for their current version."""
    stale = []
    for fragment in Fragment.objects.filter(pk__in=set(fragment_ids),
                                            status=FragmentStatus.ACTIVE):
        generation = active_generation(fragment.namespace)
        current = Embedding.objects.filter(
            generation=generation, fragment_id=fragment.pk,
            fragment_version=fragment.version, scope_ids=fragment.scope_ids,
        ).exists()
        if not current:
            stale.append(fragment)
    return stale


def embed_changed(fragment_ids: Iterable[int]) -> int:
    """After a change: embed what lacks a vector for its current version. (The text follows
    through the change feed: ``contexts.indexes.follower``.)"""
    stale = stale_fragments(fragment_ids)
    return embed_fragments(stale) if stale else 0
