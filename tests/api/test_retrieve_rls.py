"""Every read of a retrieval runs inside the row-level-security block (issue 20).

Each statement of one ``retrieve()`` is recorded with the role and the allowed scopes in force
as it starts (asked of the same connection, just before it). A read of the fragments, their
embeddings, generations, pins, sources or the persona's weights that runs as the application
role — e.g. moved before ``retrieval_scope`` again — fails the first test; the second shows the
check catching exactly that.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable

import pytest
from django.db import connection

from contexts.retrieval import RetrievalRequest, retrieve
from contexts.services.pins import pin_fragment
from contexts.services.rls import RETRIEVAL_ROLE, pg_int_array

# What retrieval reads. The trace and the use counters are writes after the answer.
READ_TABLES = re.compile(r"\b(contexts_fragment|contexts_embedding|contexts_embeddinggeneration"
                         r"|contexts_pin|contexts_sourcepointer|contexts_sourcedocument"
                         r"|contexts_source|accounts_persona)\b")


class Recorder:
    """(sql, role, allowed scopes) of each statement, as an ``execute_wrapper``."""

    def __init__(self) -> None:
        self.statements: list[tuple[str, str, str]] = []

    def __call__(self, execute: Callable, sql: str, params, many: bool, context: dict):
        # The raw psycopg connection: asked directly, the question is not itself recorded.
        with context["connection"].connection.cursor() as cursor:
            cursor.execute("SELECT current_user, "
                           "coalesce(current_setting('app.allowed_scopes', true), '')")
            role, allowed = cursor.fetchone()
        self.statements.append((sql, role, allowed))
        return execute(sql, params, many, context)

    def tables_read(self) -> set[str]:
        return {table for sql, _, _ in self.statements for table in READ_TABLES.findall(sql)}

    def reads_outside(self, scope_ids: frozenset[int]) -> list[str]:
        """The reads that ran without the retrieval role and exactly these scopes."""
        return [sql for sql, role, allowed in self.statements if READ_TABLES.search(sql)
                and (role != RETRIEVAL_ROLE or allowed != pg_int_array(scope_ids))]


def record_one_retrieval(cast, world) -> tuple[Recorder, RetrievalRequest]:
    pin_fragment(cast.lead, world.org_note, cast.repo.scope)
    chain = (cast.persona.scope_id, cast.repo.scope_id, cast.org.scope_id)
    request = RetrievalRequest(query="why does the rate limiter drop requests?",
                               org_id=cast.org.pk, scope_ids=frozenset(chain), chain=chain,
                               persona_id=cast.persona.pk)
    recorder = Recorder()
    deferred: list[Callable[[], None]] = []
    with connection.execute_wrapper(recorder):
        result = retrieve(request, principal=cast.token, defer=deferred.append)
    for write in deferred:  # the trace and the counters: writes, recorded by no one
        write()
    # The reads under test happened: the pin came first, the persona's weights were used.
    assert result.fragments[0].fragment.pk == world.org_note.pk
    assert result.weights.w_r == pytest.approx(cast.persona.w_r)
    assert {"contexts_fragment", "contexts_embedding", "contexts_embeddinggeneration",
            "contexts_pin", "contexts_sourcepointer", "accounts_persona"} <= \
        recorder.tables_read(), recorder.statements
    return recorder, request


def test_every_read_of_a_retrieval_runs_under_row_level_security(cast, world):
    recorder, request = record_one_retrieval(cast, world)
    assert recorder.reads_outside(request.scope_ids) == []


def test_the_check_sees_a_read_outside_the_block(cast, world, monkeypatch):
    # The block made a no-op: every read now runs as the application role.
    monkeypatch.setattr("contexts.retrieval.pipeline.retrieval_scope",
                        lambda scope_ids: contextlib.nullcontext())
    recorder, request = record_one_retrieval(cast, world)
    outside = recorder.reads_outside(request.scope_ids)
    assert any("contexts_pin" in sql for sql in outside)
    assert any("accounts_persona" in sql for sql in outside)
    assert any("contexts_embeddinggeneration" in sql for sql in outside)
