"""An organization worth exporting: ingested documents in a repository and at organization
level, a session note, members in every role, a negative fragment, an edited one (two
versions), a superseded one, pins in order, links, a context bundle and an answered nudge."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from django.utils import timezone

from accounts.models import Organization, Role
from accounts.permissions import SYSTEM
from contexts.indexes import follower
from contexts.ingestion.pipeline import Ingestor, Target
from contexts.ingestion.sources import SourceFile
from contexts.models import Context, Fragment, Nudge
from contexts.models.governance import NudgeAnswer, NudgeState
from contexts.services import fragments as fragment_service
from contexts.services import pins
from tests.factories import (
    MembershipFactory,
    OrganizationFactory,
    PersonaFactory,
    RepositoryFactory,
    SessionFactory,
    UserFactory,
)

TOPICS = {
    "docs/rate-limiter.md": ("Rate limiter", [
        ("Buckets", "The rate limiter keeps one token bucket per client; it refills ten "
                    "tokens each second and drops requests on burst once the bucket is empty."),
        ("Tuning", "Raise the bucket size in limiter.toml when a partner sends batches; never "
                   "lower the refill rate below two tokens per second."),
    ]),
    "docs/billing.md": ("Billing retries", [
        ("Retries", "Failed card charges are retried three times with exponential backoff: "
                    "one hour, six hours, then a day. See [deploys](deploys.md)."),
        ("Refunds", "Refunds go through the ledger service and appear within five working "
                    "days; partial refunds need a finance approval ticket."),
    ]),
    "docs/deploys.md": ("Deploy policy", [
        ("Windows", "Deploys happen on weekdays between nine and four; nobody deploys on "
                    "Friday afternoon or during a public holiday freeze."),
        ("Rollback", "Roll back with the previous image tag through the release pipeline; "
                     "database migrations must be reversible before they ship."),
    ]),
    "docs/oncall.md": ("On-call", [
        ("Paging", "The pager rotates weekly on Monday at ten; an acknowledged page must get "
                   "a status note in the incident channel within fifteen minutes."),
        ("Handover", "At handover the outgoing engineer writes open incidents, silenced "
                     "alerts and pending postmortems into the rotation log."),
    ]),
    "docs/search.md": ("Search service", [
        ("Indexing", "The search service rebuilds its tantivy index nightly from PostgreSQL; "
                     "a missing index is rebuilt on the next start automatically."),
        ("Queries", "Queries combine BM25 and dense vectors with reciprocal rank fusion and "
                    "a cross encoder reranks the top fifty candidates."),
    ]),
}
ORG_DOCS = {
    "handbook/security.md": ("Security handbook", [
        ("Secrets", "Secrets live in the vault; rotate database passwords every ninety days "
                    "and never paste credentials into tickets or chat."),
        ("Laptops", "Laptops use full disk encryption and lock after five idle minutes; a "
                    "lost laptop is reported to the security desk at once."),
    ]),
    "handbook/travel.md": ("Travel policy", [
        ("Booking", "Book trains for journeys under five hours; flights need a manager "
                    "approval and economy class below eight hours."),
    ]),
}
PYTHON = '''"""Throughput helpers."""


def compute_throughput(values, window):
    """Requests per second over a sliding window of samples."""
    total = sum(values[-window:])
    return total / max(window, 1)


def backlog_size(queue):
    """How many messages wait in the queue, counting the ones being retried."""
    return len(queue.pending) + len(queue.retrying)
'''

QUERIES = [
    "why does the rate limiter drop requests on burst",
    "how do I tune the limiter bucket size",
    "card charge retry backoff schedule",
    "how long do refunds take",
    "when are deploys allowed",
    "how to roll back a release",
    "pager rotation and acknowledging pages",
    "what to write at on-call handover",
    "how is the tantivy index rebuilt",
    "reciprocal rank fusion and reranking",
    "rotate database passwords",
    "lost laptop",
    "booking flights approval",
    "compute_throughput sliding window",
    "backlog size retrying messages",
    "never set the refill rate to zero",
    "friday afternoon deploy",
    "session finding about bucket size",
    "partial refund approval ticket",
    "full disk encryption",
]


def markdown(title: str, sections: list[tuple[str, str]]) -> bytes:
    return ("\n\n".join([f"# {title}", *(f"## {h}\n\n{text}" for h, text in sections)])
            + "\n").encode()


@dataclass
class Built:
    org: Organization
    admin: object
    viewer: object
    negative: Fragment
    superseded: Fragment
    replacement: Fragment
    pinned: list[Fragment]


@pytest.fixture
def built(settings, tmp_path) -> Built:
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    org = OrganizationFactory(slug="acme", name="Acme")
    repo = RepositoryFactory(org=org, slug="web", name="Web")
    persona = PersonaFactory(org=org, slug="sre", w_c=0.2)
    session = SessionFactory(org=org, repository=repo, persona=persona)
    people = {}
    for name, role in [("ada", Role.ADMIN), ("tess", Role.TECH_LEAD), ("cy", Role.CURATOR),
                       ("vic", Role.VIEWER)]:
        people[name] = UserFactory(username=name, first_name=name.title())
        MembershipFactory(user=people[name], org=org, role=role)
    admin = people["ada"]
    Ingestor(Target(org=org, scope=repo.scope, repository=repo, default_owner=people["cy"])).run(
        [SourceFile(path, markdown(*doc)) for path, doc in TOPICS.items()]
        + [SourceFile("app/throughput.py", PYTHON.encode())])
    Ingestor(Target(org=org, scope=org.scope, default_owner=admin)).run(
        [SourceFile(path, markdown(*doc)) for path, doc in ORG_DOCS.items()])

    negative = fragment_service.create_fragment(
        admin, repo.scope, title="Never zero the refill rate", kind="negative",
        body="Setting the limiter refill rate to zero locks every client out until restart.")
    superseded = fragment_service.create_fragment(
        admin, repo.scope, title="Old pager rule",
        body="Pages are acknowledged within an hour by whoever sees them first.")
    replacement = fragment_service.create_fragment(
        admin, repo.scope, title="Pager rule",
        body="Pages are acknowledged within fifteen minutes by the engineer on call.")
    fragment_service.supersede_fragment(admin, superseded, replacement, reason="stricter")
    edited = Fragment.objects.get(org=org, title__startswith="Deploy policy",
                                  body__contains="weekdays")
    fragment_service.edit_fragment(admin, edited, based_on_version=edited.version,
                                   body=edited.body + " Hotfixes are the exception.",
                                   reason="hotfixes")
    fragment_service.create_fragment(
        SYSTEM, session.scope, title="Session finding", kind="session-summary",
        body="In this session we found the limiter bucket size is ten per client.")
    bundle = Context.objects.create(org=org, home=org.scope, slug="runbooks", name="Runbooks",
                                    published=True)
    bundle.ownerships.create(org=org, user=people["tess"])
    oncall = Fragment.objects.filter(org=org, body__contains="pager rotates").first()
    fragment_service.set_contexts(admin, oncall, [bundle])
    pinned = [Fragment.objects.filter(org=org, body__contains=text).first()
              for text in ("bucket size in limiter", "Roll back", "ledger service")]
    for fragment in pinned:
        pins.pin_fragment(admin, fragment, repo.scope, reason=f"pin {fragment.title}")
    pins.reorder_pins(admin, repo.scope, [pinned[2].public_id, pinned[0].public_id,
                                          pinned[1].public_id])
    pinned = [pinned[2], pinned[0], pinned[1]]
    Nudge.objects.create(
        org=org, fragment=pinned[0], owner=people["cy"],
        reasons=[{"code": "age", "detail": "not verified in 180 days"}],
        state=NudgeState.ANSWERED, answer=NudgeAnswer.STILL_ACCURATE,
        answered_by=people["cy"], answered_at=timezone.now() - dt.timedelta(days=1))
    # What the worker would do after these commits (a test's transaction never commits): the
    # vectors of the fragments written through the door, and this node's index.
    follower.reindex_fragments(Fragment.objects.filter(org=org).values_list("pk", flat=True))
    return Built(org=org, admin=admin, viewer=people["vic"], negative=negative,
                 superseded=superseded, replacement=replacement, pinned=pinned)


@dataclass
class Small:
    org: Organization
    admin: object
    viewer: object
    fragments: list[Fragment]


@pytest.fixture
def small(settings, tmp_path) -> Small:
    """An organization without ingestion, for the archive's refusals and the API: an admin
    (sam), a viewer (val), a repository and two fragments."""
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    org = OrganizationFactory(slug="small", name="Small")
    repo = RepositoryFactory(org=org, slug="api")
    admin = UserFactory(username="sam", first_name="Sam")
    viewer = UserFactory(username="val", first_name="Val")
    MembershipFactory(user=admin, org=org, role=Role.ADMIN)
    MembershipFactory(user=viewer, org=org, role=Role.VIEWER)
    fragments = [
        fragment_service.create_fragment(admin, repo.scope, title="Cache keys",
                                         body="Cache keys carry the tenant id first."),
        fragment_service.create_fragment(admin, org.scope, title="Release train",
                                         body="The release train leaves every Tuesday."),
    ]
    return Small(org=org, admin=admin, viewer=viewer, fragments=fragments)
