"""Single sign-on in the console: the redirect to the company's identity provider and the
callback (authorization code with PKCE; ``contexts.sso.oidc``). A refused callback shows
a page saying why, with status 403, and signs nobody in."""

from __future__ import annotations

import logging

from django.contrib.auth import login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from contexts.sso import oidc
from contexts.usecases import sso

logger = logging.getLogger(__name__)

_NEXT = "sso_next"


def _enabled() -> None:
    if not oidc.enabled():
        raise Http404("single sign-on is not configured")


@require_GET
def start(request: HttpRequest) -> HttpResponse:
    _enabled()
    next_url = request.GET.get("next", "")
    request.session[_NEXT] = next_url if url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()) else ""
    try:
        return oidc.authorize_redirect(request, request.build_absolute_uri(
            reverse("console:sso-callback")))
    except oidc.SignInFailed as exc:
        logger.warning("single sign-on could not start: %s", exc.detail)
        return _refused(request, exc.reason, status=503)


@require_GET
def callback(request: HttpRequest) -> HttpResponse:
    _enabled()
    try:
        claims, token = oidc.complete(request)
    except oidc.SignInFailed as exc:
        if exc.audited:
            sso.record_refused(exc.reason, exc.detail)
        else:
            logger.info("single sign-on callback refused: %s", exc.detail)
        return _refused(request, exc.reason)
    try:
        user = sso.complete_sign_in(claims, token)
    except oidc.SignInFailed as exc:
        return _refused(request, exc.reason)
    except oidc.ProviderUnavailable as exc:
        logger.warning("single sign-on: %s", exc)
        return _refused(request, "The identity provider cannot be reached. Try again later.",
                        status=503)
    next_url = request.session.pop(_NEXT, "") or "/"
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(next_url)


def _refused(request: HttpRequest, reason: str, status: int = 403) -> HttpResponse:
    return render(request, "console/sso_refused.html", {"reason": reason}, status=status)
