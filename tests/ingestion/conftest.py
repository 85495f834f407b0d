"""Fixtures for the ingestion pipeline and job tests: a real organization and repository, a
lexical index under ``tmp_path``, and deterministic source trees written to disk (Markdown with
front matter and nested headings, Python, Go, distinct prose).

Helpers are handed out as fixtures rather than imported (see ``tests/search/conftest.py``).
"""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from accounts.models import Organization, Repository, Role
from tests.factories import (
    MembershipFactory,
    OrganizationFactory,
    RepositoryFactory,
    UserFactory,
)

# Plain English words for deterministic, distinct prose (real words keep language detection
# and the tokenizer on their ordinary path).
WORDS = (
    "account action active address agent alert allow answer archive audit backlog balance "
    "batch before bucket budget buffer build burst cache capacity change channel check "
    "client cluster commit config connect consumer context counter cursor daemon dashboard "
    "database deadline decision default deploy design detail device digest disk domain drain "
    "driver engine entry error escalate event expire export factor failure feature field "
    "filter flag flush format frame gateway global graph guard handler header health history "
    "host index input instance interval issue journal key label latency layer ledger limit "
    "listener load lock log machine manual memory merge metric migrate mirror model module "
    "monitor network node notice offset operator option order origin output owner packet "
    "page parser partition patch path payload peer period permit pipeline policy pool port "
    "primary probe process profile program proxy publish quota queue range ratio reader "
    "record recover region release replica report request reserve resolve resource response "
    "restart retry review rollout route runtime sample scale schedule schema scope search "
    "secret segment select sender server service session shard signal snapshot socket source "
    "span stage state status storage stream subject summary switch sync table target task "
    "tenant thread ticket timeout token topic trace traffic tunnel update upgrade upload usage "
    "user value vector version volume warning window worker writer zone"
).split()


def prose(seed: int | str, words: int = 120, *, width: int = 90) -> str:
    """A deterministic paragraph of ``words`` words, different for every seed."""
    rng = random.Random(str(seed))
    sentences, current = [], []
    for _ in range(words):
        current.append(rng.choice(WORDS))
        if len(current) >= rng.randint(8, 16):
            sentences.append(" ".join(current).capitalize() + ".")
            current = []
    if current:
        sentences.append(" ".join(current).capitalize() + ".")
    return textwrap.fill(" ".join(sentences), width=width)


def py_function(name: str, topic: str, steps: int = 14, *, tweak: str = "") -> str:
    """A Python function large enough (≈400 tokens) to be a chunk of its own; different names
    give different statements, so two functions are never near-duplicates."""
    rng = random.Random(name)
    lines = [f"def {name}(values, limit):",
             f'    """Compute the {topic} of the values, stopping at the limit."""']
    for i in range(steps):
        a, b, c = rng.sample(WORDS, 3)
        lines.append(f"    {a}_{b} = {c}_{topic}(values, limit, step={i})  # {rng.choice(WORDS)}")
    if tweak:
        lines.append(f"    {tweak}")
    lines.append(f"    return {topic}_total(values)")
    return "\n".join(lines) + "\n"


def python_module(*, tweak_latency: str = "", with_backlog: bool = True) -> str:
    functions = [
        py_function("compute_throughput", "throughput"),
        py_function("compute_latency", "latency", tweak=tweak_latency),
    ]
    if with_backlog:
        functions.append(py_function("compute_backlog", "backlog"))
    return "\n\n".join(functions)


GO_SOURCE = textwrap.dedent("""\
    package limiter

    // Bucket holds the tokens of one key of the quokkalimiter.
    type Bucket struct {
    \tTokens   float64
    \tCapacity float64
    \tRate     float64
    }

    // Refill adds tokens for the elapsed seconds, never beyond capacity.
    func (b *Bucket) Refill(elapsed float64) {
    \tb.Tokens += elapsed * b.Rate
    \tif b.Tokens > b.Capacity {
    \t\tb.Tokens = b.Capacity
    \t}
    }

    // Take removes one token when one is available.
    func (b *Bucket) Take() bool {
    \tif b.Tokens < 1 {
    \t\treturn false
    \t}
    \tb.Tokens--
    \treturn true
    }
    """)


def adr_markdown(owner: str, *, with_rollback: bool = True) -> str:
    """An ADR with front matter, nested headings and a relative Markdown link.

    Every section is large enough (≈200 words) to be a fragment of its own; each carries one
    made-up word so lexical search can find exactly that section.
    """
    parts = [
        "---",
        "title: Token bucket for the retrieval API",
        "kind: adr",
        f"owner: {owner}",
        "links: [other.md]",
        "---",
        "",
        "# Token bucket for the retrieval API",
        "",
        "## Context",
        "",
        "Bursts of agent traffic starve the pool; see the "
        "[restart runbook](ops/restart.md) for what on-call does today. "
        "zanzibarcontext",
        "",
        prose("adr-context", 200),
        "",
        "## Decision",
        "",
        "### Bucket sizing",
        "",
        "Buckets are sized per token. quixoticsizing",
        "",
        prose("adr-sizing", 200),
        "",
        "### Refill policy",
        "",
        "Refill happens lazily on access. lemniscaterefill",
        "",
        prose("adr-refill", 200),
        "",
    ]
    if with_rollback:
        parts += [
            "## Rollback",
            "",
            "Rolling back means removing the limiter. xylophonerollback",
            "",
            prose("adr-rollback", 200),
            "",
        ]
    return "\n".join(parts)


def other_markdown() -> str:
    return "\n".join(["# Other notes", "", "Notes the ADR links to. ocelotnotes", "",
                      prose("other", 150), ""])


def restart_markdown() -> str:
    return "\n".join(["# Restarting the web workers", "", "How to restart. marmotrestart", "",
                      prose("restart", 150), ""])


@dataclass
class IngestTarget:
    org: Organization
    repo: Repository
    owner: object       # named as ``owner:`` in the ADR's front matter
    other_owner: object
    creator: object     # the job's creator, the default owner of everything else


@pytest.fixture
def ingest_target(settings, tmp_path) -> IngestTarget:
    """An organization with a repository, two possible owners and a private lexical index.

    Needs database access from the test (``pytest.mark.django_db``, with ``transaction=True``
    where the code under test must really commit).
    """
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    org = OrganizationFactory()
    repo = RepositoryFactory(org=org)
    people = {role: UserFactory(username=name) for role, name in [
        ("owner", "adr-owner"), ("other_owner", "adr-new-owner"), ("creator", "ingest-creator")]}
    for user in people.values():  # an owner named in front matter must curate the scope
        MembershipFactory(user=user, org=org, role=Role.CURATOR)
    return IngestTarget(org=org, repo=repo, **people)


@pytest.fixture
def write_tree():
    """Write ``{relative path: str | bytes}`` under a directory; returns the directory."""

    def write(root: Path, files: dict[str, str | bytes]) -> Path:
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return root

    return write


@pytest.fixture(scope="session")
def sources():
    """The text generators above, as one object (tests cannot import conftest reliably)."""

    return SimpleNamespace(prose=prose, py_function=py_function, python_module=python_module,
                           go=GO_SOURCE, adr=adr_markdown, other=other_markdown,
                           restart=restart_markdown)
