"""Documentation exports: an uploaded zip becomes the job's files, each page one Markdown
document whose front matter carries its title and its place in the hierarchy (``breadcrumbs``,
which :mod:`~contexts.ingestion.normalize` turns into the heading path every fragment of the
page starts with).

Three layouts, told apart by the member names (:func:`detect_layout`):

* **confluence** — a space's HTML export: ``<SPACE>/index.html``, pages ``Title_123456.html``
  with a ``<ol id="breadcrumbs">`` naming their ancestors, ``attachments/``, ``images/``,
  ``styles/``. A page is its ``#main-content`` converted to Markdown, titled by ``#title-text``
  without the space prefix, at ``<SPACE>/Title.md``. The index (the page tree), attachments,
  images and style sheets are skipped, each directory with its reason.
* **notion** — Markdown and CSV: ``Page Title <32 hex>.md`` with its children in a folder of the
  same name (Notion's HTML export alike, its pages converted to Markdown). Titles and paths
  lose the id (unless two pages would then share a path); the folders that are pages make the
  hierarchy. A database's ``.csv`` is skipped: its rows are
  ``.md`` pages in the database's folder and are ingested as pages, with the same properties
  and their bodies; a CSV of thousands of rows would be one oversized table.
* **plain** — Markdown, HTML and text as they are in the archive (HTML converted to Markdown,
  ``page.html`` → ``page.md``), the folders as the hierarchy.

Links between pages (Confluence ``href="Other_98765.html"``, Notion
``Other%20Page%20<id>.md``) are rewritten to the paths the pages get here, so the pipeline's
link resolution (``resolve_link``) turns them into citation links that feed authority.

The archive itself is checked first (:mod:`~contexts.ingestion.archives`); the job lists it
as ``archive: <layout>`` among its skipped files, with the members left out and why.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from urllib.parse import unquote

from contexts.ingestion.archives import Archive, ArchiveRefused, looks_like_zip, open_archive
from contexts.ingestion.html_markdown import html_to_markdown
from contexts.ingestion.normalize import split_front_matter
from contexts.ingestion.sources import Skipped, SourceFile, checked, from_uploads, ingestible
from contexts.kernel.sizes import size_over

CONFLUENCE, NOTION, PLAIN = "confluence", "notion", "plain"
LAYOUT_NAMES = {CONFLUENCE: "Confluence space export", NOTION: "Notion export",
                PLAIN: "plain zip"}
HTML_SUFFIXES = (".html", ".htm")
CONFLUENCE_ASSETS = {"attachments": "confluence export: attachments",
                     "images": "confluence export: images",
                     "styles": "confluence export: style sheets"}
CONFLUENCE_INDEX = "confluence export: space index (the page tree)"
NOTION_DATABASE = "notion export: database table (its rows are ingested as pages)"
NOTION_ATTACHMENT = "notion export: attachment"
NESTED_ARCHIVE = "nested archive (not expanded)"
NOT_INGESTED = "not a format Contexts ingests"
MAX_BREADCRUMBS = 20

_CONFLUENCE_PAGE = re.compile(r"^(?P<stem>.+?)_(?P<id>\d+)\.html?$")
_NOTION_ID = re.compile(r"^(?P<title>.*?) ?(?P<id>[0-9a-f]{32})$")
_MD_LINK = re.compile(r"(?<!!)(\[[^\]\n]*\]\()\s*(<[^>\n]+>|[^)\s>]+)(\s+\"[^\"]*\")?\s*\)")


@dataclass(frozen=True)
class Page:
    """A member the layout reads, and where and under what it goes."""

    member: str
    path: str                       # the document's path (posix, as the job records it)
    title: str | None = None        # None: the page's own (front matter or first heading)
    breadcrumbs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    layout: str
    pages: list[Page]
    skipped: list[Skipped]

    def path_of(self) -> dict[str, str]:
        return {page.member: page.path for page in self.pages}


def detect_layout(names: list[str]) -> str:
    """The layout an archive's member names say: Confluence's ``index.html`` beside
    ``Title_123.html`` pages or an ``attachments/`` folder; Notion's ids on ``.md``/``.csv``
    (or, exported as HTML, ``.html``) names; plain otherwise."""
    base = {posixpath.basename(name) for name in names}
    notion = sum(1 for name in names if name.endswith((".md", ".csv", ".html"))
                 and _NOTION_ID.match(posixpath.splitext(posixpath.basename(name))[0]))
    if notion:
        return NOTION
    if "index.html" in base and any(
            _CONFLUENCE_PAGE.match(posixpath.basename(name))
            or "/attachments/" in f"/{name}" for name in names):
        return CONFLUENCE
    return PLAIN


def plan(archive: Archive, *, max_bytes: int) -> Plan:
    """Which members become which documents; what is skipped and why. Names only: no member
    is read."""
    names = [member.name for member in archive.members]
    layout = detect_layout(names)
    planner = {CONFLUENCE: _plan_confluence, NOTION: _plan_notion, PLAIN: _plan_plain}[layout]
    pages, skipped = planner(names)
    sizes = {member.name: member.size for member in archive.members}
    kept = []
    for page in pages:
        if sizes[page.member] > max_bytes:
            skipped.append(Skipped(page.member,
                                   f"too large: {size_over(sizes[page.member], max_bytes)}"))
        else:
            kept.append(page)
    return Plan(layout, kept, skipped)


def check(raw: bytes, *, max_bytes: int) -> Plan:
    """At upload time: the archive's bounds and names, its layout, and every member the layout
    reads decompressed once (a corrupt one is refused now). Raises
    :class:`~contexts.ingestion.archives.ArchiveRefused`."""
    archive = open_archive(raw)
    result = plan(archive, max_bytes=max_bytes)
    archive.verify(page.member for page in result.pages)
    return result


def expand(name: str, raw: bytes, *, max_bytes: int) -> Iterator[SourceFile | Skipped]:
    """One uploaded archive → its documents (and what was left out, and the layout)."""
    try:
        archive = open_archive(raw)
        result = plan(archive, max_bytes=max_bytes)
    except ArchiveRefused as exc:  # checked at upload; only different settings get here
        yield Skipped(name, f"archive refused: {exc}")
        return
    yield Skipped(name, f"archive: {LAYOUT_NAMES[result.layout]}")
    yield from result.skipped
    paths = result.path_of()
    raws: dict[str, bytes] = {}
    for page in result.pages:
        try:
            raws[page.member] = archive.read(page.member)
        except ArchiveRefused as exc:
            yield Skipped(page.path, f"archive refused: {exc}")
    pages = [page for page in result.pages if page.member in raws]
    if result.layout == NOTION:
        pages = _notion_titles(pages, raws)
    for page in pages:
        text = _document_text(result.layout, page, raws[page.member], paths)
        yield checked(SourceFile(page.path, text.encode("utf-8")))


def from_uploads_with_archives(files: Iterable[tuple[str, bytes]], *,
                               max_bytes: int) -> Iterator[SourceFile | Skipped]:
    """An upload job's files: zips expanded here, every other file as
    :func:`~contexts.ingestion.sources.from_uploads` reads it."""
    for name, raw in files:
        if looks_like_zip(name):
            yield from expand(name, raw, max_bytes=max_bytes)
        else:
            yield from from_uploads([(name, raw)], max_bytes=max_bytes)


# -- the layouts' plans -------------------------------------------------------------------------
def _plan_confluence(names: list[str]) -> tuple[list[Page], list[Skipped]]:
    pages: list[tuple[str, str]] = []
    skipped: list[Skipped] = []
    skipped_dirs: set[str] = set()
    for name in names:
        parts = name.split("/")
        asset = next((i for i, part in enumerate(parts[:-1]) if part in CONFLUENCE_ASSETS
                      and i <= 1), None)
        if asset is not None:
            folder = "/".join(parts[:asset + 1]) + "/"
            if folder not in skipped_dirs:
                skipped_dirs.add(folder)
                skipped.append(Skipped(folder, CONFLUENCE_ASSETS[parts[asset]]))
        elif parts[-1] == "index.html" and len(parts) <= 2:
            skipped.append(Skipped(name, CONFLUENCE_INDEX))
        elif name.lower().endswith(HTML_SUFFIXES):
            match = _CONFLUENCE_PAGE.match(parts[-1])
            stem = match.group("stem") if match else posixpath.splitext(parts[-1])[0]
            pages.append((name, posixpath.join(*parts[:-1], stem + ".md")
                          if len(parts) > 1 else stem + ".md"))
        else:
            skipped.append(_other(name))
    return [Page(member, path) for member, path in _unique(pages)], skipped


def _plan_notion(names: list[str]) -> tuple[list[Page], list[Skipped]]:
    pages: list[tuple[str, str]] = []
    skipped: list[Skipped] = []
    crumbs: dict[str, tuple[str, ...]] = {}
    titles: dict[str, str] = {}
    for name in names:
        parts = name.split("/")
        stem, suffix = posixpath.splitext(parts[-1])
        if suffix.lower() == ".csv" and _NOTION_ID.match(stem.removesuffix("_all")):
            skipped.append(Skipped(name, NOTION_DATABASE))
        elif suffix.lower() in (".md", ".markdown", *HTML_SUFFIXES):
            # Markdown as it is; Notion's HTML export converted to Markdown.
            folders = [_strip_id(part) for part in parts[:-1]]
            markdown = suffix if suffix.lower() in (".md", ".markdown") else ".md"
            pages.append((name, "/".join([*folders, _strip_id(stem) + markdown])))
            titles[name] = _strip_id(stem)
            # Folders with an id are pages or databases; one without (an export's wrapper
            # folder) is not part of the hierarchy.
            crumbs[name] = tuple(_strip_id(part) for part in parts[:-1]
                                 if _NOTION_ID.match(part))
        elif looks_like_zip(name):
            skipped.append(Skipped(name, NESTED_ARCHIVE))
        elif ingestible(parts[-1]):
            pages.append((name, name))
            crumbs[name] = ()
        else:
            skipped.append(Skipped(name, NOTION_ATTACHMENT))
    return [Page(member, path, titles.get(member), crumbs[member])
            for member, path in _unique(pages)], skipped


def _plan_plain(names: list[str]) -> tuple[list[Page], list[Skipped]]:
    pages: list[tuple[str, str]] = []
    skipped: list[Skipped] = []
    taken = set(names)
    for name in names:
        stem, suffix = posixpath.splitext(name)
        if suffix.lower() in HTML_SUFFIXES:
            path = stem + ".md"
            pages.append((name, path if path not in taken else name + ".md"))
        elif ingestible(posixpath.basename(name)):
            pages.append((name, name))
        else:
            skipped.append(_other(name))
    return [Page(member, path, None, tuple(path.split("/")[:-1]))
            for member, path in _unique(pages)], skipped


def _other(name: str) -> Skipped:
    return Skipped(name, NESTED_ARCHIVE if looks_like_zip(name) else NOT_INGESTED)


def _notion_titles(pages: list[Page], raws: dict[str, bytes]) -> list[Page]:
    """Notion drops from a file name what a file name cannot hold ("RFC: Auth/SSO" is
    ``RFC Auth SSO <id>.md``); the page's own first heading (Markdown) or ``<title>`` (HTML)
    has the real title. It titles the page and names it in its children's breadcrumbs."""
    titles: dict[str, str] = {}
    for page in pages:
        head = raws[page.member][:65536].decode("utf-8", errors="replace")
        if page.member.lower().endswith(HTML_SUFFIXES):
            found = re.search(r"<title>(.*?)</title>", head, re.IGNORECASE | re.DOTALL)
            title = " ".join(html.unescape(found.group(1)).split()) if found else ""
        else:
            first = head.lstrip().split("\n", 1)[0]
            title = first[2:].strip() if first.startswith("# ") else ""
        if title:
            titles[page.member] = title
    # A page's children are in the folder named as its file without the suffix.
    by_folder = {posixpath.splitext(member)[0]: title for member, title in titles.items()}
    placed = []
    for page in pages:
        folders = page.member.split("/")[:-1]
        crumbs = tuple(by_folder.get("/".join(folders[:depth + 1]), _strip_id(folder))
                       for depth, folder in enumerate(folders) if _NOTION_ID.match(folder))
        placed.append(replace(page, title=titles.get(page.member, page.title),
                              breadcrumbs=crumbs))
    return placed


def _strip_id(name: str) -> str:
    match = _NOTION_ID.match(name)
    return match.group("title").strip() or name if match else name


def _unique(pages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Two members that would share a path (two "Untitled" pages) keep their archive names."""
    counts = Counter(path for _, path in pages)
    return [(member, path if counts[path] == 1 else member) for member, path in pages]


# -- the documents ---------------------------------------------------------------------------
def _document_text(layout: str, page: Page, raw: bytes, paths: dict[str, str]) -> str:
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff").replace("\r\n", "\n")
    is_html = page.member.lower().endswith(HTML_SUFFIXES)
    link = _linker(page, paths)
    title, crumbs = page.title, page.breadcrumbs
    if is_html:
        converted = html_to_markdown(text, link=link,
                                     content_id="main-content" if layout == CONFLUENCE else None)
        text = converted.markdown
        if layout == CONFLUENCE:
            title, crumbs = _confluence_place(page, converted.title_text or converted.title,
                                              converted.breadcrumbs, paths)
        else:
            title = page.title or converted.title or None
    elif page.path.endswith((".md", ".markdown")):
        text = _rewrite_markdown_links(text, link)
    else:
        return text  # plain text and code: no front matter to carry a place
    first_line = text.lstrip().split("\n", 1)[0].strip()
    if title and first_line != f"# {title}" and split_front_matter(text) is None:
        text = f"# {title}\n\n{text}"  # the page's own title heads its sections
    return _with_front_matter(text, title, crumbs)


def _confluence_place(page: Page, title: str, breadcrumbs: list[tuple[str, str]],
                      paths: dict[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """Title without the ``Space : `` prefix; ancestors from the breadcrumb trail (the space
    first), without the page itself should the export list it."""
    crumbs = [text for text, _ in breadcrumbs]
    space = crumbs[0] if crumbs else ""
    if space and title.startswith(f"{space} : "):
        title = title[len(space) + 3:]
    elif not space and " : " in title:
        title = title.split(" : ", 1)[1]
    if breadcrumbs and _target(page.member, breadcrumbs[-1][1]) == page.member:
        crumbs = crumbs[:-1]
    return title.strip() or None, tuple(crumbs)


def _linker(page: Page, paths: dict[str, str]) -> Callable[[str], str | None]:
    """href or Markdown target → the target page's path relative to this page's, a URL as it
    is, or None (a link to something not ingested: its text stays)."""
    here = posixpath.dirname(page.path)

    def link(href: str) -> str | None:
        href = href.strip()
        if not href or href.startswith("#"):
            return None
        if "://" in href or href.startswith(("mailto:", "/")):
            return href
        member = _target(page.member, href)
        if member not in paths:
            return None
        return posixpath.relpath(paths[member], here or ".")
    return link


def _target(member: str, href: str) -> str:
    href = unquote(href.split("#", 1)[0].split("?", 1)[0])
    return posixpath.normpath(posixpath.join(posixpath.dirname(member), href))


def _rewrite_markdown_links(text: str, link: Callable[[str], str | None]) -> str:
    def replace(match: re.Match[str]) -> str:
        target = match.group(2).strip("<>")
        if "://" in target or target.startswith(("#", "mailto:")):
            return match.group(0)
        new = link(target)
        if new is None:
            return match.group(0)
        return f"{match.group(1)}{_destination(new)}{match.group(3) or ''})"
    return _MD_LINK.sub(replace, text)


def _destination(path: str) -> str:
    """A link destination CommonMark reads whole: in angle brackets when it has spaces."""
    return f"<{path}>" if re.search(r"[\s()<>]", path) else path


def _with_front_matter(text: str, title: str | None, crumbs: tuple[str, ...]) -> str:
    """Add ``title`` and ``breadcrumbs`` to the page's front matter (creating it), leaving any
    key the page already sets alone. JSON values are YAML."""
    keys = {}
    if title:
        keys["title"] = title
    crumbs = tuple(crumb for crumb in crumbs if crumb.strip())[:MAX_BREADCRUMBS]
    if crumbs:
        keys["breadcrumbs"] = list(crumbs)
    if not keys:
        return text
    existing = split_front_matter(text)
    if existing is not None:
        data, body = existing
        lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in keys.items()
                 if key not in data]
        head = text[4:len(text) - len(body)]  # its own lines and the closing ---
        return "---\n" + "".join(line + "\n" for line in lines) + head + body
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in keys.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + text
