"""Finding secrets in text, with detect-secrets (Yelp's maintained scanner), in-process.

The detectors are the library's own plugins — cloud keys, private keys, forge and chat tokens,
connection strings with a password, JWTs, high-entropy strings, secret-sounding assignments —
plus two written against its plugin API (:class:`ContextsTokenDetector` for our own
``ctx_…`` tokens, :class:`AssignmentDetector` for unquoted ``KEY=value`` lines of ``.env``
files and configs, which the library's keyword detector only reads in some file types). The
library's heuristic filters (UUIDs, templated values, indirect references, sequential strings)
drop what is not a secret.

No global detect-secrets settings are changed: the library keeps them in a process-wide
singleton that ``transient_settings`` swaps in and out, which is not safe in a threaded web
worker. The plugin instances are built once and used read-only. Verification (a network call
with the secret to its service) is never enabled: a scan sends nothing anywhere.

A :class:`Finding` holds the secret's value only in memory, to redact it: it never appears in
its ``repr``, and :meth:`Finding.public` is what may be stored, logged or shown.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HighEntropyStringsPlugin,
)
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    DENYLIST,
    KeywordDetector,
)

from accounts.models import PUBLIC_ID_ALPHABET, TOKEN_PREFIX

PLACEHOLDER = "[REDACTED:{kind}]"
PLACEHOLDER_MARK = "[REDACTED:"
PRIVATE_KEY = "Private Key"
# Public IP addresses are not credentials, and docs are full of them. A quoted hex string is
# a hash (a commit, a content hash, a checksum) far more often than a key; a hex secret
# assigned to a secret-sounding name is still found, by the keyword detectors.
LEFT_OUT = frozenset({"IPPublicDetector", "HexHighEntropyString"})
# Detectors that guess from a name or from randomness; the typed ones recognise a format.
# A guess goes through the library's heuristic filters, and gives way to a typed finding of
# the same value.
HEURISTIC = frozenset({"Secret Keyword", "Base64 High Entropy String", "High Entropy Assignment"})
# Guessed values shorter than this are words, not credentials (``password = "secret"``).
MIN_GUESSED_LENGTH = 12
MIN_GUESSED_ENTROPY = 3.0
# Shorter lines hold no secret any detector recognises; skipping them halves the scan's cost.
MIN_LINE_LENGTH = 16

# A PEM or PGP armoured key: the library flags its first line; the whole block goes — to its
# END line, or, cut off without one, to the paragraph's end (not the rest of the document).
_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----", re.DOTALL)
_KEY_START = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?=\n[ \t]*\n|\Z)", re.DOTALL)


class ContextsTokenDetector(RegexBasedDetector):
    """Contexts' own agent tokens (``accounts.tokens``: ``ctx_<10>_<40>`` in base32)."""

    secret_type = "Contexts API Token"
    denylist = (re.compile(
        rf"(?<![A-Za-z0-9]){re.escape(TOKEN_PREFIX)}_[{PUBLIC_ID_ALPHABET}]{{10}}"
        rf"_[{PUBLIC_ID_ALPHABET}]{{40}}(?![A-Za-z0-9])"),)


class AssignmentDetector(KeywordDetector):
    """A secret-sounding name assigned a random-looking value, quoted or not, in any file.

    The library reads unquoted ``password: x`` / ``API_KEY=x`` only in YAML, INI and other
    config file types; a ``.env`` pasted into Markdown or a text file would pass. The value
    must look random (entropy, mixed classes), so ``password: ${DB_PASSWORD}`` or prose does not
    count.
    """

    secret_type = "High Entropy Assignment"

    def analyze_line(self, filename: str, line: str, line_number: int = 0,
                     context: Any = None, **kwargs: Any) -> set:
        found = BasePlugin.analyze_line(self, filename=filename, line=line,
                                        line_number=line_number, context=context,
                                        denylist_regex_to_group=CONFIG_DENYLIST_REGEX_TO_GROUP)
        return {secret for secret in found if _looks_random(secret.secret_value or "")}


_ENTROPY = Base64HighEntropyString()
# The keyword detectors cost four fifths of a scan; a line without one of their keywords
# (the library's own list) cannot match them, and one search says so.
_KEYWORD_HINT = re.compile("|".join(DENYLIST), re.IGNORECASE)


# In a guessed value these mean an expression (``settings.API_KEY``, ``get_key()``,
# ``${VAR}``, ``<your key>``), not a literal secret.
_EXPRESSION = re.compile(r"[.()\[\]{}$<>\s]")


def _looks_random(value: str) -> bool:
    """Long, letters and digits mixed, high entropy, and not an expression."""
    value = value.strip("'\"")
    return (len(value) >= MIN_GUESSED_LENGTH and _EXPRESSION.search(value) is None
            and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and _ENTROPY.calculate_shannon_entropy(value) >= MIN_GUESSED_ENTROPY)


@dataclass(frozen=True)
class Finding:
    """One secret in a text: its type and 1-based line. ``value`` stays in memory."""

    kind: str
    line: int
    value: str = field(repr=False, compare=False)

    def public(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line}

    def __str__(self) -> str:
        # Line 0 is a title's (contexts.services.secrets.TITLE_LINE).
        return f"{self.kind} {'in the title' if self.line == 0 else f'on line {self.line}'}"


_lock = threading.Lock()
_plugins: list[BasePlugin] | None = None


def plugins() -> list[BasePlugin]:
    """Every plugin detect-secrets ships (but :data:`LEFT_OUT`) with its default settings,
    and ours; built once per process."""
    global _plugins
    if _plugins is not None:
        return _plugins
    with _lock:
        if _plugins is None:
            classes = get_mapping_from_secret_type_to_class().values()
            built: list[BasePlugin] = [cls() for cls in sorted(classes, key=lambda c: c.__name__)
                                       if cls.__name__ not in LEFT_OUT]
            _plugins = [*built, ContextsTokenDetector(), AssignmentDetector()]
        return _plugins


# A connection string's password that only stands for one: an environment-style name
# (``APP_PASSWORD``), a "change me", an example, a mask.
_PLACEHOLDER_PASSWORD = re.compile(
    r"^(?:[A-Z][A-Z0-9_]*|(?i:change-?me|example|placeholder|your[-_]?password|x{3,}|\*{3,}).*)$")
BASIC_AUTH = "Basic Auth Credentials"
MIN_PASSWORD_LENGTH = 4  # ``postgres://x:pw@h/db`` is an example, not a credential


def _filtered(plugin: BasePlugin, value: str, line: str) -> bool:
    """The library's heuristic filters, for guessed findings; templates for every detector;
    placeholders in connection strings; and our own placeholders (a keyword detector reads
    ``KEY=[REDACTED:…]`` as an assignment)."""
    if ("REDACTED:" in value or heuristic.is_templated_secret(value)
            or heuristic.is_prefixed_with_dollar_sign(value)):
        return True
    if plugin.secret_type == BASIC_AUTH:
        return (len(value) < MIN_PASSWORD_LENGTH or "{" in value
                or _PLACEHOLDER_PASSWORD.match(value) is not None)
    if plugin.secret_type not in HEURISTIC:
        return False
    return (len(value) < MIN_GUESSED_LENGTH or not _looks_random(value)
            or heuristic.is_sequential_string(value) or heuristic.is_potential_uuid(value)
            or heuristic.is_likely_id_string(value, line, plugin)
            or heuristic.is_templated_secret(value)
            or heuristic.is_prefixed_with_dollar_sign(value)
            or heuristic.is_indirect_reference(line)
            or heuristic.is_not_alphanumeric_string(value))


def _whole_tokens(line: str, value: str) -> list[str]:
    """Each occurrence of ``value`` in ``line``, extended to the end of its token.

    Some of the library's patterns hold a group for the token's prefix (GitHub's
    ``(ghp|gho|…)_…``, GitLab's ``(glpat|…)-…``), and ``findall`` then reports the prefix
    alone: redacting that would leave the token's secret part in place."""
    tokens = []
    for match in re.finditer(re.escape(value), line):
        end = match.end()
        while end < len(line) and (line[end].isalnum() or line[end] in "_-"):
            end += 1
        tokens.append(line[match.start():end])
    return tokens or [value]


def scan(text: str, *, filename: str = "") -> list[Finding]:
    """The secrets in ``text``, one finding per (line, value): a typed detector's over a
    guess. ``filename`` lets the keyword detector read the file type's assignment syntax."""
    found: dict[tuple[int, str], Finding] = {}
    detectors = plugins()
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) < MIN_LINE_LENGTH:
            continue
        keywords = _KEYWORD_HINT.search(line) is not None
        quoted = "'" in line or '"' in line  # the entropy plugins read quoted strings only
        for plugin in detectors:
            if ((not keywords and isinstance(plugin, KeywordDetector))
                    or (not quoted and isinstance(plugin, HighEntropyStringsPlugin))):
                continue
            for secret in plugin.analyze_line(filename=filename, line=line,
                                              line_number=number):
                value = secret.secret_value or ""
                if not value or _filtered(plugin, value, line):
                    continue
                typed = plugin.secret_type not in HEURISTIC
                for whole in _whole_tokens(line, value) if typed else [value]:
                    key = (number, whole)
                    known = found.get(key)
                    if known is None or (known.kind in HEURISTIC and typed):
                        found[key] = Finding(plugin.secret_type, number, whole)
    typed = [f for f in found.values() if f.kind not in HEURISTIC]
    # A guess overlapping a typed finding on its line is the same secret, seen less well.
    kept = [f for f in found.values() if f.kind not in HEURISTIC or not any(
        t.line == f.line and (t.value in f.value or f.value in t.value) for t in typed)]
    return sorted(kept, key=lambda f: (f.line, f.kind))


def placeholder(kind: str) -> str:
    return PLACEHOLDER.format(kind=kind)


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` with every finding replaced by its typed placeholder.

    A value is replaced on its own line and, when long enough to be unambiguous, wherever
    else it appears; an armoured private key loses its whole block (line count kept, so code
    keeps its line numbers)."""
    findings = list(findings)
    if not findings:
        return text
    if any(f.kind == PRIVATE_KEY for f in findings):
        for pattern in (_KEY_BLOCK, _KEY_START):
            text = pattern.sub(
                lambda m: placeholder(PRIVATE_KEY) + "\n" * m.group(0).count("\n"), text)
    lines = text.split("\n")
    for finding in sorted(findings, key=lambda f: -len(f.value)):
        index = finding.line - 1
        if 0 <= index < len(lines):
            lines[index] = lines[index].replace(finding.value, placeholder(finding.kind))
    text = "\n".join(lines)
    for finding in findings:
        if len(finding.value) >= MIN_GUESSED_LENGTH:
            text = text.replace(finding.value, placeholder(finding.kind))
    return text


def describe(findings: Iterable[Finding]) -> str:
    """``AWS Access Key on line 3, Slack Token on line 9`` — never a value."""
    return ", ".join(str(f) for f in findings)
