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

Around the library, in this module only, two layers it does not have (issue 37, finding 5):

* **hidden secrets** — each line that reads differently once normalised (NFKC, ``%XX``
  decoded, zero-width and other invisible characters removed) is scanned again in that form,
  and a secret found there is taken out of the original line as the whole span that
  normalises to it (:func:`normalised`);
* **secrets named in prose** — a random-looking value within a few words after words that
  name a secret ("the secret access key is …", "password: …", "client secret …"), which no
  library detector reads outside an assignment (:func:`_prose`).

A :class:`Finding` holds the secret's value only in memory, to redact it: it never appears in
its ``repr``, and :meth:`Finding.public` is what may be stored, logged or shown.
"""

from __future__ import annotations

import re
import threading
import unicodedata
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
    # Where a line-0 finding was: "" a title (contexts.services.secrets.TITLE_LINE), "path" a
    # file's path or an archive member's name.
    place: str = field(default="", compare=False)

    def public(self) -> dict[str, Any]:
        return {"kind": self.kind, "line": self.line}

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.kind} in the {self.place or 'title'}"
        return f"{self.kind} on line {self.line}"


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
    guess. ``filename`` lets the keyword detector read the file type's assignment syntax.

    The library's detectors, then secrets named in prose, then both again on every line that
    reads differently once normalised; a finding inside a wider one of its line is dropped
    (the wider span is what gets redacted)."""
    found = _library_scan(text, filename=filename)
    found = _merged(found, _prose(text))
    found = _merged(found, _hidden(text, filename=filename))
    return sorted(found, key=lambda f: (f.line, f.kind))


def _merged(known: list[Finding], new: Iterable[Finding]) -> list[Finding]:
    """``known`` and ``new``, a finding of one line dropped where another of that line holds
    its value (the wider span wins; at equal spans the first, a library's typed finding)."""
    kept = list(known)
    for finding in new:
        if any(k.line == finding.line and finding.value in k.value for k in kept):
            continue
        kept = [k for k in kept if not (k.line == finding.line and k.value in finding.value)]
        kept.append(finding)
    return kept


def _library_scan(text: str, *, filename: str = "") -> list[Finding]:
    """detect-secrets' plugins (and ours) over ``text`` as it is, line by line."""
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


# --- hidden secrets: normalised before scanning ----------------------------------------------
# Characters that render as nothing (zero-width space/joiners, direction marks and embeddings,
# word joiner and invisible operators, the byte order mark, the soft hyphen, the combining
# grapheme joiner, the Mongolian vowel separator): a token broken by one reads whole to anyone
# who copies it, and to no detector.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_PERCENT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# Anything normalisation could change: a line without one of these is scanned once only.
_MAY_HIDE = re.compile(r"%[0-9A-Fa-f]{2}|[^\x00-\x7f]")
NORMALISE_ROUNDS = 3  # ``%2525…`` decodes one level per round; three is past any real use

# A character of a normalised line, and the span of the original line it came from.
Spans = list[tuple[int, int]]


def _fold(text: str) -> list[tuple[str, int, int]]:
    """Invisible characters removed, every other one NFKC-normalised (per character, so each
    result keeps the index it came from): fullwidth ``ｇｈｐ＿`` reads ``ghp_``."""
    pieces = []
    for index, char in enumerate(text):
        if _INVISIBLE.match(char):
            continue
        folded = unicodedata.normalize("NFKC", char) if ord(char) > 0x7F else char
        pieces.extend((c, index, index + 1) for c in folded)
    return pieces


def _utf8_length(lead: int) -> int:
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def _percent_decoded(text: str) -> list[tuple[str, int, int]]:
    """``%XX`` runs decoded as UTF-8, each character mapped to the triples it came from.
    What is not valid UTF-8, or decodes to a control character (a line break would move the
    lines), stays as written."""
    pieces: list[tuple[str, int, int]] = []
    position = 0
    for match in _PERCENT_RUN.finditer(text):
        pieces.extend((c, i, i + 1) for i, c in enumerate(text[position:match.start()],
                                                           start=position))
        start = match.start()
        data = bytes.fromhex(match.group(0).replace("%", ""))
        at = 0
        while at < len(data):
            size = _utf8_length(data[at])
            try:
                char = data[at:at + size].decode("utf-8") if at + size <= len(data) else ""
            except UnicodeDecodeError:
                char = ""
            if len(char) == 1 and unicodedata.category(char) != "Cc":
                pieces.append((char, start + 3 * at, start + 3 * (at + size)))
                at += size
            else:
                first = start + 3 * at
                pieces.extend((c, first + k, first + k + 1)
                              for k, c in enumerate(text[first:first + 3]))
                at += 1
        position = match.end()
    pieces.extend((c, i, i + 1) for i, c in enumerate(text[position:], start=position))
    return pieces


def normalised(line: str) -> tuple[str, Spans]:
    """``line`` as a reader (or an agent) reassembles it — invisible characters gone, NFKC,
    ``%XX`` decoded, repeatedly — and for each of its characters the span of ``line`` it came
    from. No line break is ever added or removed."""
    text, spans = line, [(i, i + 1) for i in range(len(line))]
    for _ in range(NORMALISE_ROUNDS):
        before = text
        for step in (_fold, _percent_decoded):
            pieces = step(text)
            spans = [(spans[start][0], spans[end - 1][1]) for _, start, end in pieces]
            text = "".join(c for c, _, _ in pieces)
        if text == before:
            break
    return text, spans


def _hidden(text: str, *, filename: str = "") -> list[Finding]:
    """Secrets only the normalised form of a line shows, as the spans of the original line
    that normalise to them (the whole span goes, whatever hid the secret inside it)."""
    found: list[Finding] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if _MAY_HIDE.search(line) is None:
            continue
        clear, spans = normalised(line)
        if clear == line:
            continue
        for finding in [*_library_scan(clear, filename=filename), *_prose(clear)]:
            start = clear.find(finding.value)
            while start >= 0:
                end = start + len(finding.value)
                first, last = spans[start][0], spans[end - 1][1]
                # Invisible characters around it go with it (they are part of the hiding).
                while first > 0 and _INVISIBLE.match(line[first - 1]):
                    first -= 1
                while last < len(line) and _INVISIBLE.match(line[last]):
                    last += 1
                original = line[first:last]
                found.append(Finding(finding.kind, number, original))
                start = clear.find(finding.value, end)
    return found


# --- secrets named in prose ------------------------------------------------------------------
PROSE_SECRET = "Secret Named in Prose"
# Words that name a secret; what follows them within PROSE_WINDOW_WORDS words is a candidate.
# Free-standing words: "set-password/…" in a URL or ``reset_token`` in code names a route or
# a variable, not a secret whose value follows.
_SECRET_WORDS = re.compile(
    r"(?<![A-Za-z0-9_/-])(?:secret[\s_-]+access[\s_-]+key|access[\s_-]+key|client[\s_-]+secret"
    r"|private[\s_-]+key|secret[\s_-]+key|api[\s_-]?key|(?:access|auth|bearer|refresh)"
    r"[\s_-]+token|secret|password|passphrase|passwd|token|credentials?)s?(?![A-Za-z0-9_/-])",
    re.IGNORECASE)
PROSE_WINDOW_WORDS = 6
PROSE_WINDOW_CHARS = 240
MIN_PROSE_LENGTH = 20
MIN_PROSE_ENTROPY = 3.3
_PROSE_VALUE = re.compile(rf"[A-Za-z0-9+/=_-]{{{MIN_PROSE_LENGTH},}}")
_WRAPPING = "\"'`()[]{}<>,;:!?*.\u00ab\u00bb\u201c\u201d\u2018\u2019"
# A letter next to a digit: identifiers and version names have one or two, a random value
# of twenty characters or more many.
_LETTER_DIGIT = re.compile(r"(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
MIN_LETTER_DIGIT_CHANGES = 3


def _prose_random(word: str) -> bool:
    """A value that looks generated: long, of a key's alphabet, letters and digits mixed all
    along, high entropy; not a UUID, not a sequence, not one of our placeholders."""
    return (_PROSE_VALUE.fullmatch(word) is not None and "REDACTED" not in word
            and sum(c.isdigit() for c in word) >= 2
            and len(_LETTER_DIGIT.findall(word)) >= MIN_LETTER_DIGIT_CHANGES
            and _ENTROPY.calculate_shannon_entropy(word) >= MIN_PROSE_ENTROPY
            and not heuristic.is_potential_uuid(word)
            and not heuristic.is_sequential_string(word))


def _prose(text: str) -> list[Finding]:
    """Random-looking values within a few words after words naming a secret ("the secret
    access key is …", "password for staging: …"), on the same line — or the next, where a
    sentence wraps there (its line ends in a word, not code's quote or comma)."""
    found: list[Finding] = []
    for named in _SECRET_WORDS.finditer(text):
        offset = named.end()
        window, _, rest = text[offset:offset + PROSE_WINDOW_CHARS].partition("\n")
        if window[-1:].isalpha() and rest.strip() and not rest.startswith("\n"):
            window += "\n" + rest.split("\n", 1)[0]
        for count, word in enumerate(re.finditer(r"\S+", window)):
            if count >= PROSE_WINDOW_WORDS:
                break
            value = word.group(0).strip(_WRAPPING).lstrip("=")  # ``key=…`` written tight
            if _prose_random(value):
                at = offset + word.start() + word.group(0).find(value)
                found.append(Finding(PROSE_SECRET, text.count("\n", 0, at) + 1, value))
    return found


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
