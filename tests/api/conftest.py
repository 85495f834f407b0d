"""A small searchable world on top of the domain cast: fragments embedded and indexed for real."""

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from accounts.permissions import SYSTEM
from contexts.indexes.follower import reindex_fragments
from contexts.models import Fragment
from contexts.services.fragments import create_fragment
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture


@dataclass
class World:
    org_note: Fragment
    repo_limiter: Fragment
    other_repo_billing: Fragment
    session_note: Fragment
    persona_runbook: Fragment
    globex_secret: Fragment


@pytest.fixture
def world(cast, settings, tmp_path) -> World:  # noqa: F811
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"

    def make(scope, title, body, **kw):
        return create_fragment(SYSTEM, scope, title=title, body=body, **kw)

    w = World(
        org_note=make(cast.org.scope, "Deploy policy",
                      "Deploys happen on weekdays only; never deploy on Friday afternoon.",
                      kind="policy"),
        repo_limiter=make(cast.repo.scope, "Rate limiter",
                          "The rate limiter drops requests on burst because the token bucket "
                          "refills once per second; RateLimiter.acquire raises ERR_RATE."),
        other_repo_billing=make(cast.other_repo.scope, "Billing retries",
                                "Billing retries failed charges three times with backoff."),
        session_note=make(cast.session.scope, "Session finding",
                          "In this session we found the limiter bucket size is 10.",
                          kind="session-summary"),
        persona_runbook=make(cast.persona.scope, "SRE runbook",
                             "When the rate limiter pages, raise the bucket size first.",
                             kind="runbook"),
        globex_secret=make(cast.other_org.scope, "Globex secret",
                           "Globex rate limiter secret: the bucket is unlimited for VIPs."),
    )
    reindex_fragments([f.pk for f in vars(w).values()])
    return w


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def as_token(client: APIClient, raw: str) -> APIClient:
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client
