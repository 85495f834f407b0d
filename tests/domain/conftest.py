"""The fixed cast every permission test starts from (the Healthchecks way)."""

from dataclasses import dataclass

import pytest

from accounts.models import ApiToken, Organization, Persona, Repository, Role, Session
from accounts.tokens import create_token
from tests.factories import (
    MembershipFactory,
    OrganizationFactory,
    PersonaFactory,
    RepositoryFactory,
    SessionFactory,
    UserFactory,
)


@dataclass
class Cast:
    org: Organization
    other_org: Organization
    repo: Repository
    other_repo: Repository
    persona: Persona
    session: Session
    owner: object       # admin of org
    lead: object        # tech lead of org
    teammate: object    # curator of org
    viewer: object      # viewer of org
    stranger: object    # admin of other_org only
    token: ApiToken     # agent token bound to repo
    raw_token: str


@pytest.fixture
def cast(db) -> Cast:
    org = OrganizationFactory(slug="acme")
    other_org = OrganizationFactory(slug="globex")
    repo = RepositoryFactory(org=org, slug="web")
    other_repo = RepositoryFactory(org=org, slug="billing")
    persona = PersonaFactory(org=org, slug="sre")
    session = SessionFactory(org=org, repository=repo, external_id="iss_2026-03-19-A91")
    people = {}
    for name, role, member_of in [
        ("owner", Role.ADMIN, org), ("lead", Role.TECH_LEAD, org),
        ("teammate", Role.CURATOR, org), ("viewer", Role.VIEWER, org),
        ("stranger", Role.ADMIN, other_org),
    ]:
        people[name] = UserFactory(username=name)
        MembershipFactory(user=people[name], org=member_of, role=role)
    token, raw = create_token(org, "ci-agent", [repo.scope])
    return Cast(org=org, other_org=other_org, repo=repo, other_repo=other_repo,
                persona=persona, session=session, token=token, raw_token=raw, **people)
