"""The ingestion pipeline end to end, inline: walk → normalize → chunk → dedup → embed → index,
against the real PostgreSQL (pgvector) and a real tantivy index under ``tmp_path``.

Jobs run with ``run_job`` in the test process; the Celery path is in ``test_jobs_worker.py``.
Nothing is mocked; a few tests inject a fault into the pipeline's own logic.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db.models import Max

from accounts.permissions import SYSTEM
from contexts.indexes import indexing
from contexts.ingestion import pipeline
from contexts.ingestion.jobs import run_job
from contexts.models import (
    Embedding,
    Fragment,
    FragmentStatus,
    FragmentVersion,
    IngestionJob,
    JobState,
    Link,
    SourceDocument,
    SourcePointer,
)
from contexts.models.embeddings import EMBEDDING_DIM
from contexts.usecases.ingestion import create_job

pytestmark = pytest.mark.django_db

H1 = "Token bucket for the retrieval API"
ADR = "docs/adr.md"
METRICS = "src/metrics.py"


# --- helpers ------------------------------------------------------------------------------------
def start(target, root: Path) -> IngestionJob:
    return create_job(SYSTEM, target.repo.scope, str(root), created_by=target.creator)


def ingest(target, root: Path) -> IngestionJob:
    job = run_job(start(target, root).pk)
    assert job.state == JobState.DONE, job.errors
    return job


def by_pointer(target) -> dict[tuple[str, str], Fragment]:
    """(path, anchor) → fragment, for every source pointer of the target's repository."""
    pointers = SourcePointer.objects.filter(
        document__repository=target.repo).select_related("fragment", "document")
    return {(p.document.path, p.anchor): p.fragment for p in pointers}


def fragment_at(target, path: str, anchor: str) -> Fragment:
    return SourcePointer.objects.select_related("fragment").get(
        document__repository=target.repo, document__path=path, anchor=anchor).fragment


def search(target, query: str) -> list[str]:
    hits = indexing.lexical_index(target.org).search(
        query, allowed_scope_ids=[target.repo.scope_id])
    return [fragment_id for fragment_id, _ in hits]


def tallies() -> dict[str, tuple[int, int | None]]:
    """Row count and highest id of every table an ingestion writes."""
    out = {}
    for model in (Fragment, FragmentVersion, Embedding, SourceDocument, SourcePointer, Link):
        out[model.__name__] = (model.objects.count(),
                               model.objects.aggregate(top=Max("id"))["top"])
    return out


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.split("\n"), 1) if needle in line)


def active_embeddings(fragment: Fragment):
    generation = indexing.active_generation(fragment.namespace)
    return Embedding.objects.filter(org_id=fragment.org_id, fragment_id=fragment.pk,
                                    generation=generation)


# --- the tree -----------------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path, write_tree, sources, ingest_target, settings) -> Path:
    """Markdown, Python and Go, plus everything the walker must leave out."""
    settings.INGEST_MAX_FILE_BYTES = 20_000
    return write_tree(tmp_path / "src", {
        ADR: sources.adr(ingest_target.owner.username),
        "docs/other.md": sources.other(),
        "docs/ops/restart.md": sources.restart(),
        METRICS: sources.python_module(),
        "pkg/limiter.go": sources.go,
        ".gitignore": "secret/\n*.log\n",
        "secret/keys.md": "# Keys\n\nThe production signing key is gorgonzolasecret.\n",
        "server.log": "GET /healthz 200\n",
        "src/.gitignore": "scratch_*.py\n",
        "src/scratch_notes.py": "def scratch():\n    return 'pelicanscratch'\n",
        "node_modules/leftpad/index.js": "module.exports = function leftpadvendored() {};\n",
        "node_modules/leftpad/README.md": "# leftpad\n\nvendored readme narwhalvendored\n",
        "src/blob.py": b"\x7fELF\x00\x00\x01\x02 not python at all \x00\xff",
        "big.md": "# Big\n\n" + sources.prose("big", 5000),
    })


# --- a first ingestion --------------------------------------------------------------------------
def test_a_mixed_tree_becomes_fragments_pointers_links_vectors_and_index_entries(
        ingest_target, tree):
    t = ingest_target
    job = ingest(t, tree)

    documents = set(SourceDocument.objects.filter(repository=t.repo).values_list("path",
                                                                                 flat=True))
    assert documents == {ADR, "docs/other.md", "docs/ops/restart.md", METRICS,
                         "pkg/limiter.go"}, "ignored, vendored, binary or too-large files leaked"
    assert job.files_total == job.files_done == 5
    assert job.errors == []
    skipped = {entry["path"]: entry["reason"] for entry in job.skipped}
    assert skipped.keys() == {"big.md", "src/blob.py", "node_modules/"}
    assert skipped["src/blob.py"] == "binary content"
    assert skipped["big.md"].startswith("too large:") and "limit 20 kB" in skipped["big.md"]

    fragments = by_pointer(t)
    assert job.fragments_created == len(set(fragments.values())) == len(fragments) == 10
    assert job.duplicates_collapsed == job.fragments_updated == job.fragments_retired == 0

    # Markdown: front matter gives kind and owner to every fragment of the ADR; headings nest.
    adr = {anchor: f for (path, anchor), f in fragments.items() if path == ADR}
    assert {f.kind for f in adr.values()} == {"adr"}
    assert {f.owner for f in adr.values()} == {t.owner}
    assert {f.namespace for f in adr.values()} == {"prose"}
    sizing = adr["token-bucket-for-the-retrieval-api/decision/bucket-sizing"]
    assert sizing.heading_path == [H1, "Decision", "Bucket sizing"]
    assert sizing.title == "Bucket sizing"
    assert adr["token-bucket-for-the-retrieval-api/rollback"].heading_path == [H1, "Rollback"]
    other = fragments[("docs/other.md", "other-notes")]
    assert other.kind == "prose" and other.owner == t.creator  # the job's default owner

    # Code: one fragment per function, named after its symbol, with the file's line numbers.
    source = (tree / METRICS).read_text()
    for name in ("compute_throughput", "compute_latency", "compute_backlog"):
        fragment = fragments[(METRICS, name)]
        assert (fragment.kind, fragment.namespace, fragment.language) == ("code", "code",
                                                                          "python")
        assert fragment.symbol == name and fragment.heading_path == [name]
        pointer = fragment.sources.get()
        topic = name.removeprefix("compute_")
        assert (pointer.start_line, pointer.end_line) == (
            line_of(source, f"def {name}("), line_of(source, f"return {topic}_total"))
    go = fragments[("pkg/limiter.go", "Bucket")]
    assert go.kind == "code" and go.language == "go" and go.symbol == "Bucket"
    assert "Bucket.Refill" in go.title and "quokkalimiter" in go.body

    # Every pointer has a line range; within a document the ranges follow each other.
    for path in documents:
        ranges = list(SourcePointer.objects.filter(document__path=path, document__repository=t.repo)
                      .order_by("start_line").values_list("start_line", "end_line"))
        assert ranges and all(1 <= start <= end for start, end in ranges), (path, ranges)
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False)), (path, ranges)

    # Citation links: front-matter `links: [other.md]` and the body's [..](ops/restart.md).
    links = {(link.source_id, link.target_id, link.kind) for link in Link.objects.all()}
    restart = fragments[("docs/ops/restart.md", "restarting-the-web-workers")]
    context = adr["token-bucket-for-the-retrieval-api"]  # holds the Markdown link's text
    assert (context.pk, restart.pk, "markdown") in links
    front = [(s, k) for s, target, k in links if target == other.pk]
    assert len(front) == 1 and front[0][1] == "front-matter"
    assert front[0][0] in {f.pk for f in adr.values()}
    assert len(links) == 2

    # Versions and vectors: version 1 each, one vector per passage the model reads (one for a
    # fragment within its window), of the model's dimension, in the active generation.
    embedder = indexing.embedder_for(indexing.active_generation("prose"))
    total = 0
    for fragment in fragments.values():
        assert fragment.version == 1
        assert list(fragment.versions.values_list("number", flat=True)) == [1]
        vectors = list(active_embeddings(fragment).order_by("passage"))
        passages = embedder.passages(indexing.embedding_text(fragment))
        assert [v.passage for v in vectors] == list(range(len(passages))), fragment
        total += len(vectors)
        for vector in vectors:
            assert vector.fragment_version == 1
            assert vector.content_hash == fragment.content_hash
            assert vector.scope_ids == [t.repo.scope_id]
            assert len(vector.embedding) == EMBEDDING_DIM
    assert total > len(fragments)  # the tree holds a section longer than the window
    assert Embedding.objects.filter(org_id=t.org.pk).count() == total

    # The lexical index holds every fragment, searchable within the scope only.
    index = indexing.lexical_index(t.org)
    assert index.count() == len(fragments)
    expect = {
        "xylophonerollback": adr["token-bucket-for-the-retrieval-api/rollback"],
        "quixoticsizing": sizing,
        "quokkalimiter": go,
        "compute_latency": fragments[(METRICS, "compute_latency")],
        "ocelotnotes": other,
    }
    for query, fragment in expect.items():
        assert search(t, query)[:1] == [fragment.public_id], query
    for leaked in ("gorgonzolasecret", "pelicanscratch", "leftpadvendored", "narwhalvendored"):
        assert search(t, leaked) == [], leaked
    assert index.search("xylophonerollback", allowed_scope_ids=[t.org.scope_id]) == []


def test_a_vendored_directory_is_reported_as_skipped(ingest_target, tree):
    job = ingest(ingest_target, tree)
    assert any(entry["path"].startswith("node_modules") for entry in job.skipped), job.skipped


# --- re-ingestion -------------------------------------------------------------------------------
def test_reingesting_identical_content_writes_nothing(ingest_target, tree):
    first = ingest(ingest_target, tree)
    before = tallies()
    embeddings = dict(Embedding.objects.values_list("fragment_id", "id"))

    again = ingest(ingest_target, tree)

    assert tallies() == before  # no row added or replaced anywhere (counts and max ids)
    assert dict(Embedding.objects.values_list("fragment_id", "id")) == embeddings
    assert set(Fragment.objects.values_list("version", flat=True)) == {1}
    assert again.fragments_unchanged == first.fragments_created == 10
    assert (again.fragments_created, again.fragments_updated, again.fragments_retired,
            again.duplicates_collapsed) == (0, 0, 0, 0)
    assert again.files_done == again.files_total == 5 and again.errors == []
    assert indexing.lexical_index(ingest_target.org).count() == 10


def test_changing_one_function_versions_only_that_fragment(ingest_target, tree):
    t = ingest_target
    ingest(t, tree)
    before = {key: (f.pk, f.version) for key, f in by_pointer(t).items()}
    rows = Embedding.objects.values_list("fragment_id", "passage", "id")
    vectors = {(f, n): v for f, n, v in rows}
    latency = fragment_at(t, METRICS, "compute_latency")
    old_vectors = list(active_embeddings(latency).values_list("pk", flat=True))

    path = tree / METRICS  # same number of lines: only the latency function's text changes
    path.write_text(path.read_text().replace("return latency_total(values)",
                                             "return latency_total(values) * 2"))
    job = ingest(t, tree)

    assert (job.fragments_updated, job.fragments_created, job.fragments_retired) == (1, 0, 0)
    assert job.fragments_unchanged == 9
    after = by_pointer(t)
    assert {key: f.pk for key, f in after.items()} == {key: pk for key, (pk, _) in before.items()}
    for key, fragment in after.items():
        assert fragment.version == (2 if key == (METRICS, "compute_latency") else 1), key
    latency.refresh_from_db()
    assert "latency_total(values) * 2" in latency.body
    assert list(latency.versions.order_by("number").values_list("number", flat=True)) == [1, 2]
    assert "* 2" not in latency.versions.get(number=1).body
    new_vector = active_embeddings(latency).get(passage=0)
    assert new_vector.fragment_version == 2 and new_vector.content_hash == latency.content_hash
    assert not Embedding.objects.filter(pk__in=old_vectors).exists()
    unchanged = {key: v for key, v in vectors.items() if key[0] != latency.pk}
    assert {(f, n): v for f, n, v in rows.all() if f != latency.pk} == unchanged
    assert search(t, "latency_total")[:1] == [latency.public_id]


def test_lines_inserted_above_an_unchanged_chunk_move_its_line_range(ingest_target, tree):
    t = ingest_target
    ingest(t, tree)
    path = tree / METRICS
    path.write_text(path.read_text().replace(
        "    return latency_total(values)",
        "    extra = latency_total(values)\n    more = extra + 1\n    return more"))
    ingest(t, tree)
    source = path.read_text()
    backlog = SourcePointer.objects.get(document__path=METRICS, anchor="compute_backlog")
    assert backlog.fragment.version == 1  # its text did not change...
    assert (backlog.start_line, backlog.end_line) == (  # ...but it moved down two lines
        line_of(source, "def compute_backlog("), line_of(source, "return backlog_total"))


def test_deleting_a_section_retires_its_fragment_and_drops_it_from_search(
        ingest_target, tree, sources):
    t = ingest_target
    ingest(t, tree)
    rollback = fragment_at(t, ADR, "token-bucket-for-the-retrieval-api/rollback")
    assert search(t, "xylophonerollback") == [rollback.public_id]
    others = {key: (f.pk, f.version) for key, f in by_pointer(t).items()
              if f.pk != rollback.pk}

    (tree / ADR).write_text(sources.adr(t.owner.username, with_rollback=False))
    job = ingest(t, tree)

    assert (job.fragments_retired, job.fragments_updated, job.fragments_created) == (1, 0, 0)
    rollback.refresh_from_db()
    assert rollback.status == FragmentStatus.RETIRED and rollback.valid_to is not None
    assert not rollback.sources.exists()
    assert list(rollback.versions.values_list("number", flat=True)) == [1]  # history kept
    assert {key: (f.pk, f.version) for key, f in by_pointer(t).items()} == others
    assert search(t, "xylophonerollback") == []
    assert indexing.lexical_index(t.org).count() == 9


def test_deleting_a_file_retires_its_fragments(ingest_target, tree):
    t = ingest_target
    ingest(t, tree)
    other = fragment_at(t, "docs/other.md", "other-notes")
    (tree / "docs/other.md").unlink()
    job = ingest(t, tree)
    other.refresh_from_db()
    assert job.fragments_retired == 1
    assert other.status == FragmentStatus.RETIRED
    assert search(t, "ocelotnotes") == []


# --- front matter -------------------------------------------------------------------------------
def test_editing_only_the_front_matter_owner_is_a_change_of_the_document(
        ingest_target, tree, sources):
    t = ingest_target
    ingest(t, tree)
    document = SourceDocument.objects.get(repository=t.repo, path=ADR)
    ingest(t, tree)  # identical: the document is not touched
    assert SourceDocument.objects.get(pk=document.pk).changed_at == document.changed_at

    (tree / ADR).write_text(sources.adr(t.other_owner.username))
    ingest(t, tree)

    edited = SourceDocument.objects.get(pk=document.pk)
    assert edited.content_hash != document.content_hash
    assert edited.changed_at > document.changed_at
    assert edited.size_bytes == len((tree / ADR).read_bytes())


@pytest.mark.parametrize("edit", ["owner", "kind"])
def test_a_front_matter_edit_reaches_the_fragments(ingest_target, tree, sources, edit):
    t = ingest_target
    ingest(t, tree)
    text = sources.adr(t.owner.username)
    if edit == "owner":
        text = sources.adr(t.other_owner.username)
    else:
        text = text.replace("kind: adr", "kind: runbook")
    (tree / ADR).write_text(text)
    ingest(t, tree)
    fragments = [f for (path, _), f in by_pointer(t).items() if path == ADR]
    if edit == "owner":
        assert {f.owner for f in fragments} == {t.other_owner}
    else:
        assert {f.kind for f in fragments} == {"runbook"}


# --- near-duplicates ----------------------------------------------------------------------------
@pytest.fixture
def twins(tmp_path, write_tree, sources) -> Path:
    """The same long paragraph in two files, one word changed."""
    paragraph = sources.prose("shared paragraph", 250)
    words = paragraph.split(" ")
    words[100] = "zebra"
    return write_tree(tmp_path / "src", {"a/one.md": paragraph + "\n",
                                         "b/two.md": " ".join(words) + "\n"})


def test_near_duplicates_collapse_into_one_fragment_with_two_sources(ingest_target, twins):
    t = ingest_target
    job = ingest(t, twins)
    assert job.duplicates_collapsed == 1 and job.fragments_created == 1
    fragment = Fragment.objects.get(scope=t.repo.scope)
    assert set(fragment.sources.values_list("document__path", "anchor")) == {
        ("a/one.md", "preamble"), ("b/two.md", "preamble")}
    assert active_embeddings(fragment).filter(passage=0).count() == 1  # one fragment's vectors
    assert indexing.lexical_index(t.org).count() == 1

    again = ingest(t, twins)
    assert (again.fragments_created, again.duplicates_collapsed, again.fragments_unchanged) == (
        0, 0, 2)
    assert Fragment.objects.filter(scope=t.repo.scope).count() == 1


def test_rewriting_one_twin_does_not_hijack_the_others_fragment(ingest_target, twins, sources):
    t = ingest_target
    ingest(t, twins)
    two_text = (twins / "b/two.md").read_text()
    (twins / "a/one.md").write_text(sources.prose("something else entirely", 250) + "\n")
    ingest(t, twins)
    one = fragment_at(t, "a/one.md", "preamble")
    two = fragment_at(t, "b/two.md", "preamble")
    assert one.pk != two.pk
    assert two_text.split("\n")[0] in two.body


# --- failures -----------------------------------------------------------------------------------
def test_a_file_that_cannot_be_chunked_is_reported_and_the_rest_is_ingested(
        ingest_target, tree, monkeypatch):
    real_chunk = pipeline.chunk

    def chunk(doc):
        if doc.path == "pkg/limiter.go":
            raise RuntimeError("grammar exploded")
        return real_chunk(doc)

    monkeypatch.setattr(pipeline, "chunk", chunk)
    job = ingest(ingest_target, tree)

    assert job.state == JobState.DONE
    assert job.errors == [{"path": "pkg/limiter.go", "reason": "RuntimeError: grammar exploded"}]
    assert job.files_done == job.files_total == 5
    paths = {path for path, _ in by_pointer(ingest_target)}
    assert paths == {ADR, "docs/other.md", "docs/ops/restart.md", METRICS}
    assert job.fragments_created == 9
    assert search(ingest_target, "quokkalimiter") == []
    assert search(ingest_target, "xylophonerollback") != []


@pytest.mark.django_db(transaction=True)
def test_a_file_that_cannot_be_written_is_isolated_from_its_group(
        ingest_target, tree, write_tree, sources):
    t = ingest_target
    # A path longer than SourceDocument.path (1000 chars) fails on INSERT; it sorts after docs/
    # so the ADR and its links are written in the same group first.
    deep = "/".join(["z" * 200] * 5) + "/deep.md"
    write_tree(tree, {deep: sources.restart().replace("marmotrestart", "deeprestart")})
    job = run_job(start(t, tree).pk)
    assert job is not None and job.state == JobState.DONE, IngestionJob.objects.get().errors
    assert [e["path"] for e in job.errors] == [deep]
    assert job.fragments_created == Fragment.objects.filter(scope=t.repo.scope).count() == 10
    assert Link.objects.count() == 2
    assert indexing.lexical_index(t.org).count() == 10


class WorkerLost(BaseException):
    """Stands in for SIGKILL: not an Exception, so run_job cannot record a failure."""


@pytest.fixture
def crashed_then_rerun(ingest_target, tree, settings, monkeypatch):
    """A job that dies after its first group is committed, then runs again to completion."""
    settings.INGEST_EMBED_BATCH_CHUNKS = 1  # every file is a group of its own
    job = start(ingest_target, tree)
    real_write_group = pipeline.Ingestor._write_group
    groups = []

    def write_group(self, plans, *rest):
        groups.append([getattr(plan, "planned", plan).source.path for plan in plans])
        if len(groups) == 2:
            raise WorkerLost
        return real_write_group(self, plans, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(pipeline.Ingestor, "_write_group", write_group)
        with pytest.raises(WorkerLost):
            run_job(job.pk)
    assert groups[0] == [ADR]  # committed before the "crash"
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.attempts == 1
    assert set(SourceDocument.objects.values_list("path", flat=True)) == {ADR}
    done = run_job(job.pk)
    assert done.state == JobState.DONE
    return done


def test_a_rerun_after_a_crash_completes_without_duplicates(ingest_target, crashed_then_rerun):
    job = crashed_then_rerun
    fragments = by_pointer(ingest_target)
    assert job.attempts == 2 and job.errors == []
    assert len(fragments) == len(set(fragments.values())) == 10
    assert job.fragments_unchanged == 4 and job.fragments_created == 6  # ADR was done before
    assert FragmentVersion.objects.count() == Embedding.objects.filter(passage=0).count() == 10
    # The crashed attempt never caught the index up; the rerun reconciled the ADR too.
    assert indexing.lexical_index(ingest_target.org).count() == 10
    assert search(ingest_target, "xylophonerollback") != []


def test_a_rerun_after_a_crash_keeps_the_citation_links(crashed_then_rerun):
    assert set(Link.objects.values_list("kind", flat=True)) == {"front-matter", "markdown"}


def test_a_running_job_says_how_far_it_got_in_the_log(ingest_target, tree, monkeypatch, caplog):
    monkeypatch.setattr("contexts.ingestion.jobs.LOG_EVERY_SECONDS", 0.0)
    with caplog.at_level("INFO", logger="contexts.ingestion.jobs"):
        job = ingest(ingest_target, tree)
    lines = [r.getMessage() for r in caplog.records if "files done" in r.getMessage()]
    assert lines and all(job.public_id in line for line in lines)
    assert f"{job.files_done} files done" in lines[-1]
