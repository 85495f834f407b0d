"""Who may see the instance's internals: ``/metrics`` and ``/healthz``'s detailed report.

Both describe the whole installation — versions, worker host names, every organization's
traffic together — so they are the operator's, not any caller's. A request may see them when:

- it carries ``Authorization: Bearer <CONTEXTS_METRICS_TOKEN>`` (what a Prometheus scrape job
  sends as its ``authorization`` credentials), or
- its client address (``contexts.kernel.client_address``, so behind a configured proxy the forwarded
  one) is in ``CONTEXTS_METRICS_ALLOW`` (addresses or CIDR networks, empty by default), or
- it comes from a console session of a superuser.

Not an API token with a "metrics" scope: API tokens belong to one organization and are
created by its admins, and none of them should be able to read the whole instance.
Anyone may ask ``/livez`` and ``/readyz`` (``contexts.web.health``), which say nothing but yes or
no.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from accounts.authentication import bearer_credential
from contexts.kernel.client_address import client_address, is_in, networks
from contexts.kernel.errors import error_body

REFUSED_MESSAGE = ("restricted to the operator (CONTEXTS_METRICS_TOKEN, CONTEXTS_METRICS_ALLOW "
                   "or a superuser's session); /livez and /readyz are public")


def may_see_internals(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    credential = bearer_credential(request.META.get("HTTP_AUTHORIZATION", ""))
    if token and credential and hmac.compare_digest(credential.encode(), token.encode()):
        return True
    if is_in(client_address(request), networks(tuple(settings.METRICS_ALLOW))):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_superuser)


def restricted(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Refuse (403, the API's error shape, nothing about the instance) unless
    :func:`may_see_internals`."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not may_see_internals(request):
            return JsonResponse(error_body("permission_denied", REFUSED_MESSAGE), status=403)
        return view(request, *args, **kwargs)

    return wrapper
