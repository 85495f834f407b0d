"""The console's cast: the domain cast (owner, lead, teammate, viewer, stranger) plus a few
fragments in acme and one in globex, written through the services."""

from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.permissions import SYSTEM
from contexts.models import Fragment
from contexts.services.fragments import create_fragment
from tests.api.conftest import world  # noqa: F401 - re-exported fixture (indexed fragments)
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture


@dataclass
class Notes:
    limiter: Fragment      # repo web, prose, owned by teammate
    retry: Fragment        # repo web, code (python), owned by lead
    trap: Fragment         # repo web, negative
    policy: Fragment       # org-wide policy
    secret: Fragment       # globex: the stranger's organization


@pytest.fixture
def notes(cast) -> Notes:  # noqa: F811
    web = cast.repo.scope
    return Notes(
        limiter=create_fragment(SYSTEM, web, title="Rate limiter",
                                body="# Rate limiter\n\nThe bucket refills **once per second**.",
                                owner=cast.teammate, language="markdown"),
        retry=create_fragment(SYSTEM, web, title="retry()", kind="code", language="python",
                              body="def retry(fn):\n    return fn()  # once\n", owner=cast.lead),
        trap=create_fragment(SYSTEM, web, title="Do not cache tokens", kind="negative",
                             body="Caching tokens in memory leaks them into core dumps."),
        policy=create_fragment(SYSTEM, cast.org.scope, title="Deploy policy", kind="policy",
                               body="Never deploy on Friday afternoon."),
        secret=create_fragment(SYSTEM, cast.other_org.scope, title="Globex secret",
                               body="The Globex bucket is unlimited for VIPs."),
    )


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


HTMX = {"HTTP_HX_REQUEST": "true"}


def htmx_to(target: str) -> dict:
    return {**HTMX, "HTTP_HX_TARGET": target}
