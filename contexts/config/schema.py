"""What a setting is (:class:`Setting`), the types of values (:class:`Kind`), and the reader that
takes them from the environment (:class:`Environment`).

A value that cannot be parsed, or breaks a rule, is not raised on the spot: the reader keeps the
default, records ``"NAME: why"`` and goes on, so that one start lists every mistake at once
(``contexts.config.checks``) instead of stopping at the first with a traceback.

Standard library only: ``manage.py`` and the process entry points use it before Django is set up.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Kind:
    """A type of value: its name in the reference, and how a raw string becomes the value.

    ``parse`` raises ValueError with the reason (a phrase: "not an integer: 'x'"). With
    ``empty_is_unset`` an empty variable means the default, as for numbers; otherwise it is a
    value of its own (an empty text, an empty list)."""

    name: str
    parse: Callable[[str], Any]
    empty_is_unset: bool = True


def _int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"not an integer: {raw!r}") from None


def _float(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"not a number: {raw!r}") from None


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ValueError(f"not a boolean: {raw!r} (1, true, yes, on or 0, false, no, off)")


def _list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _networks(raw: str) -> list[str]:
    """Addresses or CIDR networks, normalised (``10.0.0.1`` → ``10.0.0.1/32``). A malformed entry
    is an error, never dropped nor matched as a literal (as uvicorn does): that would leave a
    proxy or a scraper quietly untrusted or trusted."""
    networks = []
    for item in _list(raw):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or CIDR network") from None
    return networks


def _json_object(raw: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object")
    return value


RATE = re.compile(r"^\d+/[smhd]\w*$")  # what DRF reads: the period's first letter


def _rate(raw: str) -> str:
    """Django REST framework's rate syntax, checked here rather than at the first request."""
    if not RATE.match(raw.strip()):
        raise ValueError(f"not a rate such as 100/min: {raw!r}")
    return raw


TEXT = Kind("text", str, empty_is_unset=False)
PATH = Kind("path", str)
INT = Kind("integer", _int)
FLOAT = Kind("number", _float)
BOOL = Kind("boolean", _bool)
LIST = Kind("list", _list, empty_is_unset=False)
NETWORKS = Kind("networks", _networks, empty_is_unset=False)
JSON_OBJECT = Kind("JSON object", _json_object)
THROTTLE_RATE = Kind("rate", _rate)


def choice(*options: str, normalise: bool = False) -> Kind:
    """One of ``options``; with ``normalise``, compared (and returned) stripped and lower-case."""

    def parse(raw: str) -> str:
        value = raw.strip().lower() if normalise else raw
        if value not in options:
            raise ValueError(f"must be one of {', '.join(options)}, not {raw!r}")
        return value

    return Kind("one of " + ", ".join(f"`{option}`" for option in options), parse,
                empty_is_unset=False)


@dataclass(frozen=True)
class Setting:
    """One environment variable: its type, default and what it does, in one sentence.

    ``default`` is the value when the variable is unset; ``None`` means settings.py computes it
    from other settings, and ``shown_default`` says how, for the reference. ``secret`` settings
    are never printed and are best given through ``<NAME>_FILE``."""

    name: str
    kind: Kind
    default: Any
    description: str
    secret: bool = False
    minimum: float | None = None
    shown_default: str | None = None

    def __post_init__(self) -> None:
        if not self.description.endswith("."):
            raise ValueError(f"{self.name}: a description is a sentence ending with a period")


@dataclass(frozen=True)
class Area:
    """The settings of one part of the product, in the order the reference lists them."""

    title: str
    intro: str
    settings: tuple[Setting, ...]


class Environment:
    """Reads declared settings from an environment; collects errors instead of raising them.

    ``env("NAME")`` is the value of ``NAME``: ``NAME_FILE``'s content when that is set (Docker
    secrets), else ``NAME``, parsed by its kind; the default when unset, or when the value is
    invalid (the error is recorded). Reading an undeclared name is a KeyError: every variable
    the settings read is in the schema, and so in the reference."""

    def __init__(self, environ: Mapping[str, str], areas: Iterable[Area]) -> None:
        self.environ = environ
        self.declared = {setting.name: setting for area in areas for setting in area.settings}
        self.errors: list[str] = []
        self._values: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        if name not in self._values:
            self._values[name] = self._read(self.declared[name])
        return self._values[name]

    def is_set(self, name: str) -> bool:
        """Whether the variable (or its ``_FILE``) is set to something, whatever its value."""
        return bool(self.environ.get(name) or self.environ.get(f"{name}_FILE"))

    def error(self, name: str, why: str) -> None:
        """Record a problem with ``name`` (a rule across settings, checked by settings.py)."""
        message = f"{name}: {why}"
        if message not in self.errors:
            self.errors.append(message)

    def read_all(self) -> list[str]:
        """Read every declared setting, so that the errors cover those settings.py did not
        need; returns them."""
        for name in self.declared:
            self(name)
        return self.errors

    def _read(self, setting: Setting) -> Any:
        raw = self._raw(setting)
        if raw is None or (raw == "" and setting.kind.empty_is_unset):
            return setting.default
        try:
            value = setting.kind.parse(raw)
        except ValueError as exc:
            self.error(setting.name, str(exc))
            return setting.default
        if setting.minimum is not None and value < setting.minimum:
            self.error(setting.name, f"must be at least {setting.minimum:g}, not {value:g}")
            return setting.default
        return value

    def _raw(self, setting: Setting) -> str | None:
        file_name = self.environ.get(f"{setting.name}_FILE")
        if file_name:
            try:
                return Path(file_name).read_text().strip()
            except OSError as exc:
                self.error(f"{setting.name}_FILE", f"cannot read {file_name}: "
                           f"{exc.strerror or exc}")
                return None
        return self.environ.get(setting.name)
