"""How a sync behaves besides what it ingests: an unchanged repository costs no embedding
(times printed, not asserted); a remote that cannot be reached, a branch that does not exist
or a URL that is not a repository marks the source failing with git's words and changes no
fragment; a sync killed half-way is applied again to the same state; beat claims a due source
once per due time; and a source's URL is never one git could run a command from."""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from accounts.permissions import SYSTEM
from contexts.embedding.embedder import Embedder
from contexts.ingestion import git_sync, pipeline
from contexts.ingestion.git_sync import run_sync
from contexts.models import FragmentVersion, Source, SourceState
from contexts.services.errors import InvalidOperation
from contexts.usecases.sources import AddGitSource, add_source

pytestmark = pytest.mark.django_db
DOCS = Path(__file__).resolve().parents[2] / "docs"
# A few of this repository's documents: enough for the first sync to embed real text, few
# enough that the suite does not pay for all of docs/ (31 files, 562 texts: ≈100 s here; the
# measurement on all of them is in docs/sources.md).
SAMPLE = ("adr/0001-embedded-services-for-one-machine.md",
          "adr/0003-tantivy-for-the-lexical-leg.md", "adr/0006-degrade-reads-refuse-writes.md")


@pytest.fixture
def encode_calls(monkeypatch) -> list[int]:
    """Texts passed to the embedding model, per call (a wrapper of Embedder.encode, which
    still encodes)."""
    calls: list[int] = []
    original = Embedder.encode

    def counting(self, texts, **kwargs):
        texts = list(texts)
        calls.append(len(texts))
        return original(self, texts, **kwargs)

    monkeypatch.setattr(Embedder, "encode", counting)
    return calls


@pytest.mark.slow  # embeds three of this repository's documents once
def test_an_unchanged_repository_is_synced_without_embedding(git_repo, world, encode_calls,
                                                              capsys):
    """Three of this repository's documents as a small repository: the first sync embeds them,
    a sync with nothing new fetches and stops, a commit that touches only a file the source
    leaves out applies an empty diff — neither calls the model."""
    (git_repo.root / "docs").mkdir()
    for name in SAMPLE:
        shutil.copy(DOCS / name, git_repo.root / "docs" / Path(name).name)
    git_repo.commit("the docs")
    source = world.source(git_repo, "docs", exclude=["scratch/"])

    started = time.perf_counter()
    first = run_sync(source.pk)
    first_seconds = time.perf_counter() - started
    assert not first.error and first.added == len(SAMPLE)
    assert sum(encode_calls) > 0  # the wrapper sees the model's work

    encode_calls.clear()
    started = time.perf_counter()
    again = run_sync(source.pk)
    noop_seconds = time.perf_counter() - started
    assert not again.error and again.line() == (
        f"commit {first.commit}: 0 added, 0 modified, 0 deleted, 0 renamed, 0 fragments changed")
    assert encode_calls == []

    git_repo.commit("a scratch note", {"scratch/note.md": "# Note\n\nnot followed\n"})
    started = time.perf_counter()
    empty = run_sync(source.pk)
    empty_diff_seconds = time.perf_counter() - started
    assert empty.commit != first.commit and empty.fragments_changed == 0 and not empty.full
    assert encode_calls == []
    source.refresh_from_db()
    assert source.last_commit == empty.commit and source.fragments_count == first.fragments
    with capsys.disabled():
        print(f"\n[git sync] docs/: {first.files} files, {first.fragments} fragments; "
              f"first sync {first_seconds:.2f}s ({first.embedded} texts embedded in "
              f"{first.embed_seconds:.1f}s), unchanged {noop_seconds:.3f}s, "
              f"commit outside the patterns {empty_diff_seconds:.3f}s")


@pytest.fixture
def asks_for_credentials():
    """An HTTP server that answers every request 401 with a Basic challenge: a remote whose
    credentials git does not have."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Refuse(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the http.server name
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="limiter"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/acme/limiter.git"
    server.shutdown()
    server.server_close()


def test_failures_mark_the_source_failing_and_change_no_fragment(git_repo, world, helpers,
                                                                 tmp_path,
                                                                 asks_for_credentials):
    git_repo.commit("first", {"docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n"})
    source = world.source(git_repo, "web")
    assert not run_sync(source.pk).error
    git_repo.commit("second", {"docs/b.md": "# B\n\nbetaword " + helpers.prose("b") + "\n"})
    before = helpers.snapshot(source.repository)
    versions = FragmentVersion.objects.count()
    applied = Source.objects.get(pk=source.pk).last_commit

    cases = {
        "not a repository": ({"url": str(tmp_path / "gone")}, "does not appear to be a git"),
        "unreachable": ({"url": "http://127.0.0.1:9/limiter.git"}, "127.0.0.1"),
        # git never prompts (GIT_TERMINAL_PROMPT=0): it fails at once, saying why.
        "credentials refused": ({"url": asks_for_credentials}, "terminal prompts disabled"),
        "unknown branch": ({"branch": "no-such-branch"}, "couldn't find remote ref"),
    }
    for case, (broken, words) in cases.items():
        original = Source.objects.filter(pk=source.pk).values("url", "branch").get()
        Source.objects.filter(pk=source.pk).update(**broken)
        result = run_sync(source.pk)
        row = Source.objects.get(pk=source.pk)
        assert row.state == SourceState.FAILING and words in row.last_error, (case, row.last_error)
        assert result.error == row.last_error and result.line().startswith("failing: ")
        assert row.last_commit == applied and row.next_sync_at > row.last_synced_at
        assert helpers.snapshot(source.repository) == before, case
        assert FragmentVersion.objects.count() == versions, case
        Source.objects.filter(pk=source.pk).update(**original)

    mended = run_sync(source.pk)
    row = Source.objects.get(pk=source.pk)
    assert not mended.error and mended.added == 1
    assert (row.state, row.last_error, row.last_commit) == (SourceState.IDLE, "",
                                                             git_repo.commits[-1])


class Killed(BaseException):
    """What a SIGKILL looks like from inside: nothing after it runs, nothing catches it."""


def test_a_sync_killed_half_way_converges_on_the_same_state(git_repo, world, helpers,
                                                            settings, monkeypatch):
    settings.INGEST_EMBED_BATCH_CHUNKS = 1  # one file per written group
    git_repo.commit("first", {
        "docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n",
        "docs/b.md": "# B\n\nbetaword " + helpers.prose("b") + "\n",
        "docs/c.md": "# C\n\ngammaword " + helpers.prose("c") + "\n",
        "src/tool.py": helpers.py_function("run_tool"),
    })
    source = world.source(git_repo, "web")
    assert not run_sync(source.pk).error
    applied = git_repo.commits[-1]
    git_repo.commit("several changes", {
        "docs/a.md": "# A\n\nalphaword " + helpers.prose("a2") + "\n",
        "docs/b.md": None,
        "docs/d.md": "# D\n\ndeltaword " + helpers.prose("d") + "\n",
        "docs/e.md": "# E\n\nepsilonword " + helpers.prose("e") + "\n",
    }, renames={"src/tool.py": "src/tools/tool.py"})

    original, writes = pipeline.Ingestor._write_group, []

    def dies_on_the_second_group(self, *args, **kwargs):
        writes.append(1)
        if len(writes) == 2:
            raise Killed()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pipeline.Ingestor, "_write_group", dies_on_the_second_group)
    with pytest.raises(Killed):
        run_sync(source.pk)
    row = Source.objects.get(pk=source.pk)
    assert row.state == SourceState.SYNCING and row.last_commit == applied  # nothing advanced
    monkeypatch.setattr(pipeline.Ingestor, "_write_group", original)

    result = run_sync(source.pk)
    assert not result.error and result.commit == git_repo.commits[-1]
    fresh = world.source(git_repo, "fresh")
    assert not run_sync(fresh.pk).error
    assert helpers.snapshot(source.repository) == helpers.snapshot(fresh.repository)
    assert Source.objects.get(pk=source.pk).state == SourceState.IDLE


def test_beat_claims_a_due_source_once_per_due_time(git_repo, world):
    git_repo.commit("first", {"README.md": "# Readme\n"})
    source = world.source(git_repo, "web", interval_seconds=600)
    due = Source.objects.get(pk=source.pk).next_sync_at
    claimed = git_sync.claim_due()
    assert claimed == [(source.pk, git_sync.task_id(source.public_id, due))]
    assert git_sync.claim_due() == []  # moved on by its interval: not claimed twice
    row = Source.objects.get(pk=source.pk)
    assert 599 <= (row.next_sync_at - due).total_seconds() <= 660
    # The id is a UUID5 of the source and its due time: the same for the same sync.
    assert git_sync.task_id(source.public_id, due) == claimed[0][1]
    assert git_sync.task_id(source.public_id, row.next_sync_at) != claimed[0][1]


@pytest.mark.parametrize(("url", "words"), [
    ("ext::sh -c touch% /tmp/pwned", "transport::address"),
    ("--upload-pack=touch /tmp/pwned", "git URL"),
    ("ftp://example.com/r.git", "ftp:// is not accepted"),
    ("/etc/../no/such/repository", "no such file or directory"),
    ("https://example.com/r.git\n", None),  # trailing whitespace is trimmed: accepted
])
def test_a_source_url_is_one_git_fetches_and_nothing_else(world, url, words):
    world.repository("web")
    command = AddGitSource(org="acme", repo="web", url=url)
    if words is None:
        assert add_source(SYSTEM, command).url == url.strip()
        return
    with pytest.raises(InvalidOperation) as refused:
        add_source(SYSTEM, command)
    assert words in str(refused.value) and refused.value.field == "url"


def test_branch_patterns_and_permalink_template_are_checked(world):
    world.repository("web")
    for field, bad, words in [
        ("branch", "-b", "branch name"), ("branch", "main..x", "branch name"),
        ("web_url_template", "https://x/{commit}/{secret}", "unknown placeholder"),
        ("web_url_template", "javascript:alert(1)", "http(s) URL"),
        ("include", ["[z-a]"], "gitignore-style"),
    ]:
        with pytest.raises(InvalidOperation) as refused:
            add_source(SYSTEM, AddGitSource(org="acme", repo="web",
                                            url="https://example.com/r.git", **{field: bad}))
        assert words in str(refused.value), (field, bad, refused.value)


def test_the_retrieval_role_reads_a_source_only_inside_its_allowed_scopes(git_repo, world):
    """Citations join the source's permalink template inside the retrieval's row-level
    security block: the role sees a source whose repository is allowed, no other, and no
    column but the three the join needs (the URL may hold a credential)."""
    from django.db import DatabaseError, connection, transaction

    from contexts.services.rls import RETRIEVAL_ROLE, pg_int_array, retrieval_scope

    template = "https://example.com/blob/{commit}/{path}#L{start_line}"
    git_repo.commit("first", {"README.md": "# Readme\n"})
    source = world.source(git_repo, "web", web_url_template=template)
    other = world.repository("other")

    def read(scopes: set[int], sql: str = "SELECT web_url_template FROM contexts_source"):
        with retrieval_scope(scopes), connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    assert read({source.repository.scope_id}) == [(template,)]
    assert read({other.scope_id}) == [] and read(set()) == []
    with pytest.raises(DatabaseError, match="permission denied for table contexts_source"), \
            transaction.atomic(), connection.cursor() as cursor:  # a savepoint: undone after
        cursor.execute("SELECT set_config('role', %s, true), "
                       "set_config('app.allowed_scopes', %s, true)",
                       [RETRIEVAL_ROLE, pg_int_array({source.repository.scope_id})])
        cursor.execute("SELECT url FROM contexts_source")


def test_a_citations_permalink_is_read_under_row_level_security(git_repo, world, helpers):
    """The permalink templates are read in a statement of their own (only when a citation has
    a commit), inside the retrieval's row-level-security block like every other read
    (tests/api/test_retrieve_rls.py's recorder)."""
    from django.db import connection

    from contexts.retrieval import RetrievalRequest, retrieve
    from tests.api.test_retrieve_rls import Recorder

    template = "https://example.com/blob/{commit}/{path}#L{start_line}-L{end_line}"
    git_repo.commit("first", {"docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n"})
    source = world.source(git_repo, "web", web_url_template=template)
    assert not run_sync(source.pk).error
    scope = source.repository.scope_id
    request = RetrievalRequest(query="alphaword", org_id=world.org.pk,
                               scope_ids=frozenset({scope, world.org.scope_id}),
                               chain=(scope, world.org.scope_id))
    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        result = retrieve(request, principal=None, defer=lambda write: None)
    citation = result.fragments[0].sources[0]
    assert citation.commit == git_repo.commits[-1]
    assert citation.url == template.format(commit=citation.commit, path="docs/a.md",
                                           start_line=citation.start_line,
                                           end_line=citation.end_line)
    assert any(re.search(r"FROM contexts_source\b", sql) for sql, _, _ in recorder.statements)
    assert recorder.reads_outside(request.scope_ids) == []


def test_a_node_without_the_mirror_and_a_rewritten_branch_converge_too(git_repo, world,
                                                                        helpers):
    """The mirror is a cache: a worker that has none (another node, a wiped disk) fetches its
    own and goes on from the commit the database names; a branch rewritten under the source
    (a force-push) is diffed from the commit applied last while this node still has it, and
    synced as a whole tree where it does not — the same state either way. A symbolic link is
    not followed."""
    from contexts.ingestion.git_mirror import Mirror

    git_repo.commit("first", {"docs/a.md": "# A\n\nalphaword " + helpers.prose("a") + "\n",
                              "docs/b.md": "# B\n\nbetaword " + helpers.prose("b") + "\n"})
    (git_repo.root / "docs" / "link.md").symlink_to("a.md")
    git_repo.commit("a link")
    source = world.source(git_repo, "web")
    first = run_sync(source.pk)
    assert not first.error and first.skipped == 1
    assert "docs/link.md" not in helpers.snapshot(source.repository)["documents"]

    shutil.rmtree(Mirror.of(source.public_id).path)  # another node
    git_repo.commit("second", {"docs/c.md": "# C\n\ngammaword " + helpers.prose("c") + "\n"})
    second = run_sync(source.pk)
    assert not second.error and not second.full and second.added == 1

    for number, wipe in enumerate((False, True)):
        git_repo.git("commit", "-q", "--amend", "-m", f"rewritten {number}")
        (git_repo.root / "docs" / "b.md").write_text("# B\n\nbetaword " + helpers.prose(
            f"b{number}") + "\n")
        git_repo.git("add", "-A")
        git_repo.git("commit", "-q", "--amend", "-m", f"rewritten {number}")
        git_repo.commits.append(git_repo.git("rev-parse", "HEAD").strip())
        if wipe:
            shutil.rmtree(Mirror.of(source.public_id).path)
        result = run_sync(source.pk)
        assert not result.error and result.full == wipe and result.modified == 1
        fresh = world.source(git_repo, f"fresh{number}")
        assert not run_sync(fresh.pk).error
        assert helpers.snapshot(source.repository) == helpers.snapshot(fresh.repository)
