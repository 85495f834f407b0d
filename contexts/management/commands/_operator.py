"""What ``org``, ``repo`` and ``member`` share: a use case's refusal as a ``CommandError``
naming the field (exit code 1; argparse's own errors exit with 2), never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import NotVisible, Refused


def run(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except InvalidOperation as exc:
        where = f"{exc.field}: " if exc.field else ""
        raise CommandError(f"{where}{exc}") from None
    except NotVisible as exc:
        raise CommandError(f"org: no such {exc.args[0] if exc.args else 'object'}") from None
    except Refused as exc:
        raise CommandError(str(exc)) from None
