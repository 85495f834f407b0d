"""OpenAPI pieces shared by the views: the one error shape, documented for the statuses each
operation can answer with (so a client — and the schema-conformance tests — can rely on it)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

ERROR_MEANINGS = {
    400: "invalid input; `field` names the offending field (dotted when nested)",
    401: "missing or bad credentials",
    403: "scope not found or not readable, or the action is not allowed",
    404: "not found (or not visible to the caller)",
    409: "the object changed since it was read",
    413: "request body too large",
    415: "unsupported content type",
    429: "throttled; `retry_after` seconds",
    503: "the database or Redis is unavailable; retry after `retry_after` seconds",
}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    details = serializers.JSONField(required=False, help_text="every field's errors (400)")
    retry_after = serializers.FloatField(required=False, help_text="seconds (429)")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


def errors(*statuses: int) -> dict[int, OpenApiResponse]:
    """``responses=`` entries for the error statuses an operation may answer with (and 503:
    any operation that reads the database may find it down)."""
    return {code: OpenApiResponse(ErrorSerializer, description=ERROR_MEANINGS[code])
            for code in (*statuses, 503)}


# Every authenticated operation may be refused for credentials; bodies may be malformed/large.
AUTH = (401, 403)
BODY = (400, 413, 415)
