"""Presenting fragment text: sanitized Markdown, highlighted code, and diffs between versions."""

from __future__ import annotations

import difflib
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
    "span": _CLASSED, "div": _CLASSED, "pre": _CLASSED, "code": _CLASSED,
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


def render_fragment_body(fragment: Fragment) -> SafeString:
    """Code fragments as highlighted code, everything else as Markdown; always sanitized."""
    if fragment.namespace == Namespace.CODE or fragment.kind == "code":
        return sanitize(highlight_code(fragment.body, fragment.language))
    return render_markdown(fragment.body)


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
