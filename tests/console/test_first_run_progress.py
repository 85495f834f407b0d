"""The first run you can watch (issue 40, item 3): the organization's overview and the home
page's card show the ingestion under way — files done of total, fragments written, rate in
files per minute and the time left — and poll themselves every 3 s only while a job is queued
or running; a card never says "0 active fragments" without saying that the content is loading.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.permissions import SYSTEM
from contexts.console.views.home import job_activity
from contexts.models import IngestionJob, JobState
from contexts.usecases import ingestion
from tests.console.conftest import client_for, htmx_to

POLL = 'hx-trigger="every 3s"'


@pytest.fixture
def running_job(cast, tmp_path) -> IngestionJob:
    """A job submitted as the console submits one, then as far as a worker got: started an
    hour ago, 900 of 1,200 files done (15 a minute, 20 minutes left)."""
    (tmp_path / "a.md").write_text("# A\n\nalpha\n")
    job = ingestion.submit(SYSTEM, ingestion.SubmitSource(scope=cast.repo.scope,
                                                          path=str(tmp_path)), queue=False)
    IngestionJob.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING, started_at=timezone.now() - timedelta(hours=1),
        files_total=1200, files_done=900, fragments_created=70, fragments_updated=4,
        fragments_unchanged=6)
    job.refresh_from_db()
    return job


def _section(page: str, start: str) -> str:
    return page.split(start, 1)[1].split("</section>", 1)[0]


def test_the_overview_shows_a_running_jobs_progress_and_polls(cast, running_job):
    page = client_for(cast.viewer).get("/o/acme/").content.decode()
    section = _section(page, '<section id="ingest-activity"')
    assert POLL in section.split(">", 1)[0]
    assert running_job.public_id in section and "running" in section
    assert "900 of 1200" in section
    assert "80 (70 new)" in section                   # created + updated + unchanged
    # 900 files in an hour (and the seconds this test took): 15 a minute, 300 left.
    assert "15.0 files/min" in section and "about 20 min" in section
    assert 'value="75"' in section                    # the bar: 900/1200


def test_rate_and_time_left_follow_the_jobs_counters(cast, running_job):
    now = running_job.started_at + timedelta(minutes=10)
    activity = job_activity(running_job, now)
    assert activity.files_per_minute == pytest.approx(90.0)       # 900 files in 10 minutes
    assert activity.seconds_left == pytest.approx(200.0)          # 300 files at 90 a minute
    assert (activity.minutes_left, activity.fragments) == (3, 80)
    queued = IngestionJob(state=JobState.QUEUED, files_total=10)
    assert job_activity(queued, now).files_per_minute is None
    assert job_activity(queued, now).minutes_left is None


def test_the_polled_partial_stops_polling_once_the_job_is_done(cast, running_job):
    client = client_for(cast.viewer)
    partial = client.get("/o/acme/", **htmx_to("ingest-activity")).content.decode()
    assert partial.lstrip().startswith('<section id="ingest-activity"') and POLL in partial
    IngestionJob.objects.filter(pk=running_job.pk).update(state=JobState.DONE,
                                                          files_done=90)
    finished = client.get("/o/acme/", **htmx_to("ingest-activity")).content.decode()
    assert finished.lstrip().startswith('<section id="ingest-activity"')
    assert "hx-trigger" not in finished and "Ingestion finished" in finished
    # And the page itself, with nothing under way, does not poll at all.
    assert "hx-trigger" not in _section(client.get("/o/acme/").content.decode(),
                                        '<section id="ingest-activity"')


def test_a_queued_job_polls_and_says_it_waits_for_a_worker(cast, tmp_path):
    job = ingestion.submit(SYSTEM, ingestion.SubmitSource(scope=cast.repo.scope,
                                                          path=str(tmp_path)), queue=False)
    section = _section(client_for(cast.viewer).get("/o/acme/").content.decode(),
                       '<section id="ingest-activity"')
    assert POLL in section and job.public_id in section and "waiting for a worker" in section


def test_the_home_card_says_the_content_is_loading_and_polls_only_meanwhile(cast,
                                                                            running_job):
    client = client_for(cast.viewer)
    card = client.get("/").content.decode().split('id="ingest-activity-acme"', 1)[1]
    card = card.split("</p>", 1)[0]
    assert POLL in card.split(">", 1)[0]
    assert "0 active fragments" in card and "loading" in card and "900/1200 files" in card
    partial = client.get("/o/acme/", **htmx_to("ingest-activity-acme")).content.decode()
    assert partial.lstrip().startswith('<p id="ingest-activity-acme"') and POLL in partial
    IngestionJob.objects.filter(pk=running_job.pk).update(state=JobState.DONE)
    done = client.get("/o/acme/", **htmx_to("ingest-activity-acme")).content.decode()
    assert "hx-trigger" not in done and "loading" not in done and "active fragment" in done


def test_another_organizations_jobs_are_not_shown(cast, running_job):
    page = client_for(cast.stranger).get("/").content.decode()
    assert running_job.public_id not in page and "loading" not in page
