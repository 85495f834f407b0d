"""What a team sees on its first day that the browser walk (tests/browser/test_first_day.py)
does not show by itself (issue 40, "Must show"): a fresh organization's overview says what to
do first, to each person what they may do; an empty scope's fragment list says how to fill it
(and a filter that matches nothing still says so); a refused repository role names its field;
personal tokens are offered to members, not to a superuser who does not belong."""

from __future__ import annotations

import re

import pytest

from accounts.models import Role
from contexts.services.fragments import create_fragment
from tests.api.conftest import world  # noqa: F401 - fixture
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import MembershipFactory, UserFactory

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


SKIP = ("/logout/", "/admin/", "/api/", "/static/", "/mcp", "/metrics", "/login/sso")


def _links(html: str, base: str) -> list[str]:
    from urllib.parse import urljoin

    found = []
    for href in re.findall(r'href="([^"#]*)', html):
        url = urljoin(base, href.replace("&amp;", "&"))
        if href and url.startswith("/") and not url.startswith(SKIP):
            found.append(url)
    return found


def test_every_page_a_team_reaches_answers_and_its_element_ids_are_unique(
        cast, world, settings, tmp_path):  # noqa: F811
    """From the home page, every link a superuser who administers the organization can follow
    (each page once, up to 200): none answers an error, and no page carries one element id
    twice — a label tied to a repeated id names another form's input (it did on Members and on
    Ingest)."""
    settings.INGEST_ROOTS = [str(tmp_path)]  # the Ingest page shows its server-path form too
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    MembershipFactory(user=root, org=cast.org, role=Role.ADMIN)
    client = client_for(root)
    seen, queue, failures = set(), ["/"], []
    while queue and len(seen) < 200:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        if response.status_code in (301, 302):
            queue.append(response["Location"])
            continue
        if response.status_code >= 400:
            failures.append(f"{url}: {response.status_code}")
            continue
        if "text/html" not in response.get("Content-Type", ""):
            continue
        html = response.content.decode()
        ids = re.findall(r'\sid="([^"]+)"', html)
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            failures.append(f"{url}: repeated ids {repeated}")
        queue.extend(link for link in _links(html, url) if link not in seen)
    assert len(seen) > 40  # the walk reached the organization's pages, not only the home page
    assert failures == []
