"""A deterministic "these two similar texts probably disagree" detector — no language model.

Both texts are cut into sentences ("claims"). Each claim of the older text is aligned with the
claim of the newer text that shares most content words (Jaccard over words that are not
stop words, negations or numbers). An aligned pair that is similar enough is then compared:

* **negation** — one side is negated (not, never, no, don't, …) and the other is not;
* **number** / **date** / **version** — both sides state values of that type and each side has a
  value the other lacks (a value was *replaced*; one side merely adding a detail is not a
  contradiction).

Numbers compare by value ("1,000" = "1000"); units are ignored, so "10 s" vs "10 seconds" agree
and "10 ms" vs "10 s" are not caught. Sentences without counterpart (added or removed text) are
never a contradiction: a newer fragment that only says more is consistent.
"""

from __future__ import annotations

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
# A number not glued to an identifier (sha256, utf-8, http2); an optional unit suffix (10s, 5%).
NUMBER = re.compile(r"(?<![\w.\-/:])(\d+(?:[.,]\d+)*)(?:%|[a-z]{1,7})?(?![\w\-/])",
                    re.IGNORECASE)
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")

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


def stem(word: str) -> str:
    """Crude suffix stripping so "deploys", "deploying" and "deploy" align (both sides get the
    same treatment, so over-stripping costs nothing)."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@dataclass(frozen=True)
class Claim:
    text: str
    words: frozenset[str]
    negated: bool
    numbers: frozenset[str]
    dates: frozenset[str]
    versions: frozenset[str]


@dataclass(frozen=True)
class Difference:
    kind: str        # negation | number | date | version
    older: str       # the claim in the older fragment
    newer: str       # the aligned claim in the newer fragment
    detail: str      # what differs, human-readable

    def describe(self) -> str:
        return f"{self.kind}: {self.detail} — “{_clip(self.older)}” vs “{_clip(self.newer)}”"


def _clip(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _normalise_number(raw: str) -> str:
    value = raw.replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".") or "0"
    return value.lstrip("0") or "0"


def claim(sentence: str) -> Claim:
    text = sentence.replace("’", "'").replace("‘", "'")
    lowered = text.lower()
    dates = frozenset(" ".join(m.group(0).lower().split()) for m in DATE.finditer(lowered))
    rest = DATE.sub(" ", lowered)
    versions = frozenset(m.group(0).lower().lstrip("v") for m in VERSION.finditer(rest))
    rest = VERSION.sub(" ", rest)
    numbers = frozenset(_normalise_number(m.group(1)) for m in NUMBER.finditer(rest))
    words = WORD.findall(rest)
    negated = any(w in NEGATIONS or w.endswith("n't") for w in words)
    content = frozenset(stem(w) for w in words
                        if w not in STOP_WORDS and w not in NEGATIONS and not w.endswith("n't")
                        and len(w) > 1)
    return Claim(sentence.strip(), content, negated, numbers, dates, versions)


def claims(text: str) -> list[Claim]:
    return [claim(s) for s in SENTENCE_END.split(text) if s and s.strip()]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _replaced(older: frozenset[str], newer: frozenset[str]) -> bool:
    return bool(older - newer) and bool(newer - older)


def differences(older_text: str, newer_text: str, min_overlap: float = 0.5) -> list[Difference]:
    """What the newer text states differently from the older one, claim by claim."""
    newer_claims = [c for c in claims(newer_text) if len(c.words) >= 2]
    found: list[Difference] = []
    seen: set[tuple[str, str, str]] = set()
    for old in claims(older_text):
        if len(old.words) < 2 or not newer_claims:
            continue
        overlap, new = max(((_jaccard(old.words, c.words), c) for c in newer_claims),
                           key=lambda item: item[0])
        if overlap < min_overlap:
            continue
        candidates = []
        if old.negated != new.negated:
            said, unsaid = ("negated", "affirmed") if old.negated else ("affirmed", "negated")
            candidates.append(("negation", f"older {said}, newer {unsaid}"))
        for kind, a, b in (("number", old.numbers, new.numbers),
                           ("date", old.dates, new.dates),
                           ("version", old.versions, new.versions)):
            if _replaced(a, b):
                candidates.append((kind, f"{', '.join(sorted(a - b))} → "
                                         f"{', '.join(sorted(b - a))}"))
        for kind, detail in candidates:
            key = (kind, old.text, new.text)
            if key not in seen:
                seen.add(key)
                found.append(Difference(kind, old.text, new.text, detail))
    return found
