"""Full page or partial from the same view (NetBox's ``htmx_partial``), and safe redirects."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme


def htmx_partial(request: HttpRequest, target: str | None = None) -> bool:
    """Whether to answer with a partial: an HTMX request (not a boosted navigation), aimed at
    ``target`` when one is given."""
    htmx = getattr(request, "htmx", None)
    if not htmx or htmx.boosted:
        return False
    return target is None or htmx.target == target


def render_page(request: HttpRequest, page: str, partial: str, context: dict[str, Any], *,
                target: str | None = None, status: int = 200) -> HttpResponse:
    template = partial if htmx_partial(request, target) else page
    return render(request, template, context, status=status)


def safe_next(request: HttpRequest) -> str:
    """``next`` (posted or in the query) when it is a URL of this site, else ``""``."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        return ""
    return target


def redirect_back(request: HttpRequest, fallback: str) -> HttpResponseRedirect:
    """Back to ``next`` when it is a local URL (forms posted without JavaScript)."""
    return HttpResponseRedirect(safe_next(request) or fallback)


def navigate(request: HttpRequest, url: str) -> HttpResponse:
    """Go to ``url``: a redirect, or for HTMX a full navigation (``HX-Redirect``) instead of
    swapping the next page into the form."""
    if htmx_partial(request):
        response = HttpResponse(status=200)
        response["HX-Redirect"] = url
        return response
    return HttpResponseRedirect(url)
