"""Plain SQL beside the ORM, for the few hot statements that build model rows themselves."""

from __future__ import annotations

from collections.abc import Collection

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

_django_json = DjangoJSONEncoder()


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
