"""Governance fixtures: the domain cast, a fixed clock and fragments with chosen timestamps.

Every rule runs on ``NOW`` (a fixed datetime in the past, so that anything the services stamp
with the real time — an edit, a verification through a view — happens *after* it).
"""

from __future__ import annotations

import datetime as dt

import pytest

from accounts.permissions import SYSTEM
from contexts.models import Fragment, SourceDocument, SourcePointer
from contexts.services.fragments import create_fragment
from tests.api.conftest import world  # noqa: F401 - re-exported fixture
from tests.domain.conftest import Cast, cast  # noqa: F401 - re-exported fixture

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def days_ago(days: float, now: dt.datetime = NOW) -> dt.datetime:
    return now - dt.timedelta(days=days)


def make(scope, title: str, body: str, *, owner=None, kind: str = "prose",
         edited: dt.datetime | None = None, verified: dt.datetime | None = None,
         retrieved: int = 0, cited: int = 0, last_retrieved: dt.datetime | None = None,
         **fields) -> Fragment:
    """A fragment whose clock-relevant fields are set explicitly (default: edited 30 days
    before NOW, never used)."""
    fragment = create_fragment(SYSTEM, scope, title=title, body=body, kind=kind, owner=owner,
                               **fields)
    edited = edited or days_ago(30)
    Fragment.objects.filter(pk=fragment.pk).update(
        last_edited_at=edited, recorded_at=edited, valid_from=edited, verified_at=verified,
        retrieved_count=retrieved, cited_count=cited, last_retrieved_at=last_retrieved)
    fragment.refresh_from_db()
    return fragment


def hot(scope, title: str, body: str, *, owner, kind: str = "prose", age_days: float = 200,
        **fields) -> Fragment:
    """Used often and recently (10 retrievals, last 2 days before NOW), edited long ago."""
    return make(scope, title, body, owner=owner, kind=kind, edited=days_ago(age_days),
                retrieved=10, last_retrieved=days_ago(2), **fields)


def point(fragment: Fragment, path: str, *, changed: dt.datetime, repository=None,
          anchor: str = "top") -> SourcePointer:
    document, _ = SourceDocument.objects.get_or_create(
        org_id=fragment.org_id, repository=repository, path=path,
        defaults={"content_hash": path, "changed_at": changed})
    return SourcePointer.objects.create(fragment=fragment, document=document, anchor=anchor)


@pytest.fixture
def org_lead_emails(cast: Cast) -> set[str]:  # noqa: F811
    """Who escalations go to in the cast: its admin ("owner") and its tech lead."""
    return {cast.owner.email, cast.lead.email}
