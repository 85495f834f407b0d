"""Who would own what if a folder were ingested now: the ownership coverage of a path job,
measured without ingesting (``manage.py ownership_coverage``; docs/governance.md, "Ownership").

The same walk a path job makes (:func:`contexts.ingestion.sources.walk`: tracked files, the
policy's exclusions), the same chunker (one fragment a chunk; an empty file none) and the same
owner chain (:mod:`contexts.ingestion.owners`: CODEOWNERS, front matter, git history, the
scope's tech lead) — with no embedding and no write, so a repository whose first ingest takes
most of an hour is measured in a minute or two. What it cannot foresee: chunks that collapse
into one fragment as duplicates of one another (so ``fragments`` is an upper bound) and a
person's later choice of owner in the console.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accounts.models import Organization, Repository, Scope
from contexts.ingestion import owners
from contexts.ingestion.chunk import chunk
from contexts.ingestion.normalize import normalize
from contexts.ingestion.sources import Skipped, walk
from contexts.services import secrets as secret_service

logger = logging.getLogger(__name__)


@dataclass
class Coverage:
    files: int = 0
    fragments: int = 0       # chunks the walk's files yield: one fragment each
    member_owned: int = 0    # of them, those whose owner is an active member of the org
    by_source: Counter = field(default_factory=Counter)  # where the owner came from
    by_owner: Counter = field(default_factory=Counter)   # username ("" for nobody)
    files_by_source: Counter = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)

    @property
    def share(self) -> float:
        """The share of fragments with a member owner (0 when there are none)."""
        return self.member_owned / self.fragments if self.fragments else 0.0

    def share_from(self, source: str) -> float:
        return self.by_source[source] / self.fragments if self.fragments else 0.0


def measure(org: Organization, scope: Scope, root: Path, *, max_bytes: int,
            repository: Repository | None = None, fallback: Any = None,
            include_untracked: bool = False) -> Coverage:
    """Walk ``root`` as a path job into ``scope`` would, resolve each file's owner as that job
    would (``contexts.ingestion.jobs._owners``) and count its chunks."""
    root = root.resolve()
    chain = owners.OwnerChain(org, scope, repository,
                              codeowners=owners.worktree_codeowners(root),
                              history=owners.worktree_history(root), fallback=fallback)
    coverage = Coverage()
    for item in walk(root, max_bytes=max_bytes, include_untracked=include_untracked):
        if isinstance(item, Skipped):
            continue
        try:
            text, _ = secret_service.screen_file(item.path, item.raw)
            doc = normalize(item.path, text)
            count = len(chunk(doc)) if doc.text.strip() else 0
        except Exception:  # noqa: BLE001 - as a job does: one unreadable file is noted, not fatal
            logger.exception("could not chunk %s", item.path)
            coverage.unreadable.append(item.path)
            continue
        # The front matter's owner, as the pipeline reads it (pipeline._declared_owner).
        declared = str(doc.front_matter.get("owner") or "").strip()[:150]
        resolved = chain.resolve(item.path, declared)
        coverage.files += 1
        coverage.fragments += count
        coverage.files_by_source[resolved.source] += 1
        coverage.by_source[resolved.source] += count
        coverage.by_owner[resolved.user.get_username() if resolved.user else ""] += count
        if resolved.user is not None and chain.may_own(resolved.user):
            coverage.member_owned += count
    coverage.warnings = list(chain.warnings)
    return coverage
