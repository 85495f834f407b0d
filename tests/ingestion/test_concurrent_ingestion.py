"""Two ingestions into one repository at the same time (issue 21): two jobs on two worker
processes, or two checkouts of one tree ingested at once, both finish without a file error and
leave exactly what one ingestion leaves. And ``manage.py ingest`` says so — in its exit code —
when a job finished with files it could not ingest.

Before the target lock (``contexts/ingestion/target_lock.py``) the second run planned every
path as new, embedded it, and failed each file on ``one_document_per_path``.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections, transaction

from accounts.permissions import SYSTEM
from contexts.ingestion import pipeline
from contexts.ingestion.jobs import run_job
from contexts.ingestion.target_lock import one_run_per_target
from contexts.models import (
    Embedding,
    Fragment,
    FragmentVersion,
    IngestionJob,
    JobState,
    SourceDocument,
    SourcePointer,
)
from contexts.usecases import ingestion as ingestion_usecase
from contexts.usecases.ingestion import create_job, enqueue
from tests.conftest import start_worker, stop_worker
from tests.factories import RepositoryFactory

pytestmark = pytest.mark.django_db(transaction=True)

WAITED = "for another ingestion into the same repository to finish"


def topic(n: int, prose: Callable[..., str]) -> str:
    """Three sections distinct per ``n``: two fragments per file."""
    return "\n".join([f"# Topic {n}", "", f"Topic marker osprey{n:03d}.", "",
                      prose(f"{n}-intro", 60), "", "## Part A", "", prose(f"{n}-a", 200), "",
                      "## Part B", "", prose(f"{n}-b", 200), ""])


def tree(sources, topics: int) -> dict[str, str]:
    """Distinct notes, an exact copy of one (collapsed into its fragments) and a module."""
    files = {f"notes/topic-{n:02d}.md": topic(n, sources.prose) for n in range(topics)}
    files["copies/topic-00.md"] = files["notes/topic-00.md"]
    files["src/metrics.py"] = sources.python_module()
    return files


def outcome(repository) -> dict:
    """What ingestion left for a repository, keyed by (path, anchor): comparable across
    repositories (fragment ids and uids differ)."""
    scope = repository.scope
    fragments = Fragment.objects.filter(scope=scope)
    pointers = SourcePointer.objects.filter(document__repository=repository).select_related(
        "fragment", "document")
    return {
        "documents": sorted(SourceDocument.objects.filter(repository=repository)
                            .values_list("path", flat=True)),
        "bodies": {(p.document.path, p.anchor): p.fragment.body for p in pointers},
        "fragments": fragments.count(),
        "distinct_bodies": fragments.values("content_hash").distinct().count(),
        "versions": sorted(FragmentVersion.objects.filter(fragment__scope=scope)
                           .values_list("fragment_id", "number")),
        "head_vectors": sorted(Embedding.objects.filter(fragment__scope=scope, passage=0)
                               .values_list("fragment_id", "fragment_version")),
        "fragment_ids": sorted(fragments.values_list("pk", flat=True)),
    }


def assert_one_ingestion(state: dict, reference: dict) -> None:
    """The same documents, chunks and texts as the reference; no duplicate fragment, and every
    fragment at version 1 with one head vector of version 1."""
    assert state["documents"] == reference["documents"]
    assert state["bodies"] == reference["bodies"]
    assert state["fragments"] == reference["fragments"] == state["distinct_bodies"]
    assert state["versions"] == [(pk, 1) for pk in state["fragment_ids"]]
    assert state["head_vectors"] == [(pk, 1) for pk in state["fragment_ids"]]


def waited(job: IngestionJob) -> bool:
    return any(WAITED in warning["reason"] for warning in job.warnings)


def in_thread(function: Callable[[], object], results: list) -> threading.Thread:
    """Run ``function`` on its own thread (its own database connection, closed after)."""
    def body() -> None:
        try:
            results.append(function())
        except BaseException as exc:  # noqa: BLE001 - the test looks at what came back
            results.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


# --- two runs in one process, from two checkouts -----------------------------------------------
def test_two_checkouts_ingested_at_once_converge_on_one_ingestion(
        ingest_target, write_tree, tmp_path, sources, monkeypatch):
    t = ingest_target
    files = tree(sources, topics=8)
    checkouts = [write_tree(tmp_path / name, files) for name in ("checkout-a", "checkout-b")]
    jobs = [create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator)
            for root in checkouts]
    # Both runs enter the pipeline at the same moment: without the lock both planned every
    # path as new, and the second to commit failed each file on one_document_per_path.
    both = threading.Barrier(2)
    run = pipeline.Ingestor.run

    def together(self: pipeline.Ingestor, files_):
        both.wait(timeout=60)
        return run(self, files_)

    monkeypatch.setattr(pipeline.Ingestor, "run", together)
    results: list = []
    threads = [in_thread(lambda pk=job.pk: run_job(pk), results) for job in jobs]
    for thread in threads:
        thread.join(timeout=240)
    assert not [r for r in results if isinstance(r, BaseException)], results
    first, second = sorted(results, key=waited)
    for job in (first, second):
        assert job.state == JobState.DONE and job.errors == [], job.errors
        assert job.files_done == job.files_total == len(files)
    assert not waited(first) and waited(second)
    # The second run read nothing but hashes: every document unchanged, nothing embedded.
    assert second.stats.encoded_texts == 0
    assert second.fragments_created == second.fragments_updated == 0
    assert second.fragments_unchanged == first.fragments_created + first.duplicates_collapsed
    assert first.duplicates_collapsed == 2  # the copy's two sections

    monkeypatch.setattr(pipeline.Ingestor, "run", run)
    alone = RepositoryFactory(org=t.org)
    reference = run_job(create_job(SYSTEM, alone.scope, str(checkouts[0]),
                                   created_by=t.creator).pk)
    assert reference.state == JobState.DONE and reference.errors == []
    assert_one_ingestion(outcome(t.repo), outcome(alone))


def test_a_run_waits_for_its_repository_and_not_for_another(
        ingest_target, write_tree, tmp_path, sources):
    """The lock is the repository's: a run into another repository of the organization goes
    ahead while it is held; the run into the held repository starts when it is let go, and
    says how long it waited."""
    t = ingest_target
    root = write_tree(tmp_path / "small", {"notes/one.md": topic(1, sources.prose)})
    other = RepositoryFactory(org=t.org)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with one_run_per_target(t.org.pk, t.repo.pk):
            held.set()
            release.wait(timeout=120)

    results: list = []
    holding = in_thread(holder, results)
    assert held.wait(timeout=30)
    elsewhere = run_job(create_job(SYSTEM, other.scope, str(root), created_by=t.creator).pk)
    assert elsewhere.state == JobState.DONE and not waited(elsewhere)

    job = create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator)
    waiting = in_thread(lambda: run_job(job.pk), results)
    waiting.join(timeout=3)
    assert waiting.is_alive() and IngestionJob.objects.get(pk=job.pk).files_done == 0
    release.set()
    holding.join(timeout=30)
    waiting.join(timeout=120)
    assert not [r for r in results if isinstance(r, BaseException)], results
    done = IngestionJob.objects.get(pk=job.pk)
    assert done.state == JobState.DONE and done.errors == [] and waited(done)
    assert done.fragments_created == 2


# --- manage.py ingest: a job with file errors is not a success ---------------------------------
@pytest.fixture
def failing_file(monkeypatch) -> str:
    """One file of the tree fails in the pipeline (which reports it per file and goes on)."""
    path = "notes/broken.md"
    normalize = pipeline.normalize

    def fails_for_one(name: str, raw: bytes):
        if name == path:
            raise ValueError("this file cannot be read")
        return normalize(name, raw)

    monkeypatch.setattr(pipeline, "normalize", fails_for_one)
    return path


@pytest.fixture
def worker_thread(monkeypatch) -> Iterator[list]:
    """``--wait`` without a Celery worker: a queued job runs on a thread once its transaction
    commits, as a worker would pick it up (the worker path itself is tested below)."""
    results: list = []
    threads: list[threading.Thread] = []

    def enqueue_here(job: IngestionJob) -> None:
        transaction.on_commit(
            lambda: threads.append(in_thread(lambda: run_job(job.pk), results)))

    monkeypatch.setattr(ingestion_usecase, "enqueue", enqueue_here)
    yield results
    for thread in threads:
        thread.join(timeout=120)


@pytest.mark.parametrize("mode", ["--inline", "--wait"])
def test_the_cli_exits_non_zero_and_counts_the_files_that_failed(
        mode, ingest_target, write_tree, tmp_path, sources, failing_file, worker_thread):
    t = ingest_target
    root = write_tree(tmp_path / "tree", {
        "notes/one.md": topic(1, sources.prose), "notes/two.md": topic(2, sources.prose),
        failing_file: topic(3, sources.prose)})
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match=r"^1 of 3 files failed to ingest$") as raised:
        call_command("ingest", str(root), "--org", t.org.slug, "--repo", t.repo.slug, mode,
                     stdout=out, stderr=err)
    assert raised.value.returncode == 1  # what manage.py exits with
    assert f"error {failing_file}: ValueError: this file cannot be read" in err.getvalue()
    assert "done: 3 files, 4 created" in out.getvalue()
    job = IngestionJob.objects.get()
    assert job.state == JobState.DONE and len(job.errors) == 1

    # Once the file is gone the same command succeeds.
    (root / failing_file).unlink()
    call_command("ingest", str(root), "--org", t.org.slug, "--repo", t.repo.slug, mode,
                 stdout=io.StringIO(), stderr=io.StringIO())


# --- two jobs on two worker processes ----------------------------------------------------------
@pytest.fixture
def worker(services, settings) -> Iterator[None]:
    """One Celery worker with two processes (two jobs run at once), small file groups and this
    test's index directory."""
    process = start_worker(services, name="concurrent", concurrency=2, extra_env={
        "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR),
        "CONTEXTS_INGEST_BATCH": "8",  # a group of 8 chunks ≈ 4 files: many commits per job
    })
    try:
        yield
    finally:
        stop_worker(process)


def wait_for_jobs(job_ids: list[int], timeout: float) -> list[IngestionJob]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = list(IngestionJob.objects.filter(pk__in=job_ids).order_by("pk"))
        if all(job.state in (JobState.DONE, JobState.FAILED) for job in jobs):
            return jobs
        time.sleep(0.2)
    raise AssertionError(f"jobs {job_ids} did not finish within {timeout} s")


@pytest.mark.slow
def test_two_jobs_on_two_worker_processes_converge_on_one_ingestion(
        ingest_target, write_tree, tmp_path, sources, worker):
    t = ingest_target
    files = tree(sources, topics=24)
    root = write_tree(tmp_path / "corpus", files)
    jobs = [create_job(SYSTEM, t.repo.scope, str(root), created_by=t.creator) for _ in range(2)]
    for job in jobs:
        enqueue(job)  # autocommit: published at once, one to each worker process
    finished = wait_for_jobs([job.pk for job in jobs], timeout=300)
    for job in finished:
        assert job.state == JobState.DONE and job.errors == [], job.errors
        assert job.files_done == job.files_total == len(files)
    assert sorted(waited(job) for job in finished) == [False, True]
    second = next(job for job in finished if waited(job))
    assert second.fragments_created == second.fragments_updated == 0

    # The same tree once, alone, into another repository (the vector cache makes it cheap).
    alone = RepositoryFactory(org=t.org)
    reference = create_job(SYSTEM, alone.scope, str(root), created_by=t.creator)
    enqueue(reference)
    [reference] = wait_for_jobs([reference.pk], timeout=300)
    assert reference.state == JobState.DONE and reference.errors == []
    assert_one_ingestion(outcome(t.repo), outcome(alone))
    assert len(outcome(t.repo)["documents"]) == len(files)
