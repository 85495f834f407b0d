"""Real-browser tests: Python Playwright driving the system Chromium against ``live_server``.

Enable them with ``apt-get install -y chromium`` (never ``playwright install``): without
/usr/bin/chromium they are skipped with that message. Playwright's sync API runs an event loop
in the test thread, so ORM calls in these tests need ``DJANGO_ALLOW_ASYNC_UNSAFE``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
SKIP_REASON = ("Chromium is missing: install it with `apt-get install -y chromium` to run the "
               "browser tests (never `playwright install`)")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
PASSWORD = "pw-for-tests-only"  # tests.factories.UserFactory's

requires_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason=SKIP_REASON)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().parent == here:
            item.add_marker(pytest.mark.browser)
            item.add_marker(requires_chromium)


@pytest.fixture(scope="module")
def playwright():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright):
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def served(live_server):
    """The live server as a web process of `make run` serves: only once its query encoder
    answers (contexts/web/worker.py). Otherwise the first search of a test process waits for the
    encoder child to load torch and the model, which under the suite's load outlasted the
    browser's 15 s wait (test_first_day_content, when it was the first to search)."""
    from contexts.retrieval import query_encoder

    assert query_encoder.wait_until_ready(heartbeat=lambda: None)
    return live_server


@pytest.fixture
def login(browser, served) -> Iterator[Callable]:
    """``login(username, **context_options)`` → a page of a fresh browser context, logged in
    through the login form."""
    contexts = []

    def open_as(username: str, **options):
        context = browser.new_context(base_url=served.url,
                                      viewport=options.pop("viewport",
                                                           {"width": 1280, "height": 900}),
                                      **options)
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.goto("/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        return page

    yield open_as
    for context in contexts:
        context.close()


@pytest.fixture
def api(playwright, served):
    """Plain HTTP against the live server (the agents' side)."""
    context = playwright.request.new_context(base_url=served.url)
    yield context
    context.dispose()
