"""Authority is computed when a bulk ingest ends, not only at night (issue 40, item 7).

A fresh install's persona comparison showed identical lists: every fragment's authority was 0
until the nightly PageRank (beat, 3:00). Now a job that wrote fragments queues its
organization's authority when it ends (``contexts.tasks.after_bulk_write``, in the bulk lane),
and ``manage.py ingest --inline`` computes it in its own process. Freshness needs no pass: it
is computed at query time from each fragment's last edit or verification.
"""

from __future__ import annotations

import time

import pytest

from accounts.permissions import SYSTEM
from contexts.models import Fragment, IngestionJob, JobState, Link
from contexts.usecases import ingestion
from tests.factories import OrganizationFactory, RepositoryFactory

DOCS = {
    "guide.md": "# Guide\n\nRead the [deploy policy](deploy.md) before shipping.\n",
    "runbook.md": "# Runbook\n\nRoll back as the [deploy policy](deploy.md) says.\n",
    "deploy.md": "# Deploy policy\n\nDeploys happen on weekdays between nine and four.\n",
}


def _tree(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    return root


def _deploy_authority(org) -> float:
    return Fragment.objects.get(org=org, title__startswith="Deploy policy").authority


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_job_queues_authority_when_it_ends(celery_worker, tmp_path):
    org = OrganizationFactory(slug="fresh")
    repo = RepositoryFactory(org=org, slug="web")
    job = ingestion.submit(SYSTEM, ingestion.SubmitSource(scope=repo.scope,
                                                          path=str(_tree(tmp_path))))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.state == JobState.DONE and _deploy_authority(org) > 0:
            break
        assert job.state != JobState.FAILED, job.error
        time.sleep(0.2)
    assert job.state == JobState.DONE
    assert Link.objects.filter(source__org=org).count() == 2
    # The most cited fragment ranks first; one nobody cites ranks below it.
    assert _deploy_authority(org) == pytest.approx(1.0)
    guide = Fragment.objects.get(org=org, title__startswith="Guide")
    assert 0 < guide.authority < 1


@pytest.mark.django_db
def test_an_inline_job_computes_authority_in_its_process(tmp_path):
    org = OrganizationFactory(slug="inline")
    repo = RepositoryFactory(org=org, slug="web")
    job = ingestion.submit(SYSTEM, ingestion.SubmitSource(scope=repo.scope,
                                                          path=str(_tree(tmp_path))),
                           queue=False)
    done = ingestion.run_inline(job)
    assert done.state == JobState.DONE
    assert _deploy_authority(org) == pytest.approx(1.0)
    # A rerun that changes nothing writes nothing and leaves the numbers as they are.
    again = ingestion.run_inline(ingestion.submit(
        SYSTEM, ingestion.SubmitSource(scope=repo.scope, path=str(tmp_path / "docs")),
        queue=False))
    assert again.fragments_created == again.fragments_updated == 0
    assert IngestionJob.objects.filter(org=org).count() == 2
