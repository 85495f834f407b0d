"""Rows that belong to the organization of the row they hang off (issue 21, item 5).

Every tenant table carries ``org_id`` so that the schema can be distributed by organization
(``docs/scale-out.md``). Most tables get it from the caller (a fragment is created in a scope of
an organization); the rows that hang off another tenant row — a fragment's versions, pins,
links, source pointers and nudges, a subscription, the many-to-many rows — take it from that row
here, the one place it is derived: :meth:`OrgFromParent.save` for ``create()``, ``save()`` and
``get_or_create()``, and the default manager's ``bulk_create`` for bulk writes and for
``ManyRelatedManager.add()/set()``, which insert through models with ``bulk_create``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import ClassVar

from django.db import models


def fill_org(model: type[models.Model], objs: Iterable[models.Model]) -> None:
    """Set ``org_id`` on every row of ``objs`` without one, from the first of
    ``model.ORG_FROM``'s foreign keys that is set: the related instance's ``org_id`` when it
    is loaded, else one query per parent model for all the rows that need it."""
    fields = [model._meta.get_field(name) for name in model.ORG_FROM]
    wanted: dict[models.Field, dict[int, list[models.Model]]] = defaultdict(
        lambda: defaultdict(list))
    for obj in objs:
        if obj.org_id is not None:
            continue
        for field in fields:
            if field.is_cached(obj) and getattr(obj, field.name) is not None:
                obj.org_id = getattr(obj, field.name).org_id
                break
            parent_id = getattr(obj, field.attname)
            if parent_id is not None:
                wanted[field][parent_id].append(obj)
                break
    for field, rows in wanted.items():
        parents = field.related_model._base_manager.filter(pk__in=list(rows))
        for parent_id, org_id in parents.values_list("pk", "org_id"):
            for obj in rows[parent_id]:
                obj.org_id = org_id


class OrgFromParentQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        fill_org(self.model, objs)
        return super().bulk_create(objs, *args, **kwargs)


class OrgFromParent(models.Model):
    """A tenant row whose organization is the one of its parent row: ``ORG_FROM`` names the
    foreign keys to take it from, in order of preference (the first that is set is used).
    The composite foreign keys of the schema (``org_id`` included) refuse a row whose
    organization differs from its parents'."""

    ORG_FROM: ClassVar[tuple[str, ...]] = ()

    objects = OrgFromParentQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        if self.org_id is None:
            fill_org(type(self), [self])
        super().save(*args, **kwargs)
