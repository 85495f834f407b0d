"""Plain SQL beside the ORM, for the few hot statements that build model rows themselves."""

from __future__ import annotations

from collections.abc import Collection

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper

_django_json = DjangoJSONEncoder()


def prepared_cursor() -> CursorWrapper:
    """A cursor on this thread's connection whose statements PostgreSQL keeps prepared.

    For the statements every retrieval runs: a prepared statement is parsed, analysed and
    rewritten once per connection, and planned once when a generic plan serves (PostgreSQL
    decides after five executions). Measured under load, planning alone was ~2 ms of the
    database's time per retrieval across its dozen statements, more than executing them. The
    parameters are bound by the server (Django's default cursor inlines them as literals,
    which cannot be prepared), so a parameter whose type the statement does not settle needs
    a cast. Off with ``CONTEXTS_DB_PREPARED_STATEMENTS=0`` (a transaction-mode pooler older
    than pgbouncer 1.21 cannot keep them): then this is a plain server-binding cursor.
    """
    connection.ensure_connection()
    return connection._prepare_cursor(_PreparingCursor(connection.connection))


class _PreparingCursor(ServerBindingCursor):
    """Keeps the statement it ran where Django's query log reads it (``_query``), which
    psycopg leaves empty when it runs a prepared statement (psycopg 3.3; pinned)."""

    def _send_query_prepared(self, name, pgq, *, binary=None) -> None:
        self._query = pgq
        super()._send_query_prepared(name, pgq, binary=binary)


def model_columns(model: type[models.Model], alias: str,
                  only: Collection[str] | None = None) -> tuple[list[str], str]:
    """The model's field names (``attname``, in its field order, as ``Model.from_db`` takes
    them) and the matching select list for table alias ``alias`` — every concrete field, or
    the ones in ``only`` (the rest are deferred and load on access)."""
    fields = [f for f in model._meta.concrete_fields if only is None or f.attname in only]
    return ([f.attname for f in fields],
            ", ".join(f'{alias}."{f.column}"' for f in fields))


def insert_statement(model: type[models.Model]) -> tuple[list[models.Field], str]:
    """The fields (every concrete one but the auto pk, in field order) and an ``INSERT`` of
    one row of ``model`` with a placeholder per field. JSON fields take text cast to
    ``jsonb``: callers serialise them (see :func:`json_text`), which is several times faster
    than handing Python values to psycopg's ``Jsonb`` (``json.dumps``, then quoting)."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(f'"{f.column}"' for f in fields)
    placeholders = ", ".join("%s::jsonb" if isinstance(f, models.JSONField) else "%s"
                             for f in fields)
    return fields, f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({placeholders})"


def insert_values(instance: models.Model, fields: list[models.Field], connection) -> list:
    """``instance``'s values for :func:`insert_statement`, prepared as ``save()`` would."""
    return [json_text(getattr(instance, f.attname)) if isinstance(f, models.JSONField)
            else f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]


def json_text(value: object) -> str:
    """JSON text of ``value`` (orjson; Django's encoder for what orjson does not know, such as
    lazy strings and decimals). NaN and infinities become null, which jsonb requires anyway."""
    return orjson.dumps(value, default=_django_json.default,
                        option=orjson.OPT_NON_STR_KEYS).decode()
