"""RetrievalTrace keeps its candidate list column-wise; callers see one dict per candidate."""

from contexts.models import RetrievalTrace
from contexts.models.traces import expand_table, table_of

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
