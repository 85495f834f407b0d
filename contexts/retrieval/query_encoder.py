"""Where the query's forward pass runs: a child process (default) or a thread.

The API starts embedding the query first and resolves scopes, reads pins and waits for tantivy
meanwhile. On a thread that overlap is mostly lost: torch holds the GIL while it computes, so
the forward pass and the request's own Python take turns (measured on 2 cores: a 20 ms pass
took 30 ms beside scope resolution). A child process per web process — spawned when the web
entry point loads (``warm``) or on first use, holding its own copy of the model — runs it truly
in parallel (24 ms for both together).
``CONTEXTS_QUERY_ENCODER=thread`` keeps everything in-process (less memory, no child).

If the child dies, the request falls back to the thread and the next one spawns a new child.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from contexts.ingestion.embed import ModelSpec, encode_query_with, resolve_model

logger = logging.getLogger(__name__)

# Embedder.encode serialises forward passes per model, so more threads would only queue.
_threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed-query")
_process: ProcessPoolExecutor | None = None
_process_pid = 0  # the process that created _process (a pool does not survive a fork)
_process_lock = threading.Lock()


MODES = ("process", "thread")


def mode() -> str:
    value = settings.RETRIEVAL["query_encoder"]
    if value not in MODES:
        raise ImproperlyConfigured(f"CONTEXTS_QUERY_ENCODER must be one of {MODES}, not {value!r}")
    return value


def _pool() -> ProcessPoolExecutor:
    global _process, _process_pid
    with _process_lock:
        if _process is None or _process_pid != os.getpid():
            # spawn, not fork: a forked child would share the parent's database connections
            # and torch's thread pools.
            _process = ProcessPoolExecutor(max_workers=1,
                                           mp_context=multiprocessing.get_context("spawn"))
            _process_pid = os.getpid()
        return _process


def warm() -> None:
    """Start the child and load its models now (a few seconds, in the background) rather than
    on the first request. Called by the WSGI and ASGI entry points."""
    if mode() == "process":
        submit([resolve_model(name) for name in set(settings.EMBEDDING_MODELS.values())], "")


def _discard(pool: ProcessPoolExecutor) -> None:
    global _process
    with _process_lock:
        if _process is pool:
            _process = None
    pool.shutdown(wait=False, cancel_futures=True)


def submit(specs: Sequence[ModelSpec], text: str) -> Future[list[np.ndarray]]:
    """Start embedding ``text`` with each model; the future's result is one vector per spec."""
    if mode() == "process":
        pool = _pool()
        try:
            return pool.submit(encode_query_with, list(specs), text)
        except (BrokenProcessPool, RuntimeError):
            _discard(pool)
            logger.warning("query encoder process unavailable; embedding in-process")
    return _threads.submit(encode_query_with, list(specs), text)


def result(future: Future[list[np.ndarray]], specs: Sequence[ModelSpec],
           text: str) -> list[np.ndarray]:
    """The vectors; if the child died on the way, embedded here instead."""
    try:
        return future.result()
    except BrokenProcessPool:
        if _process is not None:
            _discard(_process)
        logger.warning("query encoder process died; embedding in-process")
        return encode_query_with(list(specs), text)
