"""A Content-Security-Policy header on every response (Django 5.2 has no built-in one).

The policy (``settings.CONTENT_SECURITY_POLICY``) allows scripts from this origin only: the
console's JavaScript is the vendored htmx and ``static/js/console.js``, with no inline script or
``hx-on``/``js:`` evaluation, and the API docs use drf-spectacular's split view, whose init
script is a separate URL. Inline *styles* stay allowed: templates set widths of score bars in
``style`` attributes and htmx inserts its indicator style element.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and HEADER not in response:  # a view that set its own policy keeps it
            response[HEADER] = self.policy
        return response
