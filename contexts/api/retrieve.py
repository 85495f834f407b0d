"""``POST /api/contexts/retrieve`` — the agents' endpoint: parse, call
:func:`contexts.usecases.retrieval.retrieve`, render (``contexts.protocol.retrieval``); the
trace and use counters are written after the response (``after_response``)."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.request import Request
from rest_framework.response import Response

from contexts.api.after_response import run_after_response
from contexts.api.schema import AUTH, BODY, errors
from contexts.protocol.retrieval import (
    RetrieveRequestSerializer,
    RetrieveResponseSerializer,
    response_payload,
    retrieve_command,
)
from contexts.protocol.throttling import AgentRateThrottle
from contexts.usecases import retrieval


@extend_schema(
    summary="Retrieve a cited, scope-safe context bundle within a token budget",
    request=RetrieveRequestSerializer,
    responses={200: RetrieveResponseSerializer, **errors(*BODY, *AUTH, 429)},
    examples=[OpenApiExample("rate limiter", request_only=True, value={
        "query": "why does the rate limiter drop requests on burst?",
        "scope": {"org_id": "demo", "repo_id": "contexts"}, "budget_tokens": 3200})],
)
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def retrieve_view(request: Request) -> Response:
    data = RetrieveRequestSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    # Authenticated, throttled and valid by now: the use case starts the query's forward pass
    # first thing, and resolves scopes while it runs (an invalid body costs no forward pass).
    writes: list[Callable[[], None]] = []
    result = retrieval.retrieve(request.user, retrieve_command(data.validated_data),
                                defer=writes.append)
    response = Response(response_payload(result))
    # The trace row, the use counters and the metrics are written once the answer is out.
    run_after_response(response, writes)
    return response
