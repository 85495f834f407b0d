"""Writer lock retries and cross-process visibility of commits."""

from __future__ import annotations

import json
import pickle
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from contexts.search import IndexLockBusy, LexicalDoc, LexicalIndex

# The `make_doc` and `spawn_python` fixtures (tests/search/conftest.py).
MakeDoc = Callable[..., LexicalDoc]
SpawnPython = Callable[..., "subprocess.Popen[str]"]

# Holds the writer lock of the index at argv[1] until a line arrives on stdin (or it is killed).
HOLD_LOCK = """
import sys
from pathlib import Path
from contexts.search import open_index
index = open_index(Path(sys.argv[1]))
writer = index.writer(heap_size=15_000_000, num_threads=1)
print("locked", flush=True)
sys.stdin.readline()
writer.rollback()
writer.wait_merging_threads()
print("released", flush=True)
"""

# A long-lived reader/writer process driven by JSON commands, one per line.
WORKER = """
import json, sys
from pathlib import Path
from contexts.search import LexicalDoc, LexicalIndex
index = LexicalIndex(Path(sys.argv[1]))
print(json.dumps({"ready": index.count()}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "search":
        out = {"count": index.count(), "hits": index.search(cmd["q"], cmd["scopes"])}
    elif cmd["op"] == "upsert":
        doc = LexicalDoc(cmd["id"], tuple(cmd["scopes"]), "note", "", cmd["body"], "")
        out = {"written": index.upsert([doc])}
    else:
        break
    print(json.dumps(out), flush=True)
"""


def _ask(proc: subprocess.Popen[str], **cmd: object) -> dict:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(cmd) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "child died"
    return json.loads(line)


def _start(
    spawn_python: SpawnPython, script: str, path: Path, expect: str
) -> subprocess.Popen[str]:
    proc = spawn_python(script, str(path))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert expect in line, (line, proc.stderr.read() if proc.stderr else "")
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


class SleepRecorder:
    """Stands in for time.sleep in the retry loop: records delays, optionally really sleeps."""

    def __init__(self, real: bool = False) -> None:
        self.delays: list[float] = []
        self.real = real

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.real:
            time.sleep(seconds)


# -- writer lock ----------------------------------------------------------------------------------


def test_second_writer_in_same_process_retries_then_raises(
    index_path: Path, make_doc: MakeDoc
) -> None:
    holder = LexicalIndex(index_path)
    contender = LexicalIndex(index_path, lock_retries=4, lock_backoff=0.01)
    contender._sleep = SleepRecorder()
    with holder._writer():
        with pytest.raises(IndexLockBusy):
            contender.upsert([make_doc("frag_a", "blocked")])
    delays = contender._sleep.delays
    assert len(delays) == 4  # retried lock_retries times before giving up
    # Exponential backoff with jitter in [0.5, 1.0] of the nominal delay.
    for attempt, delay in enumerate(delays):
        nominal = 0.01 * 2**attempt
        assert 0.5 * nominal <= delay <= nominal
    # Once the holder committed and let go, the same instance writes immediately.
    contender._sleep = SleepRecorder()
    contender.upsert([make_doc("frag_a", "unblocked")])
    assert contender._sleep.delays == []
    assert contender.count() == 1


def test_second_writer_in_other_process_retries_then_raises(
    index_path: Path, make_doc: MakeDoc, spawn_python: SpawnPython
) -> None:
    LexicalIndex(index_path).create()  # before the child opens it
    holder = _start(spawn_python, HOLD_LOCK, index_path, "locked")
    try:
        contender = LexicalIndex(index_path, lock_retries=2, lock_backoff=0.01)
        recorder = contender._sleep = SleepRecorder(real=True)
        for op in (
            lambda: contender.upsert([make_doc("frag_a", "x")]),
            lambda: contender.delete(["frag_a"]),
            contender.clear,
        ):
            recorder.delays.clear()
            with pytest.raises(IndexLockBusy) as info:
                op()
            assert len(recorder.delays) == 2
            assert "LockBusy" in str(info.value.__cause__)

        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("release\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        contender.upsert([make_doc("frag_a", "after release")])
        assert contender.count() == 1
    finally:
        _stop(holder)


def test_lock_of_a_killed_writer_is_released(
    index_path: Path, make_doc: MakeDoc, spawn_python: SpawnPython
) -> None:
    """A SIGKILLed Celery worker must not wedge the index (tantivy uses an OS-level lock)."""
    LexicalIndex(index_path).create()
    holder = _start(spawn_python, HOLD_LOCK, index_path, "locked")
    try:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        LexicalIndex(index_path, lock_retries=0).upsert([make_doc("frag_a", "after kill")])
    finally:
        _stop(holder)


def test_retry_succeeds_when_lock_is_released_during_backoff(
    index_path: Path, make_doc: MakeDoc
) -> None:
    holder = LexicalIndex(index_path)
    contender = LexicalIndex(index_path, lock_retries=10, lock_backoff=0.02, lock_backoff_max=0.1)
    contender._sleep = SleepRecorder(real=True)
    acquired = threading.Event()

    def hold_briefly() -> None:
        with holder._writer():
            acquired.set()
            time.sleep(0.25)

    thread = threading.Thread(target=hold_briefly)
    thread.start()
    try:
        assert acquired.wait(5)
        contender.upsert([make_doc("frag_a", "eventually written")])
    finally:
        thread.join()
    assert contender._sleep.delays, "expected at least one retry"
    assert contender.count() == 1


def test_index_lock_busy_survives_pickling() -> None:
    # Celery pickles/serialises exceptions of failed tasks; autoretry_for matches the class.
    exc = pickle.loads(pickle.dumps(IndexLockBusy("busy")))
    assert isinstance(exc, IndexLockBusy)
    assert str(exc) == "busy"


# -- visibility across processes ------------------------------------------------------------------


def test_reader_in_other_process_sees_commits(
    index_path: Path, make_doc: MakeDoc, spawn_python: SpawnPython
) -> None:
    writer = LexicalIndex(index_path)
    writer.create()
    reader = _start(spawn_python, WORKER, index_path, "ready")
    try:
        assert _ask(reader, op="search", q="kestrel", scopes=[1]) == {"count": 0, "hits": []}

        writer.upsert([make_doc("frag_a", "the kestrel hovers")])
        reply = _ask(reader, op="search", q="kestrel", scopes=[1])
        assert reply["count"] == 1
        assert [hit[0] for hit in reply["hits"]] == ["frag_a"]

        writer.upsert([make_doc("frag_a", "the falcon stoops")])
        assert _ask(reader, op="search", q="kestrel", scopes=[1])["hits"] == []
        assert [h[0] for h in _ask(reader, op="search", q="falcon", scopes=[1])["hits"]] == [
            "frag_a"
        ]

        writer.delete(["frag_a"])
        assert _ask(reader, op="search", q="falcon", scopes=[1]) == {"count": 0, "hits": []}
    finally:
        _stop(reader)


def test_commits_from_other_process_are_seen_here(
    index_path: Path, spawn_python: SpawnPython
) -> None:
    """The production direction: a Celery worker writes, a long-lived web process reads."""
    reader = LexicalIndex(index_path).create()
    assert reader.count() == 0
    worker = _start(spawn_python, WORKER, index_path, "ready")
    try:
        assert reader.search("osprey", [7]) == []
        assert _ask(worker, op="upsert", id="frag_w", scopes=[7], body="an osprey dives") == {
            "written": 1
        }
        hits = reader.search("osprey", [7])
        assert [h[0] for h in hits] == ["frag_w"]
        # Same score in both processes: same index, same statistics.
        remote = _ask(worker, op="search", q="osprey", scopes=[7])["hits"]
        assert remote == [[fid, score] for fid, score in hits]
    finally:
        _stop(worker)
