"""Presenting fragment text: sanitized Markdown, highlighted code, and diffs between versions."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from contexts.models import Fragment
from contexts.models.fragments import Namespace

_FORMATTER = HtmlFormatter(nowrap=True)
_CLASSED = {"class"}
_ATTRIBUTES = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "span": _CLASSED, "div": _CLASSED, "pre": _CLASSED, "code": _CLASSED, "dl": _CLASSED,
}
LANGUAGE_ALIASES = {"ts": "typescript", "js": "javascript", "py": "python", "rs": "rust",
                    "golang": "go", "sh": "bash", "shell": "bash"}


def _lexer(language: str):
    name = LANGUAGE_ALIASES.get(language.lower(), language.lower()) if language else ""
    try:
        return get_lexer_by_name(name) if name else TextLexer()
    except ClassNotFound:
        return TextLexer()


def highlight_code(code: str, language: str) -> str:
    # Starts with "<pre" so that markdown-it uses it as the whole fenced block.
    spans = highlight(code, _lexer(language), _FORMATTER)
    return f'<pre class="highlight"><code>{spans}</code></pre>'



def _fence(code: str, language: str, _attrs) -> str:
    return highlight_code(code, language)


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "highlight": _fence}).enable(
    ["table", "strikethrough"])


def sanitize(html: str) -> SafeString:
    return mark_safe(nh3.clean(html, attributes=_ATTRIBUTES))  # nh3 has just cleaned it


def render_markdown(text: str) -> SafeString:
    return sanitize(_MARKDOWN.render(text))


# --- negative context: "Don't / Do instead / Why" ------------------------------------------------
# A negative context written in the console is one Markdown body of three level-2 sections, in
# this order, each heading alone on its line ("Why" may be left out):
#
#     ## Don't
#     <the trap>
#
#     ## Do instead
#     <the safe way>
#
#     ## Why
#     <the reason>
#
# Agents receive it as it is (plain Markdown); the console shows the sections as a definition
# list. A body in any other shape renders as ordinary Markdown. docs/console.md describes it.
NEGATIVE_SECTIONS = (("dont", "Don't"), ("instead", "Do instead"), ("why", "Why"))
_NEGATIVE = re.compile(r"\A## Don't[ \t]*\n(?P<dont>.*?)\n## Do instead[ \t]*\n(?P<instead>.*?)"
                       r"(?:\n## Why[ \t]*\n(?P<why>.*))?\Z", re.DOTALL)


def compose_negative(dont: str, instead: str, why: str = "") -> str:
    """The body of a negative context from its three parts (empty ``why``: no section)."""
    parts = {"dont": dont, "instead": instead, "why": why}
    sections = [f"## {label}\n{parts[key].strip()}\n" for key, label in NEGATIVE_SECTIONS
                if parts[key].strip()]
    return "\n".join(sections)


def split_negative(body: str) -> dict[str, str] | None:
    """The parts of a body in the negative-context format, or None if it is not in it."""
    match = _NEGATIVE.match(body.strip("\n") + "\n")
    if match is None:
        return None
    return {key: (match.group(key) or "").strip() for key, _ in NEGATIVE_SECTIONS}


def render_negative(parts: dict[str, str]) -> SafeString:
    items = "".join(f'<dt>{label}</dt><dd>{_MARKDOWN.render(parts[key])}</dd>'
                    for key, label in NEGATIVE_SECTIONS if parts.get(key))
    return sanitize(f'<dl class="negative-context">{items}</dl>')


def render_text(body: str, *, kind: str, namespace: str = "", language: str = "",
                negative: bool = False) -> SafeString:
    """A text as the fragment page shows it (also the "New fragment" preview)."""
    if namespace == Namespace.CODE or kind == "code":
        return sanitize(highlight_code(body, language))
    if negative or kind == "negative":
        parts = split_negative(body)
        if parts is not None:
            return render_negative(parts)
    return render_markdown(body)


def render_fragment_body(fragment: Fragment) -> SafeString:
    """Code fragments as highlighted code, a negative context in the "Don't / Do instead /
    Why" format as its three sections, everything else as Markdown; always sanitized."""
    return render_text(fragment.body, kind=fragment.kind, namespace=fragment.namespace,
                       language=fragment.language, negative=fragment.negative)


@dataclass(frozen=True)
class DiffLine:
    kind: str   # "add", "del", "ctx", "hunk"
    text: str


def diff_lines(before: str, after: str, *, context: int = 3) -> list[DiffLine]:
    """A unified diff as typed lines; the +/− markers stay in the text, so colour is never the
    only signal."""
    lines: list[DiffLine] = []
    for raw in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="",
                                    n=context):
        if raw.startswith(("---", "+++")):
            continue
        if raw.startswith("@@"):
            lines.append(DiffLine("hunk", raw))
        elif raw.startswith("+"):
            lines.append(DiffLine("add", raw))
        elif raw.startswith("-"):
            lines.append(DiffLine("del", raw))
        else:
            lines.append(DiffLine("ctx", raw))
    return lines
