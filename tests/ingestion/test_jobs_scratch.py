import time
import pytest
from accounts.permissions import SYSTEM
from contexts import indexing
from contexts.models import IngestionJob, Fragment, FragmentVersion, Embedding
from contexts.services.jobs import create_job, enqueue
from tests.conftest import start_worker, stop_worker
from tests.ingestion.test_jobs_worker import topic, state_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_double(ingest_target, services, settings, tmp_path, write_tree, sources):
    root = write_tree(tmp_path / "c", {f"n/t{n:02d}.md": topic(n, sources.prose) for n in range(60)})
    env = {"CELERY_VISIBILITY_TIMEOUT": "5", "CONTEXTS_INDEX_DIR": str(settings.LEXICAL_INDEX_DIR), "CONTEXTS_INGEST_BATCH": "8"}
    w = start_worker(services, name="double", concurrency=2, extra_env=env)
    try:
        t = ingest_target
        job = create_job(SYSTEM, t.repo.scope, str(root))
        t0 = time.monotonic()
        enqueue(job)
        tl = []
        while time.monotonic() - t0 < 120:
            j = IngestionJob.objects.get(pk=job.pk)
            tl.append((round(time.monotonic() - t0, 1), j.files_done, j.attempts, j.state))
            if j.state in ("done", "failed"):
                break
            time.sleep(0.5)
        time.sleep(15)
        j = IngestionJob.objects.get(pk=job.pk)
        print(tl)
        print(j.state, j.attempts, j.errors, j.fragments_created, j.fragments_unchanged, j.duplicates_collapsed)
        s = state_of(t.repo.scope)
        print(s["fragments"], s["distinct_bodies"], len(s["bodies"]), len(s["versions"]), len(s["embeddings"]))
        print(indexing.lexical_index(t.org).count())
        print((services.root / "worker-double.log").read_text()[-6000:])
    finally:
        stop_worker(w)
