"""The governance clock: every rule takes ``now``; ``None`` means the real time."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone


def resolve(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return timezone.now()
    if timezone.is_naive(now):
        raise ValueError("the governance clock needs an aware datetime")
    return now


def per_kind(name: str, kind: str) -> float:
    """A setting that is either a scalar or ``{kind: value, "default": value}``."""
    value = getattr(settings, name)
    if isinstance(value, dict):
        return value.get(kind, value["default"])
    return value


def smallest(name: str) -> float:
    value = getattr(settings, name)
    return min(value.values()) if isinstance(value, dict) else value


def largest(name: str) -> float:
    value = getattr(settings, name)
    return max(value.values()) if isinstance(value, dict) else value
