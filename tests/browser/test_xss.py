"""Stored XSS in a real browser: the hostile world of ``tests/security/test_xss_rendering.py``
(script payloads and injected htmx attributes in fragment bodies, titles, source file names,
front matter, pin reasons, nudges and a retrieval query) rendered by every console page that
shows it, in Chromium with htmx running. No payload may execute: ``window.__xss`` stays unset,
no dialog opens, no injected htmx attribute is live (nothing requests ``/xss-probe/``), and the
inline editor — swapped in by htmx — holds the hostile text as text."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.security.test_xss_rendering import MARK, PROBE, build_hostile

pytestmark = pytest.mark.django_db(transaction=True)

ACTIVE_HTMX = ("hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete", "hx-trigger")
# Elements whose htmx attributes point at the probe (escaped text never matches a selector).
# The probe's path, not a bare "xss", which a random CSRF token or public id may contain.
INJECTED = ", ".join(f'[{name}*="{PROBE}"], [data-{name}*="{PROBE}"]' for name in ACTIVE_HTMX)


@pytest.fixture
def hostile(cast, tmp_path, settings):  # noqa: F811
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    return build_hostile(cast, tmp_path)


def watch(page) -> dict[str, list[str]]:
    """Record dialogs (dismissed at once, so a page cannot hang on alert()) and probe requests."""
    seen: dict[str, list[str]] = {"dialogs": [], "probes": [], "errors": []}

    def on_dialog(dialog) -> None:
        seen["dialogs"].append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda request: urlsplit(request.url).path.startswith("/xss-probe/")
            and seen["probes"].append(request.url))
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    return seen


# What the DOM would hold had a payload been rendered as markup: the Content-Security-Policy
# may still stop it from running, so the escaping is checked on its own.
INJECTED_MARKUP = """() => {
  const found = [];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      if (attr.name.startsWith("on")) found.push(`${el.tagName} ${attr.name}`);
      if (["href", "src", "action", "formaction"].includes(attr.name)
          && /^\\s*(javascript|data|vbscript):/i.test(attr.value)) {
        found.push(`${el.tagName} ${attr.name}=${attr.value}`);
      }
    }
    if (el.tagName === "SCRIPT" && /__xss|alert/.test(el.textContent)) found.push("SCRIPT");
    if (["IFRAME", "OBJECT", "EMBED"].includes(el.tagName)) found.push(el.tagName);
  }
  return found;
}"""


def assert_inert(page, seen: dict[str, list[str]], where: str) -> None:
    page.wait_for_load_state("networkidle")  # htmx "load" triggers would have fired by now
    assert page.evaluate(INJECTED_MARKUP) == [], where
    assert page.evaluate("window.__xss") is None, where
    assert "XSS" not in page.title(), where
    assert page.locator(INJECTED).count() == 0, where
    assert seen["dialogs"] == [], (where, seen["dialogs"])
    assert seen["probes"] == [], (where, seen["probes"])


def test_no_payload_runs_on_any_page(hostile, login):
    page = login("teammate")
    seen = watch(page)
    for name, url in hostile.pages().items():
        response = page.goto(url)
        assert response is not None and response.status == 200, (name, url)
        # The payloads are on the page as text, so "nothing ran" is not vacuous.
        assert "__xss" in page.content() or "onerror" in page.content(), name
        assert_inert(page, seen, name)


def test_the_inline_editor_keeps_the_payload_as_text(hostile, login):
    page = login("teammate")
    seen = watch(page)
    page.goto(f"/fragments/{hostile.written}/")
    page.get_by_role("link", name="Edit").click()
    body = page.get_by_label("Body")
    body.wait_for()
    # "</textarea><script>…" stayed inside the textarea, as text.
    assert f"</textarea><script>{MARK}</script>" in body.input_value()
    assert_inert(page, seen, "inline editor")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved").first.wait_for()
    assert_inert(page, seen, "after saving")
