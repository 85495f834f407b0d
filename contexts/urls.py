from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from contexts.api import errors as api_errors
from contexts.console import urls as console_urls
from contexts.console.views import site
from contexts.kernel.errors import is_api
from contexts.kernel.metrics import metrics_view
from contexts.mcp.metadata import METADATA_PATH, protected_resource
from contexts.web.health import healthz, livez, readyz
from contexts.web.restricted import restricted


def _by_audience(api_handler: Callable, page_handler: Callable) -> Callable:
    """An error handler answering agents (``/api/``, ``/mcp``) in the JSON error shape and
    people with a console page in its layout and navigation."""
    def handler(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return (api_handler if is_api(request) else page_handler)(request, *args, **kwargs)
    handler.__name__ = page_handler.__name__
    return handler


handler400 = "contexts.api.errors.handler400"
handler403 = _by_audience(api_errors.handler403, site.permission_denied)
handler404 = _by_audience(api_errors.handler404, site.page_not_found)
handler500 = _by_audience(api_errors.handler500, site.server_error)

urlpatterns = [
    path("livez", livez, name="livez"),
    path("readyz", readyz, name="readyz"),
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", site.favicon, name="favicon"),
    # Where an MCP client that was refused (401) learns how /mcp is protected (RFC 9728).
    path(METADATA_PATH.lstrip("/"), protected_resource, name="mcp-protected-resource"),
    # Every organization's traffic together: the operator's (contexts/web/restricted.py).
    path("metrics", restricted(metrics_view), name="metrics"),
    # One login form, the console's rate-limited one: the admin's own would be a second,
    # unthrottled place to guess passwords.
    path("admin/login/", lambda request: redirect_to_login(
        request.GET.get("next", "/admin/"), login_url="console:login"), name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its init script as a URL: no inline script (the CSP forbids it).
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"),
         name="api-docs"),
    path("api/", include("contexts.api.urls")),
    path("governance/", include((console_urls.governance_patterns, "governance"))),
    path("", include("contexts.console.urls")),
]
