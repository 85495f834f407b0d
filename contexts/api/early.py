"""Start a retrieval's forward pass as early as the request allows.

The query's embedding is the one expensive step of a retrieval, and everything before it
starts is on the answer's critical path. The view starts it once DRF has authenticated and
throttled the request and the body is valid (so an invalid body costs the view no forward
pass); for a credential this process has just seen authenticate,
:class:`EarlyEmbeddingMiddleware` starts it before that, as the request arrives:
authentication (a database round trip), the throttle (a Redis round trip) and DRF's own
set-up then run beside the forward pass instead of before it (measured with two web
processes: the pass started 4.2–4.8 ms after the request reached Django, now 0.36 ms; bench
ratio 1.59/1.61 → 1.47/1.48). Why this is safe, and what was weighed:
``docs/adr/0009-start-the-forward-pass-before-authentication.md``.

Which credentials count is ``accounts.authentication.recent_credentials``: one that failed
authentication or was throttled is dropped, so neither an anonymous caller nor a throttled one
can make the server embed anything. Nothing is decided here: the request is authenticated,
throttled and validated as before, and an embedding nobody uses is abandoned
(``query_encoder.Pending``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from accounts.authentication import bearer_credential, recent_credentials
from contexts.protocol.validation import body_limit
from contexts.retrieval import dense

ATTRIBUTE = "contexts_early_embedding"
# A retrieval body is a few hundred bytes; larger ones are left to the view's bounded parser.
MAX_EARLY_BODY = 16 * 1024


def _body_cap() -> int:
    limit = body_limit()
    return MAX_EARLY_BODY if limit is None else min(MAX_EARLY_BODY, limit)


def early_embedding(body: object) -> dense.QueryEmbedding | None:
    """Start embedding the query of a not yet validated body (the middleware's), so that the
    forward pass overlaps authentication, validation and scope resolution. The retrieval use
    case (``contexts.usecases.retrieval.retrieve``) uses it only if validation kept the same
    text."""
    query = body.get("query") if isinstance(body, dict) else None
    if not isinstance(query, str) or not 0 < len(query) <= settings.RETRIEVAL["max_query_chars"]:
        return None
    return dense.QueryEmbedding(query.strip())


def started_embedding(request: HttpRequest) -> dense.QueryEmbedding | None:
    """The embedding :class:`EarlyEmbeddingMiddleware` started for ``request``, if any."""
    return getattr(request, ATTRIBUTE, None)


class EarlyEmbeddingMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self._path: str | None = None

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and self._is_retrieval(request):
            setattr(request, ATTRIBUTE, self._start(request))
        return self.get_response(request)

    def _is_retrieval(self, request: HttpRequest) -> bool:
        if self._path is None:
            self._path = reverse("api:retrieve")  # with the script prefix, like request.path
        return request.path == self._path

    @staticmethod
    def _start(request: HttpRequest) -> dense.QueryEmbedding | None:
        credential = bearer_credential(request.META.get("HTTP_AUTHORIZATION", ""))
        if credential is None or credential not in recent_credentials:
            return None
        try:
            if not 0 < int(request.META.get("CONTENT_LENGTH") or 0) <= _body_cap():
                return None
            return early_embedding(json.loads(request.body))
        except (ValueError, RecursionError):  # the view's parser answers with the 400
            return None
