"""Plain SQL beside the ORM, for the few hot statements that build model rows themselves."""

from __future__ import annotations

from collections.abc import Collection

from django.db import models


def model_columns(model: type[models.Model], alias: str,
                  only: Collection[str] | None = None) -> tuple[list[str], str]:
    """The model's field names (``attname``, in its field order, as ``Model.from_db`` takes
    them) and the matching select list for table alias ``alias`` — every concrete field, or
    the ones in ``only`` (the rest are deferred and load on access)."""
    fields = [f for f in model._meta.concrete_fields if only is None or f.attname in only]
    return ([f.attname for f in fields],
            ", ".join(f'{alias}."{f.column}"' for f in fields))
