"""Use counters: how often each fragment was retrieved, counted off the request path.

Three steps, each batching the one before:

1. A retrieval adds its returned fragments to a counter in its own process, after the response
   is sent (a dict update: microseconds).
2. That counter goes to one Redis hash, in one pipelined round trip, at most once a second per
   process (:data:`PUSH_SECONDS`), when the process exits, and whenever this process reads or
   flushes the counts. Pushing after every retrieval cost ~0.6 ms of the web worker's time,
   spent while the next request's forward pass runs on two cores.
3. The periodic task ``flush_use_counters`` folds the hash into the fragments'
   ``retrieved_count`` / ``last_retrieved_at`` with one UPDATE. A Celery message per retrieval
   cost the web worker several milliseconds of CPU (measured: ~6 ms of the next request's
   latency on two cores) and one row update per fragment per retrieval; batching turns a
   popular fragment's many retrievals into one update per flush.

The counters are advisory (staleness nudges rank by them): while Redis is down retrievals skip
the count, a process killed outright loses at most its last second of counts, and
``last_retrieved_at`` is the flush's time, at most one flush interval late.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Collection, Iterator

import redis
from django.db import connection, transaction
from django.utils import timezone

from contexts.kernel.availability import cache_redis, redis_call

PENDING = "contexts:usage:retrieved"  # fragment pk → retrievals not yet in the database
PUSH_SECONDS = 1.0

_counted: Counter[int] = Counter()  # this process's retrievals not yet in Redis
_counted_lock = threading.Lock()
_pushed_at = float("-inf")


def count_retrievals(fragment_ids: Collection[int]) -> None:
    """Count one retrieval of each fragment; in Redis within :data:`PUSH_SECONDS`."""
    if not fragment_ids:
        return
    with _counted_lock:
        _counted.update(fragment_ids)
        due = time.monotonic() - _pushed_at >= PUSH_SECONDS
    if due:
        push()


def push() -> None:
    """This process's counts into the Redis hash (dropped while Redis is unreachable)."""
    global _pushed_at
    with _counted_lock:
        counts = dict(_counted)
        _counted.clear()
        _pushed_at = time.monotonic()
    if not counts:
        return

    def add() -> None:
        pipe = cache_redis().pipeline(transaction=False)
        for pk, n in counts.items():
            pipe.hincrby(PENDING, str(pk), n)
        pipe.execute()

    redis_call(add, None, "use counters")


@atexit.register
def _push_at_exit() -> None:
    # Quietly: at exit logging may already be closed, and Redis gone with the rest of the
    # deployment; losing the last second's counts is the documented price.
    with contextlib.suppress(Exception), _logging_disabled():
        push()


@contextlib.contextmanager
def _logging_disabled() -> Iterator[None]:
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def pending() -> dict[int, int]:
    """fragment pk → retrievals not yet in the database (this process's pushed first)."""
    push()
    return {int(pk): int(n) for pk, n in cache_redis().hgetall(PENDING).items()}


def flush() -> int:
    """Fold the pending counts into the fragments; the number of fragments updated.

    The hash is renamed away first (atomic), so retrievals counted meanwhile start a new one
    and nothing is counted twice; if the update fails, the batch goes back into the hash.
    Other processes' counts of the last second wait for the next flush."""
    push()
    client = cache_redis()
    batch = f"{PENDING}:flushing:{uuid.uuid4().hex}"
    try:
        client.rename(PENDING, batch)
    except redis.ResponseError:  # "no such key": nothing was retrieved since the last flush
        return 0
    counts = {int(pk): int(n) for pk, n in client.hgetall(batch).items()}
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                """
                UPDATE contexts_fragment f
                SET retrieved_count = f.retrieved_count + c.n, last_retrieved_at = %s
                FROM unnest(%s::bigint[], %s::int[]) AS c(id, n)
                WHERE f.id = c.id
                """,
                [timezone.now(), list(counts), list(counts.values())])
            updated = cursor.rowcount
    except Exception:
        pipe = client.pipeline(transaction=False)
        for pk, n in counts.items():
            pipe.hincrby(PENDING, str(pk), n)
        pipe.execute()
        raise
    finally:
        client.delete(batch)
    return updated
