"""A repository's tech lead reviews that repository's proposals (issue 40, item 5).

docs/api.md says tech leads review proposals. A tech lead of one repository only (a guardian
grant on the repository, given on the Members page) got 403 on the review queue: the console
asked for ``pin`` on the organization. Now the queue opens for them and lists, and lets them
decide, the proposals targeting their repository — never another repository's (a 403 where
they read it, a 404 where they do not), nor the organization's. An agent that proposed over
the API reads the outcome there.
"""

from __future__ import annotations

import pytest

from accounts.models import Membership, Role
from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.models import Proposal
from contexts.usecases import members
from tests.api.conftest import api, as_token  # noqa: F401 - the api fixture
from tests.console.conftest import client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def web_lead(cast):
    """A viewer of the organization who is tech lead of repository web only."""
    person = UserFactory(username="weblead")
    Membership.objects.create(user=person, org=cast.org, role=Role.VIEWER)
    members.set_repository_role(SYSTEM, members.SetRepositoryRole(
        cast.org, "weblead", cast.repo, Role.TECH_LEAD))
    return person


def _propose(api, raw: str, repo: str, title: str) -> str:
    response = as_token(api, raw).post(
        "/api/proposals", {"scope": {"org_id": "acme", "repo_id": repo},
                           "body": f"{title}: always pass a timeout.", "title": title},
        format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.fixture
def proposed(api, cast):  # noqa: F811
    """One proposal for web and one for billing, made over the API by agents."""
    _, web_raw = create_token(cast.org, "web agent", [cast.repo.scope], may_propose=True)
    _, billing_raw = create_token(cast.org, "billing agent", [cast.other_repo.scope],
                                  may_propose=True)
    return {"web": (_propose(api, web_raw, "web", "Web timeouts"), web_raw),
            "billing": (_propose(api, billing_raw, "billing", "Billing timeouts"),
                        billing_raw)}


def test_the_repository_lead_reviews_their_repository_only(api, cast, web_lead, proposed):
    client = client_for(web_lead)
    page = client.get(f"/o/{cast.org.slug}/review/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Web timeouts" in html and "Billing timeouts" not in html
    # The navigation offers the Review item, with its count of one.
    overview = client.get(f"/o/{cast.org.slug}/").content.decode()
    assert f"/o/{cast.org.slug}/review/" in overview
    assert 'aria-label="1 open proposals"' in overview

    web_id, web_raw = proposed["web"]
    approved = client.post(f"/o/{cast.org.slug}/review/{web_id}/approve")
    assert approved.status_code == 302
    proposal = Proposal.objects.get(public_id=web_id)
    assert proposal.state == "approved" and proposal.decided_by == web_lead
    assert proposal.result_fragment.scope == cast.repo.scope
    # The agent reads the outcome over the API.
    outcome = as_token(api, web_raw).get(f"/api/proposals/{web_id}").json()
    assert outcome["state"] == "approved"
    assert outcome["fragment"] == proposal.result_fragment.public_id

    # Another repository's proposal is not theirs to decide: they read billing (a viewer of
    # the organization), so the answer is a 403, and nothing is decided.
    billing_id, billing_raw = proposed["billing"]
    for action, data in (("approve", {}), ("reject", {"reason": "no"}),
                         ("merge", {"into": proposal.result_fragment.public_id,
                                    "body": "merged"})):
        response = client.post(f"/o/{cast.org.slug}/review/{billing_id}/{action}", data)
        assert response.status_code == 403
    assert Proposal.objects.get(public_id=billing_id).state == "open"
    api.credentials()
    assert as_token(api, billing_raw).get(
        f"/api/proposals/{billing_id}").json()["state"] == "open"


def test_a_repository_viewer_or_curator_still_gets_403(cast, proposed):
    for role in (Role.VIEWER, Role.CURATOR):
        person = UserFactory(username=f"web-{role}")
        Membership.objects.create(user=person, org=cast.org, role=Role.VIEWER)
        members.set_repository_role(SYSTEM, members.SetRepositoryRole(
            cast.org, person.username, cast.repo, role))
        client = client_for(person)
        assert client.get(f"/o/{cast.org.slug}/review/").status_code == 403
        assert "/review/" not in client.get(f"/o/{cast.org.slug}/").content.decode()
