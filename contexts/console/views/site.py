"""Site-wide pages: the console's 403, 404 and 500 pages, in its layout and navigation, and the
favicon. The root URLconf sends ``/api/`` and ``/mcp`` errors to the JSON handlers instead."""

from __future__ import annotations

import logging
from functools import lru_cache

from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

from contexts.console.views.common import org_context, remembered_org

logger = logging.getLogger(__name__)

FAVICON = "favicon.svg"

PAGES = {
    403: ("You may not do that here",
          "Your role in this organization or repository does not allow it. Ask a curator or an "
          "administrator of the organization if you need it."),
    404: ("Page not found",
          "There is nothing here, or nothing you can read. Check the address, or start again "
          "from your organizations."),
    500: ("Something went wrong",
          "The console could not answer this request. It has been logged; try again in a "
          "moment."),
}


def _page(request: HttpRequest, status: int, detail: str = "") -> HttpResponse:
    title, text = PAGES[status]
    context = {"status": status, "title": title, "text": text, "detail": detail}
    try:
        # The layout's navigation reads the user's organizations; a failing database (a 500)
        # still gets a page, without navigation.
        context.update(org_context(request, remembered_org(request)))
        body = loader.render_to_string("console/error.html", context, request)
    except Exception:  # noqa: BLE001 - the error page itself must not fail
        logger.exception("the %s page could not show the navigation", status)
        try:
            body = loader.render_to_string("console/error.html", context)
        except Exception:  # noqa: BLE001
            body = f"<!doctype html><title>{title}</title><h1>{title}</h1><p>{text}</p>"
    return HttpResponse(body, status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    # The console's refusals say what was refused ("you may not edit fragments in this
    # scope"); they are raised only where the user may already read the object.
    detail = str(exception).rstrip(".") if isinstance(exception, PermissionDenied) else ""
    return _page(request, 403, detail)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, 404)  # never the exception's text: it names models and lookups


def server_error(request: HttpRequest) -> HttpResponse:
    return _page(request, 500)


@lru_cache(maxsize=1)
def _favicon() -> bytes:
    found = finders.find(FAVICON)
    if found:
        with open(found, "rb") as handle:
            return handle.read()
    with staticfiles_storage.open(FAVICON) as handle:  # collected (production)
        return handle.read()


@require_GET
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on every page whatever the page links."""
    return HttpResponse(_favicon(), content_type="image/svg+xml")
