"""Single sign-on in a real browser: Chromium against ``live_server`` and the real test OpenID
provider in its own process (``tests.oidc_provider``). The login page's button, the redirect
to the provider with PKCE (S256), state and nonce, the provider's own login form, the way back
into the console signed in — and a tampered ID token ending on the refusal page, nobody signed
in. The same flow without a browser is ``tests/sso/test_sso_login.py``."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from playwright.sync_api import Page, expect

from accounts.models import ExternalIdentity, Membership, Organization, Role
from contexts.sso import oidc
from tests.factories import OrganizationFactory, RepositoryFactory
from tests.oidc_provider.fixture import Provider, oidc_provider  # noqa: F401 - the fixture
from tests.sso.support import PASSWORD, Sso, configure

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 30_000  # ms: two servers and a browser on a busy two-core machine


@pytest.fixture
def acme() -> Organization:
    org = OrganizationFactory(slug="acme", name="Acme")
    RepositoryFactory(org=org, slug="payments")
    return org


@pytest.fixture
def sso(settings, live_server, oidc_provider: Provider) -> Iterator[Sso]:  # noqa: F811
    configured = configure(settings, oidc_provider, (f"{live_server.url}/login/sso/callback/",))
    yield configured
    oidc_provider.tamper("none")
    oidc.reset()


@pytest.fixture
def authorization_endpoint(oidc_provider: Provider) -> str:  # noqa: F811
    metadata = requests.get(oidc_provider.discovery_url, timeout=30).json()
    return metadata["authorization_endpoint"]


@pytest.fixture
def page(browser, live_server) -> Iterator[Page]:
    context = browser.new_context(base_url=live_server.url,
                                  viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT)
    yield context.new_page()
    context.close()


def _record_requests(page: Page) -> list[str]:
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    return urls


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def _through_the_provider(page: Page, sso: Sso, username: str) -> None:
    """From the console's login page: the button, then the provider's own login form."""
    page.locator("#sso-login").click()
    page.wait_for_url(lambda url: url.startswith(sso.provider.base_url))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)


def _signed_in_user_ids() -> set[str]:
    return {str(s.get_decoded().get("_auth_user_id")) for s in Session.objects.all()
            if s.get_decoded().get("_auth_user_id")}


def test_a_person_signs_in_through_the_provider(sso, acme, page, live_server,
                                                authorization_endpoint, screenshots):
    subject = sso.person("bea-browser", name="Bea Browser", groups=("acme-leads",))
    requested = _record_requests(page)

    page.goto("/login/")
    button = page.locator("#sso-login")
    expect(button).to_be_visible()
    expect(button).to_have_text("Sign in with your company account")
    expect(page.get_by_label("Password")).to_be_visible()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    page.screenshot(path=screenshots / "login-sso.png", full_page=True)

    _through_the_provider(page, sso, "bea-browser")
    with page.expect_response(lambda r: "/login/sso/callback/" in r.url) as callback:
        page.get_by_role("button", name="Sign in").click()
    assert callback.value.status == 302, callback.value.status
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator(".who")).to_have_text("bea-browser")
    assert "/login/" not in page.url

    # The authorization request the browser carried to the provider: PKCE S256, state, nonce.
    authorizations = [u for u in requested if u.startswith(authorization_endpoint)]
    assert authorizations, requested
    asked = _query(authorizations[0])
    assert asked["response_type"] == ["code"]
    assert asked["client_id"] == [sso.client_id]
    assert asked["redirect_uri"] == [f"{live_server.url}/login/sso/callback/"]
    assert asked["code_challenge_method"] == ["S256"]
    challenge = asked["code_challenge"][0]
    assert len(challenge) == 43 and "=" not in challenge  # base64url of a SHA-256, unpadded
    assert asked["state"][0] and asked["nonce"][0]
    assert "openid" in asked["scope"][0].split()
    # The provider answered the console's callback with a code and the same state.
    callbacks = [u for u in requested if u.startswith(f"{live_server.url}/login/sso/callback/")]
    assert len(callbacks) == 1, callbacks
    answered = _query(callbacks[0])
    assert answered["code"][0] and answered["state"] == asked["state"]

    # The code exchange succeeded: the account, its identity and the mapped role exist, and
    # the browser's session is that account's.
    linked = ExternalIdentity.objects.select_related("user").get(issuer=sso.provider.issuer,
                                                                 subject=subject)
    user = linked.user
    assert user.username == "bea-browser" and user.is_active
    assert linked.groups == ["acme-leads"] and linked.last_login_at is not None
    membership = Membership.objects.get(user=user, org=acme)
    assert (membership.role, membership.mapped_role) == (Role.TECH_LEAD, Role.TECH_LEAD)
    session_key = next(c["value"] for c in page.context.cookies(live_server.url)
                       if c["name"] == "sessionid")
    session = Session.objects.get(session_key=session_key).get_decoded()
    assert session["_auth_user_id"] == str(user.pk)


def test_a_tampered_id_token_ends_on_the_refusal_page(sso, acme, page, live_server):
    sso.person("tom-browser", groups=("acme-leads",))
    sso.provider.tamper("bad_signature")
    try:
        page.goto("/login/")
        _through_the_provider(page, sso, "tom-browser")
        with page.expect_response(lambda r: "/login/sso/callback/" in r.url) as callback:
            page.get_by_role("button", name="Sign in").click()
        assert callback.value.status == 403
        page.wait_for_url(lambda url: url.startswith(f"{live_server.url}/login/sso/callback/"))
        expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("signature does not verify")
        expect(page.locator(".who")).to_have_count(0)
    finally:
        sso.provider.tamper("none")
    assert not get_user_model().objects.filter(username="tom-browser").exists()
    assert not ExternalIdentity.objects.exists()
    assert not _signed_in_user_ids()
    # Nobody signed in: the console still sends this browser to the login page.
    page.goto("/")
    page.wait_for_url(lambda url: "/login/" in url)


def test_without_local_login_the_page_offers_only_the_provider(sso, page, settings):
    settings.LOCAL_LOGIN_ENABLED = False
    page.goto("/login/")
    expect(page.locator("#sso-login")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_count(0)
    expect(page.locator("input[name=username]")).to_have_count(0)
    expect(page.get_by_role("button", name="Log in")).to_have_count(0)
