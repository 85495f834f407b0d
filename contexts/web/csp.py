"""A Content-Security-Policy header on every response (Django 5.2 has no built-in one).

The policy (``settings.CONTENT_SECURITY_POLICY``) allows scripts from this origin only: the
console's JavaScript is the vendored htmx and ``static/js/console.js``, with no inline script or
``hx-on``/``js:`` evaluation, and the API docs use drf-spectacular's split view, whose init
script is a separate URL. Inline *styles* stay allowed: templates set widths of score bars in
``style`` attributes and htmx inserts its indicator style element.

:class:`SecurityHeadersASGI` puts the same security headers (this policy and Django's
``SecurityMiddleware`` / ``XFrameOptionsMiddleware`` ones) on the MCP app's responses, which are
served beside Django, not through its middleware.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


# --- responses served outside Django ------------------------------------------------------------
def security_headers(*, secure: bool) -> dict[str, str]:
    """The headers Django's middleware puts on every response (``SecurityMiddleware``,
    ``XFrameOptionsMiddleware`` and the policy above), built from the same settings, for the
    MCP app at ``/mcp``, which ``contexts.asgi`` serves beside Django rather than through it.
    ``tests/security/test_redteam_6_mcp_outage.py`` compares them with a REST response's."""
    headers: dict[str, str] = {}
    if settings.SECURE_HSTS_SECONDS and secure:
        hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            hsts += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            hsts += "; preload"
        headers["Strict-Transport-Security"] = hsts
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers["X-Content-Type-Options"] = "nosniff"
    referrer = settings.SECURE_REFERRER_POLICY
    if referrer:
        headers["Referrer-Policy"] = ",".join(
            [v.strip() for v in referrer.split(",")] if isinstance(referrer, str) else referrer)
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers["Cross-Origin-Opener-Policy"] = settings.SECURE_CROSS_ORIGIN_OPENER_POLICY
    headers["X-Frame-Options"] = getattr(settings, "X_FRAME_OPTIONS", "DENY").upper()
    policy = getattr(settings, "CONTENT_SECURITY_POLICY", "")
    if policy:
        headers[HEADER] = policy
    return headers


class SecurityHeadersASGI:
    """ASGI middleware adding :func:`security_headers` to every HTTP response of ``app`` that
    does not set them itself (a header the app sent wins, as with the Django middleware)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [(name.lower().encode("latin-1"), value.encode("latin-1"))
                 for name, value in security_headers(secure=scope.get("scheme") == "https")
                 .items()]

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [
                    *message.get("headers", []),
                    *[(name, value) for name, value in extra if name not in present]]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
