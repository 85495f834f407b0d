"""A deterministic "the newer text says otherwise" detector for prose — no language model.

Both texts are cut into sentences and clauses ("claims"). A claim of the older text that the
newer text still makes word for word is not in question; each remaining claim is aligned with
the changed claim of the newer text that shares most content words (Jaccard over stemmed words
that are not stop words, negations, numbers or units), when each is the other's best match.
An aligned pair differs when

* **negation** — one side is negated (not, never, no, don't, …; "never … without" cancels out)
  and the other is not;
* **number** / **date** / **version** — both sides state values of that type and each side has
  a value the other lacks (a value was *replaced*; adding a detail is consistent). Numbers
  compare as quantities: "2 weeks" = "fourteen days", "6 GB" = "6144 MB", "1,000" = "1000";
* **reversal** — a word was replaced by its opposite (enable → disable, before → after, off →
  on), or the two sides of "then" / "before" / "after" swapped places;
* **name** — an identifier (a code span, ``UPPER_SNAKE``, ``dotted.name``, ``--flag``,
  ``#channel``) or a proper name (Redis, RS256) was replaced by another one.

What is *not* a claim: fenced code, URLs, headings, dated log lines ("2026-03-01: …",
"## 2.4.0 — …") and examples ("for example …"). Code spans count for names, never for
negation, so ``-> None`` is not a "no".
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

MONTHS = ("jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april|"
          "june|july|august|september|october|november|december")
DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{MONTHS})\.?(?:,?\s+\d{{4}})?\b",
    re.IGNORECASE,
)
VERSION = re.compile(
    r"(?<![\w.])v\d+(?:\.\d+)*(?:[-+][0-9a-z.]+)?\b"
    r"|(?<![\w.])\d+\.\d+\.\d+(?:[-+][0-9a-z.]+)?\b",
    re.IGNORECASE,
)
# A number not glued to an identifier (sha256, utf-8, http2, sev-2), then an optional unit
# glued on or after one space ("10s", "5%", "30 seconds").
NUMBER = re.compile(r"(?<![\w.\-/:#@])(\d+(?:[.,]\d+)*)(?![\w\-/])(%|\s?[a-z]+)?"
                    r"|(?<![\w.\-/:#@])(\d+(?:[.,]\d+)*)(%|[a-z]{1,7})(?![\w\-/])",
                    re.IGNORECASE)
PER = re.compile(r"\s*(?:[a-z]+\s+){0,2}?(?:(?:per|a|an)\s+|/\s*)([a-z]+)\b", re.IGNORECASE)
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
URL = re.compile(r"\b(?:https?|ftp)://\S+", re.IGNORECASE)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A line that records an event rather than states a rule: it starts with a date or a version
# heading ("2026-03-01: …", "- March 3, 2026 …", "## 2.4.0 — …").
LOG_LINE = re.compile(
    rf"^\s*(?:[-*|]\s*)?(?:#+\s*)?(?:\d{{4}}-\d{{2}}-\d{{2}}|(?:{MONTHS})\.?\s+\d{{1,2}},?\s+"
    rf"\d{{4}}|v?\d+\.\d+(?:\.\d+)?\s+[—–-])", re.IGNORECASE)
HEADING = re.compile(r"^\s*#{1,6}\s")
EXAMPLE = re.compile(r"\b(?:for example|for instance|e\.g\.|say,)", re.IGNORECASE)
# A token for the word-level comparison: a code span, a channel/handle/flag, or a word-ish run.
TOKEN = re.compile(r"`[^`\n]+`|[#@]?-{0,2}[A-Za-z0-9][\w\-./@#:]*")

NEGATIONS = frozenset({
    "not", "no", "never", "none", "nothing", "nobody", "neither", "nor", "nowhere", "cannot",
    "without", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "won't",
    "can't", "couldn't", "shouldn't", "mustn't", "needn't", "hasn't", "haven't", "hadn't",
    "wouldn't", "dont", "doesnt", "isnt", "arent", "wont", "cant", "shouldnt",
})
# Function words, plus polarity words that are not negations ("always X" vs "never X" must
# still align on X).
STOP_WORDS = frozenset("""
a an the and or but if then else of to in on at by for with from as is are was were be been
being it its this that these those there here we you they he she i our your their my me us them
do does did done has have had will would shall should can could may might must so such than too
very just also only all any each every some more most other into onto over under up down out
about after before again once always sometimes usually often per via vs etc e g ie now
""".split())
NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "fourteen": 14, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100,
    "twice": 2,
}
NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
# unit → (dimension, factor to the dimension's base unit). Months and years in days on
# average, so "1 year" = "12 months"; sizes in binary multiples ("6 GB" = "6144 MB").
_TIME = {"ms": 0.001, "millisecond": 0.001, "s": 1, "sec": 1, "second": 1, "min": 60,
         "minute": 60, "h": 3600, "hr": 3600, "hour": 3600, "d": 86400, "day": 86400,
         "week": 604800, "month": 2629800, "year": 31557600}
_SIZE = {"b": 1, "byte": 1, "kb": 2 ** 10, "kib": 2 ** 10, "mb": 2 ** 20, "mib": 2 ** 20,
         "gb": 2 ** 30, "gib": 2 ** 30, "tb": 2 ** 40, "tib": 2 ** 40}
UNITS = {**{u: ("time", f) for u, f in _TIME.items()},
         **{u: ("size", f) for u, f in _SIZE.items()}, "%": ("percent", 1)}
# Pairs of opposites: one replaced by the other reverses an instruction.
OPPOSITES = (("enable", "disable"), ("allow", "deny"), ("allow", "forbid"),
             ("allowed", "forbidden"), ("before", "after"), ("on", "off"),
             ("true", "false"), ("increase", "decrease"), ("minimum", "maximum"),
             ("min", "max"), ("ignore", "honour"), ("ignore", "honor"), ("ignore", "respect"),
             ("include", "exclude"), ("accept", "reject"), ("start", "stop"),
             ("required", "optional"), ("public", "private"), ("sync", "async"),
             ("synchronous", "asynchronous"), ("first", "last"), ("above", "below"),
             ("more", "less"), ("more", "fewer"), ("higher", "lower"), ("grant", "revoke"),
             ("add", "remove"), ("lock", "unlock"), ("permitted", "prohibited"),
             ("inbound", "outbound"), ("encrypted", "unencrypted"))
SEQUENCE = ("then", "before", "after", "until")


def stem(word: str) -> str:
    """Crude suffix stripping so "deploys", "deploying" and "deploy" align (both sides get the
    same treatment, so over-stripping costs nothing)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


_OPPOSITE: dict[str, str] = {}
for _a, _b in OPPOSITES:
    _OPPOSITE[stem(_a)] = stem(_b)
    _OPPOSITE[stem(_b)] = stem(_a)
# Opposites align as the same content word ("enable X" ~ "disable X").
_CANONICAL = {s: min(s, o) for s, o in _OPPOSITE.items()}


@dataclass(frozen=True)
class Claim:
    text: str
    words: frozenset[str]
    negated: bool
    numbers: frozenset[str]
    quantities: frozenset[tuple[str, float]]
    dates: frozenset[str]
    versions: frozenset[str]
    # A Markdown table row is a record keyed by its first cell: it is only ever compared with
    # the row of the same key (two rows of a results table are two measurements, not one fact
    # restated), and never with a sentence.
    row_key: str | None = None


@dataclass(frozen=True)
class Difference:
    kind: str        # negation | number | date | version | reversal | name
    older: str       # the claim in the older fragment
    newer: str       # the aligned claim in the newer fragment
    detail: str      # what differs, human-readable

    def describe(self) -> str:
        return f"{self.kind}: {self.detail} — “{_clip(self.older)}” vs “{_clip(self.newer)}”"

    def explain(self) -> str:
        """The difference in plain words, for a nudge."""
        return {
            "negation": f"one says the opposite of the other ({self.detail})",
            "number": f"a number changed ({self.detail})",
            "date": f"a date changed ({self.detail})",
            "version": f"a version changed ({self.detail})",
            "reversal": f"an instruction is reversed ({self.detail})",
            "name": f"a name changed ({self.detail})",
        }.get(self.kind, self.detail)


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _normalise_number(raw: str) -> str:
    value = raw.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".") or "0"
    return value.lstrip("0") or "0"


def _unit(raw: str | None) -> tuple[str, float]:
    word = (raw or "").strip().lower()
    if word in UNITS:
        return UNITS[word]
    if word.endswith("s") and word[:-1] in UNITS and len(word) > 2:
        return UNITS[word[:-1]]
    return "", 1.0


def _quantities(text: str) -> tuple[frozenset[str], frozenset[tuple[str, float]]]:
    numbers, quantities = set(), set()
    for match in NUMBER.finditer(text):
        raw, unit = (match.group(1), match.group(2)) if match.group(1) else (
            match.group(3), match.group(4))
        value = _normalise_number(raw)
        numbers.add(value)
        dimension, factor = _unit(unit)
        # "600 requests per minute" = "10 requests per second": a rate is per base time unit.
        per = PER.match(text, match.end())
        if per and _unit(per.group(1))[0] == "time":
            dimension, factor = f"{dimension}/time", factor / _unit(per.group(1))[1]
        # Rounded to 4 significant digits, so conversions compare equal.
        quantities.add((dimension, float(f"{float(value) * factor:.4g}")))
    return frozenset(numbers), frozenset(quantities)


def _spoken_numbers(text: str) -> str:
    return NUMBER_WORD.sub(lambda m: str(NUMBER_WORDS[m.group(1).lower()]), text)


def _negated(words: list[str]) -> bool:
    found = [w for w in words if (w in NEGATIONS or w.endswith("n't")) and w not in ("nor",)]
    # "never X without Y" says X needs Y: the two negations cancel.
    if "without" in found and len(found) >= 2:
        return len(found) > 2
    return bool(found)


def claim(sentence: str) -> Claim:
    text = sentence.replace("’", "'").replace("‘", "'")
    # Code spans name things; they never negate ("-> None") and their digits are values only
    # when the whole span is a value.
    prose = CODE_SPAN.sub(lambda m: m.group(1) if re.fullmatch(r"[\d.,]+\s*\w{0,7}", m.group(1))
                          else " ", text)
    # "None" in prose is Python's None unless it reads "None of …".
    prose = re.sub(r"\bNone\b(?!\s+of\b)", " ", prose)
    lowered = _spoken_numbers(prose).lower()
    dates = frozenset(" ".join(m.group(0).lower().split()) for m in DATE.finditer(lowered))
    rest = DATE.sub(" ", lowered)
    versions = frozenset(m.group(0).lower().lstrip("v") for m in VERSION.finditer(rest))
    rest = VERSION.sub(" ", rest)
    numbers, quantities = _quantities(rest)
    words = WORD.findall(rest)
    content = frozenset(_CANONICAL.get(stem(w), stem(w)) for w in words
                        if w not in STOP_WORDS and w not in NEGATIONS and not w.endswith("n't")
                        and len(w) > 1 and _unit(w)[0] == "")
    # A code span is one thing, however many words it spells.
    content |= {span.strip().lower() for span in CODE_SPAN.findall(text)}
    return Claim(sentence.strip(), content, _negated(words), numbers, quantities, dates,
                 versions, _row_key(text))


def _row_key(text: str) -> str | None:
    stripped = text.strip()
    if not stripped.startswith("|"):
        return None
    first = stripped.strip("|").split("|", 1)[0]
    return " ".join(first.replace("`", "").lower().split())


def statements(text: str) -> str:
    """The part of a prose text that states things: no fenced code, URLs, headings, dated log
    lines or examples."""
    text = URL.sub(" ", FENCE.sub("\n", text))
    lines = [line for line in text.splitlines()
             if not LOG_LINE.match(line) and not HEADING.match(line)]
    return "\n".join(lines).replace("e.g.", "for example")


def claims(text: str) -> list[Claim]:
    return [claim(s) for s in SENTENCE_END.split(statements(text))
            if s and s.strip() and not EXAMPLE.search(s)]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _replaced(older: frozenset, newer: frozenset) -> bool:
    return bool(older - newer) and bool(newer - older)


def _fmt(values: frozenset) -> str:
    return ", ".join(sorted(str(v) for v in values))


def _tokens(text: str) -> list[str]:
    return [t.rstrip(".,;:") for t in TOKEN.findall(text.replace("’", "'"))]


def _is_identifier(token: str) -> bool:
    if token.startswith("`"):
        return not re.fullmatch(r"`[\d.,]+\s*[a-z%]{0,7}`", token)
    return bool(re.search(r"[a-z0-9]_[a-z0-9]|[A-Z0-9]_[A-Z0-9]|^--?\w|^[#@]\w|\w\.\w+\(|"
                          r"^[a-z]+\.[a-z_]+\.", token))


def _is_name(token: str) -> bool:
    """A proper name or a constant-like word: Redis, RabbitMQ, RS256, INFO (not a number)."""
    return (bool(re.fullmatch(r"[A-Za-z][\w\-]*", token)) and any(c.isupper() for c in token)
            and _unit(token)[0] == "")


def _word_changes(old: str, new: str) -> list[tuple[str, str]]:
    """(kind, detail) for opposites, renamed identifiers and swapped names, from a token diff
    of the two claims; only small, local replacements count."""
    a, b = _tokens(old), _tokens(new)
    found: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(a=[t.lower() for t in a], b=[t.lower() for t in b],
                                      autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "replace" or i2 - i1 > 4 or j2 - j1 > 4:
            continue
        olds, news = a[i1:i2], b[j1:j2]
        stems_old = {stem(t.lower()) for t in olds}
        for t in news:
            if _OPPOSITE.get(stem(t.lower())) in stems_old:
                found.append(("reversal", f"{' '.join(olds)} → {' '.join(news)}"))
                break
        else:
            ids_old = [t for t in olds if _is_identifier(t)]
            ids_new = [t for t in news if _is_identifier(t)]
            if ids_old and ids_new:
                found.append(("name", f"{' '.join(ids_old)} → {' '.join(ids_new)}"))
                continue
            content_old = [t for t in olds if t.lower() not in STOP_WORDS and not t[0].isdigit()]
            content_new = [t for t in news if t.lower() not in STOP_WORDS and not t[0].isdigit()]
            if (i1 > 0 and j1 > 0 and content_old and content_new
                    and all(_is_name(t) for t in content_old + content_new)):
                found.append(("name", f"{' '.join(content_old)} → {' '.join(content_new)}"))
    return found


def _sequence_swapped(old: Claim, new: Claim) -> str | None:
    """"Cordon, then drain" vs "drain, then cordon": the same connector, sides swapped."""
    def sides(text: str) -> tuple[str, frozenset[str], frozenset[str]] | None:
        words = WORD.findall(CODE_SPAN.sub(" ", text).lower())
        for i, w in enumerate(words):
            if w in SEQUENCE:
                left = {stem(x) for x in words[:i] if x not in STOP_WORDS}
                right = {stem(x) for x in words[i + 1:] if x not in STOP_WORDS}
                return w, frozenset(left), frozenset(right)
        return None
    a, b = sides(old.text), sides(new.text)
    if a is None or b is None or a[0] != b[0]:
        return None
    moved_back, moved_forward = a[1] & b[2] - b[1], a[2] & b[1] - b[2]
    if moved_back and moved_forward:
        return f"“{' '.join(sorted(moved_back))}” and “{' '.join(sorted(moved_forward))}” " \
               f"swapped around “{a[0]}”"
    return None


def _compare(old: Claim, new: Claim) -> list[tuple[str, str]]:
    found = []
    if old.negated != new.negated:
        found.append(("negation", "this one says it is so, the newer one that it is not"
                      if new.negated else "this one says it is not so, the newer one that it is"))
    if _replaced(old.quantities, new.quantities):
        gone = {n for n in old.numbers if n not in new.numbers} or old.numbers
        came = {n for n in new.numbers if n not in old.numbers} or new.numbers
        found.append(("number", f"{_fmt(frozenset(gone))} → {_fmt(frozenset(came))}"))
    for kind, a, b in (("date", old.dates, new.dates), ("version", old.versions, new.versions)):
        if _replaced(a, b):
            found.append((kind, f"{_fmt(a - b)} → {_fmt(b - a)}"))
    found.extend(_word_changes(old.text, new.text))
    swapped = _sequence_swapped(old, new)
    if swapped and not any(kind == "reversal" for kind, _ in found):
        found.append(("reversal", swapped))
    return found


def _key(c: Claim) -> str:
    return " ".join(_tokens(c.text)).lower()


def differences(older_text: str, newer_text: str, min_overlap: float = 0.5) -> list[Difference]:
    """What the newer text states differently from the older one, claim by claim."""
    older_claims = [c for c in claims(older_text) if len(c.words) >= 2]
    newer_claims = [c for c in claims(newer_text) if len(c.words) >= 2]
    # A claim both texts make is settled; only changed claims can disagree.
    kept = {_key(c) for c in older_claims} & {_key(c) for c in newer_claims}
    olds = [c for c in older_claims if _key(c) not in kept]
    news = [c for c in newer_claims if _key(c) not in kept]
    found: list[Difference] = []
    seen: set[tuple[str, str, str]] = set()
    for old in olds:
        if not news:
            break
        same_shape = [c for c in news if c.row_key == old.row_key]
        if not same_shape:
            continue
        overlap, new = max(((_jaccard(old.words, c.words), c) for c in same_shape),
                           key=lambda item: item[0])
        if overlap < min_overlap:
            continue
        # Mutual best match: a sentence of the newer text answers for one older sentence only
        # (parallel rows of a table must not be compared across).
        best_back = max((c for c in olds if c.row_key == new.row_key),
                        key=lambda c: _jaccard(c.words, new.words))
        if best_back is not old and _jaccard(best_back.words, new.words) > overlap:
            continue
        for kind, detail in _compare(old, new):
            key = (kind, old.text, new.text)
            if key not in seen:
                seen.add(key)
                found.append(Difference(kind, old.text, new.text, detail))
    return found
