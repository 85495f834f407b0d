"""HTML pages of a documentation export → Markdown, so that they go through the one prose path
(headings → heading paths, Markdown links → citation links) instead of a second one.

Deliberately small and forgiving (the standard library's ``html.parser``, no DOM): headings,
paragraphs, lists, preformatted blocks, inline code, emphasis, links and simple tables are
kept; scripts, styles, the ``<head>``, navigation and images are dropped. Unclosed tags close
with their parent. Every link goes through ``link`` so the caller can point a page-to-page
link at the path the other page gets, or drop it.

Besides the Markdown, a page gives what Confluence's export puts around its content: the
``<title>``, the ``#title-text`` and the ``<ol id="breadcrumbs">`` trail (text, href).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
                  "param", "source", "track", "wbr"})
DROPPED = frozenset({"head", "script", "style", "template", "noscript", "svg", "nav", "title",
                     "button", "select", "textarea", "iframe", "object"})
BLOCKS = frozenset({"p", "div", "section", "article", "main", "header", "footer", "aside",
                    "figure", "figcaption", "dl", "dt", "dd", "address", "details", "summary",
                    "table", "form", "fieldset", "center", "body", "html"})
HEADINGS = {f"h{level}": level for level in range(1, 7)}
EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*"}


@dataclass
class HtmlPage:
    title: str = ""                 # <title>
    title_text: str = ""            # #title-text (Confluence's page heading)
    breadcrumbs: list[tuple[str, str]] = field(default_factory=list)  # (text, href)
    markdown: str = ""


def html_to_markdown(html: str, *, link: Callable[[str], str | None] = lambda href: href,
                     content_id: str | None = None) -> HtmlPage:
    """Convert a page. With ``content_id`` (Confluence's ``main-content``) only that element's
    content is converted, when the page has one: the rest is header, menus and footer."""
    if content_id and not re.search(rf"""id\s*=\s*["']{re.escape(content_id)}["']""", html):
        content_id = None
    parser = _Converter(link, content_id)
    parser.feed(html)
    parser.close()
    return parser.page()


class _Converter(HTMLParser):
    def __init__(self, link: Callable[[str], str | None], content_id: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.link = link
        self.content_id = content_id
        self.stack: list[tuple[str, str]] = []   # (tag, role) of open elements
        self.open: Counter[str] = Counter()      # the same, counted by tag
        self.buffers: list[list[str]] = [[]]     # a link's or a cell's text is built apart
        self.hrefs: list[str | None] = []
        self.lists: list[list] = []              # [ordered, counter]
        self.rows: list[list[str]] = []          # the current table's rows
        self.tables: list[list[list[str]]] = []
        self.pre = 0
        self.dropped = 0
        self.capture = 0 if content_id else 1
        self.page_ = HtmlPage()
        self._title: list[str] = []
        self._title_text: list[str] | None = None
        self._crumb: list[str] | None = None
        self._crumb_href = ""
        self.in_breadcrumbs = False

    # -- output -----------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        if self.capture and not self.dropped:
            self.buffers[-1].append(text)

    def block(self) -> None:
        self.emit("\n\n")

    # -- events ------------------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        ident = values.get("id", "")
        role = ""
        if tag not in VOID:
            if ident and ident == self.content_id:
                role = "content"
                self.capture += 1
            elif ident == "breadcrumbs":
                role = "breadcrumbs"
                self.in_breadcrumbs = True
            elif ident == "title-text":
                role = "title-text"
                self._title_text = []
            if tag in DROPPED:
                role = role or "dropped"
                self.dropped += 1
            self.stack.append((tag, role))
            self.open[tag] += 1
        if tag == "title":
            self._title = []
        if self.in_breadcrumbs and tag == "a":
            self._crumb, self._crumb_href = [], values.get("href", "")
        self._open(tag, values)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.open[tag]:
            return  # a stray end tag
        while self.stack:
            open_tag, role = self.stack.pop()
            self.open[open_tag] -= 1
            self._close(open_tag, role)
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.open["title"]:
            self._title.append(data)
        if self._title_text is not None:
            self._title_text.append(data)
        if self._crumb is not None:
            self._crumb.append(data)
        if self.pre:
            self.emit(data)
        else:
            self.emit(re.sub(r"\s+", " ", data))

    # -- elements ----------------------------------------------------------------------------
    def _open(self, tag: str, values: dict[str, str]) -> None:
        if tag in HEADINGS:
            self.block()
            self.emit("#" * HEADINGS[tag] + " ")
        elif tag in BLOCKS and tag != "table":
            self.block()
        elif tag in ("ul", "ol"):
            self.lists.append([tag == "ol", 0])
            if len(self.lists) == 1:
                self.block()
        elif tag == "li":
            depth = max(len(self.lists), 1)
            marker = "- "
            if self.lists and self.lists[-1][0]:
                self.lists[-1][1] += 1
                marker = f"{self.lists[-1][1]}. "
            self.emit("\n" + "   " * (depth - 1) + marker)
        elif tag == "pre":
            self.block()
            self.emit("```\n")
            self.pre += 1
        elif tag == "code" and not self.pre:
            self.emit("`")
        elif tag in EMPHASIS and not self.pre:
            self.emit(EMPHASIS[tag])
        elif tag == "blockquote":
            self.block()
            self.emit("> ")
        elif tag == "br":
            self.emit("\n" if self.pre else " ")
        elif tag == "hr":
            self.block()
            self.emit("---")
            self.block()
        elif tag == "a":
            self.hrefs.append(values.get("href"))
            self.buffers.append([])
        elif tag == "table":
            self.block()
            self.tables.append(self.rows)
            self.rows = []
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.buffers.append([])

    def _close(self, tag: str, role: str) -> None:
        if role == "dropped" or tag in DROPPED:
            self.dropped -= 1
        if tag == "title":
            self.page_.title = " ".join("".join(self._title).split())
        if role == "title-text" and self._title_text is not None:
            self.page_.title_text = " ".join("".join(self._title_text).split())
            self._title_text = None
        if self.in_breadcrumbs and tag == "a" and self._crumb is not None:
            text = " ".join("".join(self._crumb).split())
            if text:
                self.page_.breadcrumbs.append((text, self._crumb_href))
            self._crumb = None
        if role == "breadcrumbs":
            self.in_breadcrumbs = False
        if tag in HEADINGS or (tag in BLOCKS and tag != "table") or tag == "blockquote":
            self.block()
        elif tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            if not self.lists:
                self.block()
        elif tag == "pre":
            self.pre -= 1
            self.emit("\n```")
            self.block()
        elif tag == "code" and not self.pre:
            self.emit("`")
        elif tag in EMPHASIS and not self.pre:
            self.emit(EMPHASIS[tag])
        elif tag == "a":
            self._close_link()
        elif tag in ("td", "th"):
            cell = " ".join("".join(self.buffers.pop()).split()).replace("|", "\\|")
            if self.rows:
                self.rows[-1].append(cell)
        elif tag == "table":
            self._close_table()
        if role == "content":
            self.capture -= 1

    def _close_link(self) -> None:
        # Brackets in the text would end the link early for a Markdown reader.
        text = " ".join("".join(self.buffers.pop()).split()).replace("[", "(").replace("]", ")")
        href = self.hrefs.pop() if self.hrefs else None
        target = self.link(href) if href else None
        if target and text:
            self.emit(f"[{text}]({target})")
        else:
            self.emit(text)

    def _close_table(self) -> None:
        rows = [row for row in self.rows if any(row)]
        self.rows = self.tables.pop() if self.tables else []
        if not rows:
            return
        width = max(len(row) for row in rows)
        lines = []
        for index, row in enumerate(rows):
            cells = row + [""] * (width - len(row))
            lines.append("| " + " | ".join(cells) + " |")
            if index == 0:
                lines.append("|" + " --- |" * width)
        self.block()
        self.emit("\n".join(lines))
        self.block()

    def page(self) -> HtmlPage:
        while self.stack:
            tag, role = self.stack.pop()
            self._close(tag, role)
        while len(self.buffers) > 1:  # an unclosed link or cell
            text = "".join(self.buffers.pop())
            self.buffers[-1].append(text)
        text = "".join(self.buffers[0])
        lines = [line.rstrip() for line in text.split("\n")]
        # A block separator at the start of a list line, or spaces left by collapsed markup.
        text = "\n".join(line if line.strip() else "" for line in lines)
        text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
        self.page_.markdown = "\n".join(_tidy(text.split("\n"))) + "\n"
        return self.page_


def _tidy(lines: list[str]) -> list[str]:
    """Leading spaces left by collapsed whitespace would make Markdown read an indented code
    block; list items and preformatted lines keep their indentation."""
    out, fenced = [], False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        stripped = line.lstrip(" ")
        keep = fenced or line.startswith("```") or re.match(r"(?:[-*] |\d+\. )", stripped)
        out.append(line if keep else stripped)
    return out
