"""Use counters: a retrieval counts its returned fragments in its process (after the response),
the process pushes them to Redis at most once a second, and the periodic flush folds them into
the fragments — real Redis, real PostgreSQL."""

import pytest
from django.conf import settings

from contexts.kernel.availability import cache_redis
from contexts.models import Fragment
from contexts.services import usage
from contexts.tasks import flush_use_counters
from tests.api.conftest import as_token
from tests.api.test_retrieve import URL, ids


def test_retrievals_are_counted_in_redis_and_flushed_into_the_fragments(api, cast, world):
    usage.flush()  # whatever earlier tests left pending
    client = as_token(api, cast.raw_token)
    body = {"query": "why does the rate limiter drop requests?",
            "scope": {"org_id": "acme", "repo_id": "web"}}
    first = ids(client.post(URL, body, format="json"))
    second = ids(client.post(URL, body, format="json"))
    assert first and first == second
    returned = Fragment.objects.filter(public_id__in=first)
    assert set(returned.values_list("retrieved_count", flat=True)) == {0}  # not yet flushed
    assert usage.pending() == {f.pk: 2 for f in returned}

    assert flush_use_counters() == len(first)  # the beat task, run here
    assert usage.pending() == {}
    for fragment in Fragment.objects.filter(public_id__in=first):
        assert fragment.retrieved_count == 2 and fragment.last_retrieved_at is not None
    untouched = Fragment.objects.exclude(public_id__in=first)
    assert set(untouched.values_list("retrieved_count", flat=True)) == {0}
    assert flush_use_counters() == 0  # nothing pending: nothing counted twice


def test_the_flush_is_scheduled() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["usage-flush-counters"]
    assert entry["task"] == "contexts.tasks.flush_use_counters"
    assert 0 < entry["schedule"] <= 300


def test_a_failed_flush_puts_the_counts_back(api, cast, world):
    from django.db import connection, transaction

    usage.flush()
    usage.count_retrievals([world.repo_limiter.pk, world.repo_limiter.pk])
    with transaction.atomic():
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1 / 0")
        except Exception:  # noqa: BLE001 - the point: a transaction that cannot write
            pass
        connection.needs_rollback = True
        with pytest.raises(Exception):  # noqa: B017 - whatever the database refuses with
            usage.flush()
    assert usage.pending() == {world.repo_limiter.pk: 2}  # kept for the next flush
    assert usage.flush() == 1
    world.repo_limiter.refresh_from_db()
    assert world.repo_limiter.retrieved_count == 2


def test_a_process_pushes_its_counts_to_redis_at_most_once_a_period(world, monkeypatch):
    usage.flush()
    in_redis = lambda: {int(pk): int(n) for pk, n in  # noqa: E731
                        cache_redis().hgetall(usage.PENDING).items()}
    limiter, other = world.repo_limiter.pk, world.org_note.pk
    monkeypatch.setattr(usage, "PUSH_SECONDS", 60.0)
    monkeypatch.setattr(usage, "_pushed_at", float("-inf"))  # a quiet process: at once
    usage.count_retrievals([limiter])
    assert in_redis() == {limiter: 1}
    usage.count_retrievals([limiter, other])  # within the period: kept in the process
    usage.count_retrievals([other])
    assert in_redis() == {limiter: 1}
    assert usage.pending() == {limiter: 2, other: 2}  # reading pushes this process's counts
    assert in_redis() == {limiter: 2, other: 2}
    usage.count_retrievals([other])
    assert usage.flush() == 2  # the flush takes this process's counts too
    world.repo_limiter.refresh_from_db()
    assert world.repo_limiter.retrieved_count == 2
    assert Fragment.objects.get(pk=other).retrieved_count == 3
