"""Red-team finding 4: a dead worker took the whole ``make run`` stack down, and its job was lost.

``kill -9`` of Celery's main process made ``runstack`` stop web, beat, PostgreSQL and Redis; the
embedded Redis came back empty, and the job showed "running 43/100" forever. Now:

- ``runstack`` restarts a worker (or beat) that dies, with a back-off, and web stays up;
- a RUNNING job whose worker died is found through its lease (stale heartbeat, free advisory
  lock) and re-queued, well before the broker's visibility timeout would bring its message back,
  and completes with no duplicate fragments;
- the embedded Redis keeps an append-only file: an unacknowledged message survives Redis being
  killed.

Everything is real: a ``runstack`` subprocess with its own embedded services, Celery workers
killed with SIGKILL, a Redis server killed and started again.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.urls import reverse
from kombu import Connection

from accounts.permissions import SYSTEM
from contexts.celery import app
from contexts.models import Fragment, IngestionJob, JobState
from contexts.services.job_leases import pending_job_ids
from contexts.stack.servers import EmbeddedRedis, free_port
from contexts.tasks import reap_stale_jobs
from contexts.usecases.ingestion import create_job, enqueue
from tests.conftest import ROOT, start_worker, stop_worker
from tests.factories import OrganizationFactory, RepositoryFactory, UserFactory
from tests.ingestion.test_jobs_worker import assert_clean, live_members, state_of, topic, wait_for

pytestmark = pytest.mark.slow

FILES = 30
# The command under test; a check against the old code runs the old module the same way.
RUNSTACK = [sys.executable, "manage.py", "runstack"]


# --- runstack: a killed worker is restarted, web stays up --------------------------------------


class Output:
    """A child's merged stdout/stderr, read by a thread so the pipe never fills."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for raw in process.stdout:
            with self._changed:
                self.lines.append(raw.decode(errors="replace").rstrip())
                self._changed.notify_all()
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[str], bool], timeout: float, after: int = 0) -> str:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines[after:]:
                    if predicate(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.closed:
                    why = "the process exited" if self.closed else "timed out"
                    raise AssertionError(f"{why}; output so far:\n{self.text()}")
                self._changed.wait(remaining)

    def text(self) -> str:
        return "\n".join(self.lines[-80:])


@pytest.fixture
def runstack() -> Iterator[tuple[subprocess.Popen, Output, int]]:
    """``manage.py runstack`` on free ports with its own var dir (embedded PostgreSQL and
    Redis started by it); stopped with SIGTERM, as Ctrl-C would, at the end."""
    # Not tmp_path: the postgres system user must traverse it (as in tests/conftest.py).
    var_dir = Path(tempfile.mkdtemp(prefix="contexts-redteam4-")) / "var"
    web_port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "REDIS_URL", "CONTEXTS_INDEX_DIR")}
    env.update({"CONTEXTS_VAR_DIR": str(var_dir), "CONTEXTS_PG_PORT": str(free_port()),
                "CONTEXTS_REDIS_PORT": str(free_port()), "WEB_CONCURRENCY": "1",
                "DJANGO_SETTINGS_MODULE": "contexts.settings", "PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen([*RUNSTACK, "--port", str(web_port), "--no-demo"], cwd=ROOT,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    output = Output(process)
    try:
        yield process, output, web_port
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        subprocess.run(["rm", "-rf", str(var_dir.parent)], check=False)


def web_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _answers(port: int, path: str) -> bool:
    try:
        return web_status(port, path) == 200
    except ConnectionRefusedError:
        return False


def started_pid(line: str) -> int:
    return int(line.rsplit("(pid ", 1)[1].rstrip(")"))


def test_runstack_restarts_a_killed_worker_and_keeps_web_up(runstack):
    process, output, port = runstack
    output.wait_for(lambda line: "Contexts is up" in line, timeout=240)
    login = reverse("console:login")
    # The banner comes once /readyz answers; the login page answers too.
    wait_for("web to answer", lambda: _answers(port, login), timeout=60, interval=0.2)
    worker_line = output.wait_for(lambda line: line.startswith("started worker"), timeout=1)
    worker = started_pid(worker_line)
    mark = len(output.lines)

    killed = time.monotonic()
    os.kill(worker, signal.SIGKILL)  # the main process only, as in the finding
    notice = output.wait_for(lambda line: line.startswith("worker (pid"), timeout=30, after=mark)
    assert f"worker (pid {worker}) was killed by SIGKILL; restarting it in 1 s" in notice
    assert web_status(port, login) == 200  # while the worker is down
    restarted = started_pid(output.wait_for(lambda line: line.startswith("started worker"),
                                            timeout=30, after=mark))
    took = time.monotonic() - killed
    assert restarted != worker
    # Web answers now too, and the stack is still up.
    assert web_status(port, login) == 200
    assert process.poll() is None
    time.sleep(2)  # the new worker is still up a moment later (not crash-looping)
    assert Path(f"/proc/{restarted}").exists() and process.poll() is None
    print(f"\nworker restarted {took:.1f} s after kill -9")

    process.send_signal(signal.SIGTERM)  # Ctrl-C still stops everything
    assert process.wait(timeout=60) == 0
    output.wait_for(lambda line: line == "stopped.", timeout=5)
    assert not Path(f"/proc/{restarted}").exists() or "Z" in _state(restarted)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


# --- a job whose worker dies is re-queued through its lease and completes ----------------------


def prose(seed: str, words: int) -> str:
    rng = random.Random(seed)
    vocabulary = [f"{a}{b}" for a in ("fen", "gal", "mor", "tas", "vel", "quo", "rin", "sab")
                  for b in ("dar", "lix", "mon", "pel", "tor", "wyn", "zek", "cor")]
    lines, line = [], []
    for _ in range(words):
        line.append(rng.choice(vocabulary))
        if len(line) == 14:
            lines.append(" ".join(line) + ".")
            line = []
    return "\n".join([*lines, " ".join(line) + "."])


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_is_killed_is_requeued_by_its_lease_and_completes(
        services, settings, tmp_path):
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    corpus = tmp_path / "corpus"
    for n in range(FILES):
        path = corpus / "notes" / f"topic-{n:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(topic(n, prose))
    repo = RepositoryFactory(org=OrganizationFactory())
    creator = UserFactory()
    # The production visibility timeout (300 s): the broker alone would bring the message back
    # only after the test's limits, so a completion here is the lease's doing.
    env = {"CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR), "CONTEXTS_INGEST_BATCH": "8",
           "CONTEXTS_JOB_HEARTBEAT_SECONDS": "0.5"}
    first = start_worker(services, name="doomed4", extra_env=env)
    rescuer = None
    try:
        job = create_job(SYSTEM, repo.scope, str(corpus), created_by=creator)
        enqueue(job)  # autocommit: published at once

        def mid_job() -> IngestionJob | None:
            current = IngestionJob.objects.get(pk=job.pk)
            assert current.state != JobState.DONE, "the job finished before it could be killed"
            running = current.state == JobState.RUNNING
            return current if running and current.files_done and current.heartbeat_at else None

        wait_for("progress and a heartbeat in the first worker", mid_job, timeout=120,
                 interval=0.02)
        os.kill(first.pid, signal.SIGKILL)  # the main process; its pool child dies with it
        first.wait(timeout=10)
        killed = time.monotonic()
        wait_for("the killed worker's pool to be gone", lambda: not live_members(first.pid),
                 timeout=10)
        orphaned = IngestionJob.objects.get(pk=job.pk)
        assert orphaned.state == JobState.RUNNING and orphaned.files_done < FILES

        rescuer = start_worker(services, name="rescuer4", extra_env=env)
        # What beat runs every 30 s, with a 1 s lease so the test need not wait a minute.
        settings.JOB_LEASE_SECONDS = 1

        def requeued() -> bool:
            report = reap_stale_jobs()
            return job.public_id in report["requeued"]

        wait_for("the lease to re-queue the job", requeued, timeout=30, interval=0.5)
        requeue_took = time.monotonic() - killed
        done = wait_for("the re-queued job to finish", lambda: _finished(job.pk), timeout=150)
        print(f"\nkilled at {orphaned.files_done}/{FILES} files; re-queued "
              f"{requeue_took:.1f} s and done {time.monotonic() - killed:.1f} s after the kill")
    finally:
        stop_worker(first)
        if rescuer is not None:
            stop_worker(rescuer)

    assert done.attempts == 2 and done.errors == [] and done.files_done == FILES
    state = state_of(repo.scope)
    assert_clean(state)  # no duplicate fragments, one version and one vector each
    assert {path for path, _anchor in state["bodies"]} == {
        f"notes/topic-{n:02d}.md" for n in range(FILES)}
    assert done.fragments_created + done.fragments_unchanged == state["fragments"]
    assert done.fragments_unchanged > 0  # the rerun kept what the first attempt committed
    assert Fragment.objects.filter(scope=repo.scope).count() == state["fragments"]


def _finished(job_id: int) -> IngestionJob | None:
    job = IngestionJob.objects.get(pk=job_id)
    assert job.state != JobState.FAILED, job.errors
    return job if job.state == JobState.DONE else None


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_worker_keeps_dying_fails_with_a_reason(settings):
    """A RUNNING job with no live worker and no attempts left is failed, not re-queued."""
    settings.JOB_LEASE_SECONDS = 0
    repo = RepositoryFactory(org=OrganizationFactory())
    job = IngestionJob.objects.create(org=repo.org, scope=repo.scope, source="/nowhere",
                                      state=JobState.RUNNING, attempts=settings.JOB_MAX_ATTEMPTS)
    IngestionJob.objects.filter(pk=job.pk).update(started_at="2020-01-01T00:00:00Z")
    report = reap_stale_jobs()
    job.refresh_from_db()
    assert report["failed"] == [job.public_id] and report["requeued"] == []
    assert job.state == JobState.FAILED and job.finished_at is not None
    assert "stopped 3 times" in job.errors[-1]["reason"]


def test_beat_runs_the_lease_check(settings):
    app.loader.import_default_modules()
    entry = settings.CELERY_BEAT_SCHEDULE["jobs-reap-stale"]
    assert entry["task"] in app.tasks and entry["schedule"] <= settings.JOB_LEASE_SECONDS
    assert settings.JOB_HEARTBEAT_SECONDS < settings.JOB_LEASE_SECONDS


@pytest.mark.django_db(transaction=True)
def test_a_queued_job_whose_message_is_gone_is_published_again(services, settings):
    """Redis lost the message (or publishing failed): past its queued lease the job is
    published again — once, since the broker then holds a message for it."""
    settings.JOB_QUEUED_LEASE_SECONDS = 0
    repo = RepositoryFactory(org=OrganizationFactory())
    job = IngestionJob.objects.create(org=repo.org, scope=repo.scope, source="/nowhere")
    client = redis.Redis.from_url(app.conf.broker_url)
    try:
        assert job.pk not in pending_job_ids()
        assert reap_stale_jobs()["republished"] == [job.public_id]
        assert job.pk in pending_job_ids()
        assert reap_stale_jobs()["republished"] == []  # its message is there now
    finally:
        for entry in client.lrange(app.conf.task_default_queue, 0, -1):
            if json.loads(entry)["headers"].get("argsrepr") == f"({job.pk},)":
                client.lrem(app.conf.task_default_queue, 1, entry)  # no worker should run it
        assert job.pk not in pending_job_ids()
        client.close()


# --- the embedded Redis keeps an unacknowledged message across a kill -9 ------------------------


def test_an_unacked_message_survives_redis_being_killed(tmp_path):
    server = EmbeddedRedis(tmp_path, free_port())
    server.start()
    options = {"visibility_timeout": 1}
    try:
        with Connection(server.url, transport_options=options) as conn:
            queue = conn.SimpleQueue("redteam4")
            queue.put({"job": 43})
            taken = queue.get(timeout=5)  # delivered, never acknowledged: the worker "dies"
            assert taken.payload == {"job": 43}
            pid = server.status().pid
            os.kill(pid, signal.SIGKILL)  # no shutdown save: only the AOF keeps it
        wait_for("Redis to be gone", lambda: not server.status().running, timeout=10)
        server.start()
        client = redis.Redis.from_url(server.url)
        try:
            assert client.hlen("unacked") == 1
        finally:
            client.close()
        time.sleep(1.1)  # past the visibility timeout
        with Connection(server.url, transport_options=options) as conn:
            conn.default_channel.qos.restore_visible()  # what a worker's restore sweep does
            message = conn.SimpleQueue("redteam4").get(timeout=5)
            assert message.payload == {"job": 43} and message.delivery_info["redelivered"]
            message.ack()
    finally:
        server.stop()
