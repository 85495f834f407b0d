"""Django's own 400/403/404/500 handlers, in the API's JSON error shape for ``/api/`` paths so
that an agent never has to parse an HTML error page. DRF's exceptions are mapped to that shape
by ``contexts.protocol.errors.exception_handler`` (shared with the MCP server).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from contexts.kernel.errors import error_body, is_api


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(error_body("not_found", "not found"), status=404)
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api(request):
        return JsonResponse(error_body("server_error", "internal server error"), status=500)
    return defaults.server_error(request)


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(error_body("permission_denied", "permission denied"), status=403)
    return defaults.permission_denied(request, exception)


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api(request):
        return JsonResponse(error_body("bad_request", "bad request"), status=400)
    return defaults.bad_request(request, exception)
