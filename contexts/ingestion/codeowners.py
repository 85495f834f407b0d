"""``CODEOWNERS`` files as GitHub and GitLab read them: which entries own a path (issue 38).

Pure: text in, rules out, no database. Who an entry *is* (a member of the organization, or
nobody) is decided by :mod:`contexts.ingestion.owners`.

The syntax:

* one rule a line: a pattern, then owners separated by blanks; ``#`` starts a comment (a
  pattern starting with ``#`` is written ``\\#``); blank lines are nothing;
* GitLab's section headers (``[Docs]``, ``^[Optional]``, ``[Docs][2] @team``) are skipped:
  their rules count like any other;
* patterns are gitignore-like: a leading ``/`` or a ``/`` inside anchors the pattern at the
  root, otherwise it matches at any depth; ``*`` and ``?`` stay inside one directory, ``**``
  crosses them; a trailing ``/`` names a directory (everything under it); a pattern naming a
  directory without the ``/`` covers it too — except one ending in a wildcard: ``docs/*``
  owns ``docs/a.md`` but not ``docs/sub/b.md`` (GitHub's documented rule);
* the **last** matching rule wins; a rule with no owners leaves its paths unowned;
* owners are ``@login``, ``@org/team`` or an e-mail address, in order of preference; ``!``
  negations and anything else are reported, not guessed at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

# Where GitHub and GitLab look, in GitHub's order: the first one present is the file.
LOCATIONS: tuple[str, ...] = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS",
                              ".gitlab/CODEOWNERS")
MAX_BYTES = 3 * 1024 * 1024  # GitHub ignores a CODEOWNERS file larger than 3 MB
_SECTION = re.compile(r"^\^?\[[^\]]+\](\[\d+\])?(\s|$)")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_LOGIN = re.compile(r"^@[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,99})$")
_TEAM = re.compile(r"^@[A-Za-z0-9][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_.-]+)+$")


class EntryKind(StrEnum):
    LOGIN = "login"   # @login: a member's username
    EMAIL = "email"   # a member's e-mail address
    TEAM = "team"     # @org/team: a team of the code host, not a person here
    INVALID = "invalid"


@dataclass(frozen=True)
class Entry:
    """One owner of a rule as written, and what kind of name it is."""

    text: str

    @cached_property
    def kind(self) -> EntryKind:
        if _TEAM.match(self.text):
            return EntryKind.TEAM
        if _LOGIN.match(self.text):
            return EntryKind.LOGIN
        if _EMAIL.match(self.text):
            return EntryKind.EMAIL
        return EntryKind.INVALID

    @property
    def name(self) -> str:
        """A login without its ``@``, an e-mail address lower-cased."""
        return self.text[1:] if self.kind == EntryKind.LOGIN else self.text.lower()


@dataclass(frozen=True)
class Rule:
    pattern: str
    owners: tuple[Entry, ...]
    line: int
    regex: re.Pattern[str] = field(compare=False, repr=False)

    def matches(self, path: str) -> bool:
        return self.regex.match(path.lstrip("/")) is not None


@dataclass(frozen=True)
class Problem:
    line: int
    reason: str


@dataclass(frozen=True)
class CodeOwners:
    """A parsed file: its rules in file order, and the lines it could not read."""

    path: str
    rules: tuple[Rule, ...] = ()
    problems: tuple[Problem, ...] = ()

    def rule_for(self, path: str) -> Rule | None:
        """The last rule whose pattern matches ``path`` (relative to the root), or None."""
        for rule in reversed(self.rules):
            if rule.matches(path):
                return rule
        return None

    def owners_of(self, path: str) -> tuple[Entry, ...]:
        rule = self.rule_for(path)
        return rule.owners if rule is not None else ()


def find(present: set[str] | frozenset[str]) -> str | None:
    """Which of :data:`LOCATIONS` is the file, given the paths present at the root."""
    return next((location for location in LOCATIONS if location in present), None)


def parse(text: str, path: str = "CODEOWNERS") -> CodeOwners:
    rules: list[Rule] = []
    problems: list[Problem] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).strip()
        if not line or _SECTION.match(line):
            continue
        pattern, owners = _split(line)
        if pattern.startswith("!"):
            problems.append(Problem(number, "negated patterns are not CODEOWNERS syntax; "
                                            "the line is ignored"))
            continue
        try:
            regex = translate(pattern)
        except ValueError as exc:
            problems.append(Problem(number, f"pattern {pattern[:100]!r}: {exc}"))
            continue
        rules.append(Rule(pattern, tuple(Entry(o) for o in owners), number, regex))
    return CodeOwners(path, tuple(rules), tuple(problems))


def _strip_comment(line: str) -> str:
    """The line without its comment: a ``#`` not escaped as ``\\#``."""
    out, escaped = [], False
    for char in line:
        if char == "#" and not escaped:
            break
        escaped = char == "\\" and not escaped
        out.append(char)
    return "".join(out)


def _split(line: str) -> tuple[str, list[str]]:
    """The pattern (``\\ `` keeps a blank inside it) and the owners after it."""
    pattern, rest, i = [], "", 0
    while i < len(line):
        char = line[i]
        if char == "\\" and i + 1 < len(line):
            pattern.append(line[i + 1])
            i += 2
            continue
        if char.isspace():
            rest = line[i:]
            break
        pattern.append(char)
        i += 1
    return "".join(pattern), rest.split()


def translate(pattern: str) -> re.Pattern[str]:
    """A CODEOWNERS pattern as a regular expression over paths relative to the root."""
    directory = pattern.endswith("/")
    body = pattern.strip("/")
    if not body:
        if pattern.startswith("/"):  # "/" alone: the whole repository
            return re.compile(r"^.*$")
        raise ValueError("empty pattern")
    anchored = pattern.startswith("/") or "/" in body
    parts = body.split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            # leading: any directories before; inside: zero or more directories; last:
            # everything below.
            out.append(".*" if last else "(?:.*/)?")
            continue
        out.append(_segment(part) + ("" if last else "/"))
    regex = "".join(out)
    prefix = "^" if anchored else "^(?:.*/)?"
    if directory:
        suffix = "/.*$"
    elif parts[-1] != "**" and any(c in parts[-1] for c in "*?["):
        suffix = "$"  # docs/* owns the files in docs, not those in its subdirectories
    else:
        suffix = "(?:/.*)?$"  # a file, or a directory and everything under it
    return re.compile(prefix + regex + suffix)


def _segment(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        char = part[i]
        if char == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1  # "a**b" inside a segment is just "*"
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = part.find("]", i + 2 if i + 1 < len(part) and part[i + 1] == "!" else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                inner = part[i + 1:end]
                if inner.startswith("!"):
                    inner = "^" + inner[1:]
                out.append("[" + inner.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)
