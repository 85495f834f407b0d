"""What a team sees on its first day that the browser walk (tests/browser/test_first_day.py)
does not show by itself (issue 40, "Must show"): a fresh organization's overview says what to
do first, to each person what they may do; an empty scope's fragment list says how to fill it
(and a filter that matches nothing still says so); a refused repository role names its field;
personal tokens are offered to members, not to a superuser who does not belong."""

from __future__ import annotations

import pytest

from contexts.services.fragments import create_fragment
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _html(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def test_a_fresh_organizations_overview_lists_first_steps_per_person(cast):  # noqa: F811
    admin = _html(client_for(cast.owner), "/o/acme/")
    assert 'id="first-steps"' in admin
    for link in ("/o/acme/ingest/", "/o/acme/fragments/new", "/o/acme/sources/",
                 "/o/acme/members/", "/o/acme/tokens/"):
        assert f'href="{link}"' in admin.split('id="first-steps"')[1].split("</section>")[0]
    viewer = _html(client_for(cast.viewer), "/o/acme/")
    steps = viewer.split('id="first-steps"')[1].split("</section>")[0]
    assert "You read here" in steps and "/o/acme/members/" not in steps
    # A member who administers nothing finds their personal tokens from the overview.
    assert 'href="/o/acme/tokens/personal"' in viewer

    create_fragment(cast.owner, cast.repo.scope, title="Retries", body="Back off.",
                    kind="prose", owner=cast.owner)
    assert 'id="first-steps"' not in _html(client_for(cast.owner), "/o/acme/")


def test_an_empty_scope_says_how_to_fill_it_and_a_filter_says_nothing_matches(cast):  # noqa: F811
    client = client_for(cast.teammate)
    url = f"/scopes/{cast.repo.scope.public_id}/fragments/"
    empty = _html(client, url)
    assert "Nothing in acme/web yet." in empty and "No fragments match" not in empty
    assert 'href="/o/acme/ingest/"' in empty
    assert f'href="/o/acme/fragments/new?scope={cast.repo.scope.public_id}"' in empty

    create_fragment(cast.owner, cast.repo.scope, title="Retries", body="Back off.",
                    kind="prose", owner=cast.owner)
    filtered = _html(client, url + "?kind=adr")
    assert "No fragments match these filters." in filtered and "Nothing in" not in filtered


def test_a_refused_repository_role_names_its_field(cast):  # noqa: F811
    response = client_for(cast.owner).post("/o/acme/members/viewer/repository-role",
                                           {"repository": "repo_nosuchrepo00", "role": "curator"})
    assert response.status_code == 400
    assert "viewer: repository role not set — Repository: Select a valid choice." \
        in response.content.decode()


def test_personal_tokens_are_offered_to_members_only(cast):  # noqa: F811
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    assert "/o/acme/tokens/personal" not in _html(client_for(root), "/o/acme/tokens/")
    assert 'href="/o/acme/tokens/personal"' in _html(client_for(cast.owner), "/o/acme/tokens/")
