"""RetrievalTrace keeps its candidate list column-wise (callers see one dict per candidate),
uncompressed, and for ``TRACE_RETENTION_DAYS``."""

import datetime as dt
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.translation import gettext_lazy
from psycopg.pq import TransactionStatus

from accounts.models import new_public_id
from contexts.models import RetrievalTrace
from contexts.models.traces import expand_table, table_of
from contexts.retrieval.types import TRACE_COLUMNS, Candidate
from contexts.services import traces
from contexts.tasks import purge_old_traces

ROWS = [
    {"id": "frag_a", "bm25_rank": 1, "bm25": 7.5, "dense_rank": None, "final": 0.61},
    {"id": "frag_b", "bm25_rank": None, "bm25": None, "dense_rank": 1, "final": 0.58},
]


def test_rows_round_trip_and_keys_are_stored_once():
    table = table_of(ROWS)
    assert table["columns"] == ["id", "bm25_rank", "bm25", "dense_rank", "final"]
    assert table["rows"][1] == ["frag_b", None, None, 1, 0.58]
    assert expand_table(table) == ROWS


def test_a_key_some_rows_lack_reads_as_none():
    assert expand_table(table_of([{"id": "a"}, {"id": "b", "final": 0.5}])) == [
        {"id": "a", "final": None}, {"id": "b", "final": 0.5}]


def test_a_list_written_before_the_table_format_is_read_as_it_is():
    assert expand_table(ROWS) == ROWS
    assert expand_table({}) == []


def test_the_model_stores_the_table_and_answers_with_dicts(cast):
    trace = RetrievalTrace.objects.create(org=cast.org, query="q", candidates=ROWS)
    stored = RetrievalTrace.objects.get(pk=trace.pk)
    assert stored.stage_table == table_of(ROWS)
    assert stored.candidates == ROWS


def test_a_row_stored_before_migration_0015_reads_the_same(cast):
    trace = RetrievalTrace.objects.create(org=cast.org, query="q")
    RetrievalTrace.objects.filter(pk=trace.pk).update(stage_table=ROWS)  # the old format
    assert RetrievalTrace.objects.get(pk=trace.pk).candidates == ROWS


def test_a_candidates_trace_row_follows_the_trace_columns():
    # Every value distinct, so a column written in another's place fails.
    candidate = Candidate(7, ranks={"lexical": 3, "dense": 2},
                          scores={"lexical": 11.25, "dense": 0.8123456789}, rrf=0.0161290,
                          rerank=0.93, relevance=0.5, freshness=0.312345, authority=0.42,
                          pinned=True, pin_order=1, final=0.712345, returned=True,
                          dropped="over budget")
    expected = {"id": "frag_x", "bm25_rank": 3, "bm25": 11.25, "dense_rank": 2,
                "dense": 0.8123456789, "rrf": 0.016129, "rerank": 0.93, "relevance": 0.5,
                "freshness": 0.3123, "authority": 0.42, "pinned": True, "pin_order": 1,
                "final": 0.7123, "returned": True, "dropped": "over budget"}
    assert dict(zip(TRACE_COLUMNS, candidate.trace_row("frag_x"), strict=True)) == expected
    assert candidate.as_trace("frag_x") == expected  # what the console shows


def test_candidate_tables_are_stored_uncompressed(db):
    # Migration 0016: no pglz pass on the write every retrieval makes.
    with connection.cursor() as cursor:
        cursor.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = "
                       "'contexts_retrievaltrace'::regclass AND attname = 'candidates'")
        assert cursor.fetchone() == ("e",)


def test_traces_past_retention_are_purged_in_batches(cast, monkeypatch):
    now = timezone.now()
    ages = [0, 29, 31, 40, 400]
    for age in ages:
        trace = RetrievalTrace.objects.create(org=cast.org, query=f"{age} days old")
        RetrievalTrace.objects.filter(pk=trace.pk).update(
            created_at=now - dt.timedelta(days=age))
    monkeypatch.setattr(traces, "BATCH", 2)  # three old ones: two batches
    assert traces.purge(30, now=now) == 3
    assert sorted(RetrievalTrace.objects.values_list("query", flat=True)) == [
        "0 days old", "29 days old"]
    assert traces.purge(0, now=now) == 0  # 0 keeps every trace
    assert RetrievalTrace.objects.count() == 2


def test_the_purge_is_scheduled_and_reads_the_setting(cast, settings):
    entry = django_settings.CELERY_BEAT_SCHEDULE["traces-purge"]
    assert entry["task"] == "contexts.tasks.purge_old_traces"
    old = RetrievalTrace.objects.create(org=cast.org, query="old")
    RetrievalTrace.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - dt.timedelta(days=3))
    settings.TRACE_RETENTION_DAYS = 5
    assert purge_old_traces() == 0
    settings.TRACE_RETENTION_DAYS = 2
    assert purge_old_traces() == 1


def _trace(cast, **fields) -> RetrievalTrace:
    return RetrievalTrace(public_id=new_public_id(RetrievalTrace.PUBLIC_ID_PREFIX),
                          org=cast.org, **fields)


def test_a_written_trace_reads_back_field_for_field(cast):
    # Every field set, JSON of every shape: written by traces.write's own serialiser
    # (orjson, with Django's encoder for lazy strings and decimals).
    when = timezone.now() - dt.timedelta(minutes=3)
    trace = _trace(cast, token=cast.token, query="it's \"quoted\" — ünïcode", reranker="none",
                   scope_ids=[3, 1], requested_scope={"chain": [1], "persona_id": None},
                   parameters={"weights": {"w_r": 0.7}, "label": gettext_lazy("Search"),
                               "price": Decimal("1.50"), "legs": ["lexical", "dense"]},
                   stage_table=table_of(ROWS), returned=[{"id": "frag_a", "score": 0.61}],
                   versions={"chunker": ["md-1"]}, timings_ms={"total": 12.5},
                   degraded={"lexical": "IndexMissing"}, created_at=when)
    traces.write(trace)
    stored = RetrievalTrace.objects.get(public_id=trace.public_id)
    assert stored.token_id == cast.token.pk and stored.created_at == when
    assert stored.query == trace.query and stored.scope_ids == [3, 1]
    assert stored.parameters == {"weights": {"w_r": 0.7}, "label": "Search", "price": "1.50",
                                 "legs": ["lexical", "dense"]}
    assert stored.candidates == ROWS
    assert (stored.requested_scope, stored.returned, stored.versions, stored.timings_ms,
            stored.degraded) == (trace.requested_scope, trace.returned, trace.versions,
                                 trace.timings_ms, trace.degraded)


def test_a_score_that_is_not_a_number_is_written_as_null(cast):
    # jsonb has no NaN: json.dumps would have written one and the insert failed.
    trace = _trace(cast, query="q", timings_ms={"rerank": float("nan")})
    traces.write(trace)
    assert RetrievalTrace.objects.get(public_id=trace.public_id).timings_ms == {"rerank": None}


def test_inside_a_callers_transaction_the_trace_goes_with_it(cast):
    trace = _trace(cast, query="q")
    with pytest.raises(RuntimeError), transaction.atomic():
        with CaptureQueriesContext(connection) as queries:
            traces.write(trace)
        # The caller's transaction commits as the caller says: no setting of the trace's own.
        assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT"]
        assert RetrievalTrace.objects.filter(public_id=trace.public_id).exists()
        raise RuntimeError("the caller fails")
    assert not RetrievalTrace.objects.filter(public_id=trace.public_id).exists()


def test_a_trace_needs_its_public_id(cast):
    with pytest.raises(ValueError, match="public id"):
        traces.write(RetrievalTrace(org=cast.org, query="q"))


@pytest.mark.django_db(transaction=True)
def test_a_failed_write_leaves_no_transaction_open_and_loses_nothing(cast):
    first = _trace(cast, query="first")
    traces.write(first)
    duplicate = _trace(cast, query="second")
    duplicate.public_id = first.public_id
    with CaptureQueriesContext(connection) as queries:
        traces.write(_trace(cast, query="unflushed"))
    # Its own transaction does not wait for its WAL flush, and is bounded: the settings go
    # with the insert, in its one round trip.
    [sent] = [q["sql"] for q in queries.captured_queries]
    bound = django_settings.AFTER_RESPONSE_TIMEOUT_MS
    assert sent.startswith(f"SET LOCAL statement_timeout = {bound}; SET LOCAL lock_timeout = "
                           f"{bound}; SET LOCAL synchronous_commit TO off; INSERT INTO"), sent
    with pytest.raises(IntegrityError):
        traces.write(duplicate)
    assert not connection.in_atomic_block
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    assert sorted(RetrievalTrace.objects.values_list("query", flat=True)) == [
        "first", "unflushed"]
    with connection.cursor() as cursor:  # the settings ended with the failed transaction
        cursor.execute("SELECT current_setting('synchronous_commit'), "
                       "current_setting('statement_timeout'), current_setting('lock_timeout')")
        assert cursor.fetchone() == ("on", "0", "0")
