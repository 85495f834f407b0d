"""Syncs say what they did (issue 38, item 6).

The Sources page lists each sync of a git source that applied changes, newest first and
paginated: the commit range, the files added, modified, deleted and renamed, and the fragments
created, updated, merged, conflicted and retired, each linked. A fragment's history names the
commit of every version a sync wrote, linked to the source's permalink when it has a template.

Real git (``git init`` under ``tmp_path``), real syncs (``git_sync.run_sync``), the real console.
"""

from __future__ import annotations

import html
import re

import pytest

from accounts.permissions import SYSTEM
from contexts.console.views import sources as sources_view
from contexts.ingestion.git_sync import run_sync
from contexts.models import Fragment, FragmentStatus, SourcePointer
from contexts.usecases.sources import AddGitSource, add_source
from tests.connectors.conftest import GIT_IDENTITY, GitRepo
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - the console's cast of people
from tests.ingestion.conftest import prose

pytestmark = pytest.mark.django_db
TEMPLATE = "https://git.example.com/acme/web/blob/{commit}/{path}#L{start_line}-L{end_line}"
PAGE = "/o/acme/sources/"


def note(seed: str) -> str:
    return f"# Note {seed}\n\n{prose(seed, 60)}\n"


@pytest.fixture
def synced(cast, tmp_path, settings, monkeypatch):  # noqa: F811
    """A source of the cast's ``web`` repository, synced twice: first three notes, then one
    modified, one deleted, one renamed and one added."""
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    for name, value in GIT_IDENTITY.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    root = tmp_path / "upstream"
    root.mkdir()
    repo = GitRepo(root)
    repo.git("init", "-q", "-b", "main")
    repo.commit("three notes", {"docs/a.md": note("a"), "docs/b.md": note("b"),
                                "docs/c.md": note("c")})
    source = add_source(SYSTEM, AddGitSource(org="acme", repo="web", url=str(root),
                                             web_url_template=TEMPLATE))
    first = run_sync(source.pk)
    repo.commit("change them", {"docs/a.md": note("a") + "\nOne more line, changed.\n",
                                "docs/b.md": None, "docs/e.md": note("e")},
                renames={"docs/c.md": "docs/d.md"})
    second = run_sync(source.pk)
    assert not first.error and not second.error
    return source, repo, first, second


def syncs_section(text: str) -> str:
    start = text.index('id="syncs"')
    return text[start:text.index("</section>", start)]


def rows(section: str) -> list[str]:
    return section.split('<tr id="sync-')[1:]


def counts(row: str) -> dict[str, int]:
    return {f"{part} {kind}": int(n) for part, kind, n in re.findall(
        r'class="sync-(files|fragments) sync-(\w+)"><summary><span class="sync-count">(\d+)',
        row)}


def fragment_of(path: str) -> Fragment:
    return SourcePointer.objects.select_related("fragment").get(
        document__path=path).fragment


def test_the_sources_page_lists_each_sync_with_what_it_did(cast, synced):  # noqa: F811
    source, repo, first, second = synced
    client = client_for(cast.lead)
    page = client.get(PAGE)
    assert page.status_code == 200
    listed = rows(syncs_section(page.content.decode()))
    assert len(listed) == 2
    newest, oldest = listed
    # newest first, each with its commit range
    assert f"{repo.commits[0][:12]}</span>..<span title=\"{repo.commits[1]}\">" in newest
    assert f"(none)</span>..<span title=\"{repo.commits[0]}\">" in oldest
    assert counts(oldest) == {"files added": 3, "fragments created": 3}
    assert counts(newest) == {
        "files added": 1, "files modified": 1, "files deleted": 1, "files renamed": 1,
        "fragments created": 1, **({"fragments updated": second.updated}
                                   if second.updated else {}), "fragments retired": 1}
    assert (second.added, second.modified, second.deleted, second.renamed) == (1, 1, 1, 1)
    # the lists behind the counts: paths, and links to the very fragments
    assert "docs/c.md → docs/d.md" in newest and "docs/b.md" in newest
    assert "docs/e.md" in newest and "docs/a.md" in newest
    retired = Fragment.objects.get(status=FragmentStatus.RETIRED)
    assert f'href="/fragments/{retired.public_id}/"' in newest.split("sync-retired")[1]
    created = fragment_of("docs/e.md")
    assert f'href="/fragments/{created.public_id}/"' in newest.split("sync-created")[1]
    assert fragment_of("docs/a.md").public_id in newest.split("sync-updated")[1]


def test_every_link_the_list_renders_resolves(cast, synced):  # noqa: F811
    _, _, first, second = synced
    client = client_for(cast.lead)
    section = syncs_section(client.get(PAGE).content.decode())
    hrefs = [html.unescape(href) for href in re.findall(r'href="([^"]+)"', section)]
    # one link per fragment each sync created, updated or retired (a retired one included)
    assert sum(href.startswith("/fragments/") for href in hrefs) == (
        first.created + second.created + second.updated + second.retired)
    for link in set(hrefs):
        target = link if link.startswith("/") else PAGE + link
        assert client.get(target).status_code == 200, link


def test_the_list_pages_by_next_and_previous(cast, synced, monkeypatch):  # noqa: F811
    source, repo, _, _ = synced
    monkeypatch.setattr(sources_view, "SYNCS_PER_PAGE", 1)
    client = client_for(cast.lead)
    for query in ("", f"?source={source.public_id}"):
        first_page = syncs_section(client.get(PAGE + query).content.decode())
        assert len(rows(first_page)) == 1 and repo.commits[1] in first_page
        following = html.unescape(re.search(r'href="([^"]+)"[^>]*rel="next"', first_page)[1])
        assert following.startswith("?") and not following.startswith("??")
        assert "page=2" in following and (source.public_id in following) == bool(query)
        second_page = syncs_section(client.get(PAGE + following).content.decode())
        listed = rows(second_page)
        assert len(listed) == 1 and "(none)</span>.." in listed[0]
        assert 'rel="prev"' in second_page and 'rel="next"' not in second_page


def test_a_source_filter_that_is_not_one_names_the_field(cast, synced):  # noqa: F811
    client = client_for(cast.lead)
    for bad in ("nope", "src_nosuchsource1", "src_\x00x"):
        response = client.get(PAGE, {"source": bad})
        assert response.status_code == 400
        assert "source:" in syncs_section(response.content.decode())
    # one of another organization's is no different
    assert client_for(cast.viewer).get(PAGE).status_code == 403


def test_the_fragment_history_names_the_commit_of_every_version(cast, synced):  # noqa: F811
    _, repo, _, _ = synced
    fragment = fragment_of("docs/a.md")
    pointer = fragment.sources.select_related("document").get()
    text = client_for(cast.lead).get(f"/fragments/{fragment.public_id}/").content.decode()
    history = text[text.index('id="fragment-history"'):]
    for commit in repo.commits:
        url = TEMPLATE.format(commit=commit, path="docs/a.md", start_line=pointer.start_line,
                              end_line=pointer.end_line)
        assert f'<a href="{html.escape(url)}" title="{commit}"' in history
        assert f">{commit[:12]}</a>" in history
