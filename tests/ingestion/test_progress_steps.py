"""Progress moves in small steps (issue 40, item 3): a job's files are written — searchable, and
counted in its progress — group by group, and a group was 256 chunks, minutes of encoding on a
busy 2-core machine. Now the first group is small (the first fragments searchable within
seconds) and each next one holds about GROUP_SECONDS of encoding at the rate measured so far."""

from pathlib import Path

import pytest

from contexts.ingestion import pipeline
from contexts.ingestion.pipeline import Ingestor, Target
from contexts.ingestion.sources import walk

pytestmark = pytest.mark.django_db


def _ingestor(ingest_target, **options) -> Ingestor:
    repo = ingest_target.repo
    return Ingestor(Target(org=ingest_target.org, scope=repo.scope, repository=repo),
                    **options)


def test_group_size_follows_the_measured_encoding_rate(ingest_target):
    ingestor = _ingestor(ingest_target, batch_chunks=256)
    assert ingestor._group_limit() == pipeline.FIRST_GROUP_CHUNKS     # nothing measured yet
    stats = ingestor.stats
    stats.encode_seconds, stats.encoded_texts = 10.0, 100             # 10 texts a second
    assert ingestor._group_limit() == 10 * pipeline.GROUP_SECONDS     # ~5 s of encoding
    stats.encode_seconds, stats.encoded_texts = 100.0, 10             # a crawl: 0.1 a second
    assert ingestor._group_limit() == pipeline.MIN_GROUP_CHUNKS
    stats.encode_seconds, stats.encoded_texts = 1.0, 10_000           # a fast machine
    assert ingestor._group_limit() == 256                             # never above the batch
    assert _ingestor(ingest_target, batch_chunks=4)._group_limit() == 4


def test_the_first_files_are_reported_after_a_small_group(ingest_target, tmp_path: Path,
                                                          sources):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(40):  # one chunk each
        (root / f"note-{i:02}.md").write_text(f"# Note {i}\n\n{sources.prose(f'n{i}', 40)}\n")
    reports: list[int] = []
    ingestor = _ingestor(ingest_target, batch_chunks=256,
                         on_progress=lambda stats: reports.append(stats.files_done))
    stats = ingestor.run(walk(root, max_bytes=1_000_000))
    assert stats.created == 40 and reports[-1] == 40
    # The first report comes after the first group of FIRST_GROUP_CHUNKS one-chunk files, not
    # after all 40 (one 256-chunk group before).
    assert reports[0] == pipeline.FIRST_GROUP_CHUNKS
    assert len(set(reports)) >= 2
