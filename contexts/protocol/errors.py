"""One JSON error shape for the agents' API, REST and MCP alike:
``{"error": {"code", "message", "field"}}`` (``contexts.kernel.errors.error_body``).

Every exception a request can raise goes through :func:`exception_handler` (DRF's
``EXCEPTION_HANDLER``; the MCP tools call it too): DRF's own, the use cases' refusals
(``contexts.usecases.errors``), invalid operations naming their field, a malformed id, an
outage (``contexts.kernel.availability``), Django's refusals of a malformed body — and the MCP
SDK's check of a tool's arguments against its schema (a pydantic ``ValidationError``), told in
the words DRF's fields use for the same mistake, so that a missing or mistyped argument reads
the same over MCP as over REST.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404
from pydantic import ValidationError as ArgumentsInvalid
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from contexts.kernel.availability import outage
from contexts.kernel.errors import error_body
from contexts.kernel.ids import InvalidField
from contexts.protocol.validation import too_large
from contexts.services.errors import EditConflict, InvalidOperation
from contexts.usecases.errors import NotVisible, Refused

logger = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    """A write against a stale version; ``detail`` carries both texts so nothing is lost."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "the object changed since you read it"

    def __init__(self, message: str, field: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.field = field
        self.extra = extra


def _first_field_error(detail: Any, prefix: str = "") -> tuple[str | None, str]:
    """The first (dotted field path, message) of a nested DRF validation error."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if key == "non_field_errors":
                name = prefix or None
            return _first_field_error(value, name) if value else (name, "invalid")
    if isinstance(detail, list) and detail:
        first = detail[0]
        if isinstance(first, dict | list):
            return _first_field_error(first, prefix)
        return (prefix or None, str(first))
    return (prefix or None, str(detail))


def _refused_request(exc: SuspiciousOperation) -> exceptions.APIException:
    """Django's refusals while parsing a form/multipart body (raised inside DRF's parsing, so
    Django's own 400 handling never sees them) as API errors."""
    if isinstance(exc, RequestDataTooBig):
        return too_large()
    if isinstance(exc, TooManyFilesSent):
        return exceptions.ValidationError(
            {"files": [f"at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files at once"]})
    if isinstance(exc, TooManyFieldsSent):
        return exceptions.ValidationError(
            [f"at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} fields at once"])
    return exceptions.ParseError("malformed request")


# pydantic's error types → the message DRF's field gives for the same mistake.
_REQUIRED = serializers.Field.default_error_messages["required"]
_NULL = serializers.Field.default_error_messages["null"]
_ARGUMENT_MESSAGES = {
    "missing": _REQUIRED,
    "string_type": serializers.CharField.default_error_messages["invalid"],
    "int_type": serializers.IntegerField.default_error_messages["invalid"],
    "int_parsing": serializers.IntegerField.default_error_messages["invalid"],
    "int_from_float": serializers.IntegerField.default_error_messages["invalid"],
    "float_type": serializers.FloatField.default_error_messages["invalid"],
    "float_parsing": serializers.FloatField.default_error_messages["invalid"],
    "finite_number": "must be a finite number",
    "bool_type": serializers.BooleanField.default_error_messages["invalid"],
    "bool_parsing": serializers.BooleanField.default_error_messages["invalid"],
    "list_type": serializers.ListField.default_error_messages["not_a_list"],
    "model_type": serializers.Serializer.default_error_messages["invalid"],
    "model_attributes_type": serializers.Serializer.default_error_messages["invalid"],
    "dict_type": serializers.Serializer.default_error_messages["invalid"],
}


def _argument_message(error: Any) -> str:
    value = error.get("input")
    if value is None and error["type"] != "missing":
        return _NULL
    message = _ARGUMENT_MESSAGES.get(error["type"])
    if message is None:  # a mistake DRF has no word for: pydantic's one line, never the input
        return str(error.get("msg") or "invalid")
    return message.format(input_type=type(value).__name__, datatype=type(value).__name__)


def arguments_invalid(exc: ArgumentsInvalid) -> exceptions.ValidationError:
    """A pydantic validation error as DRF's: the same nested ``{field: {sub: [message]}}``
    detail a serializer raises, so the error names ``scope.org_id`` as REST does."""
    detail: dict[str, Any] = {}
    for error in exc.errors(include_url=False):
        node, path = detail, [str(part) for part in error["loc"]] or ["non_field_errors"]
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):  # the parent already has a message of its own
                break
        else:
            messages = node.setdefault(path[-1], [])
            if isinstance(messages, list):
                messages.append(_argument_message(error))
    return exceptions.ValidationError(detail)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, Http404 | NotVisible):
        exc = exceptions.NotFound()
    elif isinstance(exc, Refused):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, InvalidOperation):  # well-formed but not allowed: a 400 naming it
        exc = exceptions.ValidationError({exc.field: [str(exc)]} if exc.field else [str(exc)])
    elif isinstance(exc, EditConflict):  # a stale version: 409 with both texts, nothing lost
        exc = Conflict(str(exc), field="version", current_version=exc.current_version,
                       current={"title": exc.current_title, "text": exc.current_body},
                       submitted={"title": exc.submitted_title, "text": exc.submitted_body})
    elif isinstance(exc, InvalidField):  # e.g. a malformed id argument (contexts/kernel/ids.py)
        exc = exceptions.ValidationError({exc.field: [exc.reason]})
    elif isinstance(exc, ArgumentsInvalid):  # an MCP tool's arguments against its schema
        exc = arguments_invalid(exc)
    elif (unavailable := outage(exc)) is not None:
        # The database is lost, or a write was refused because the broker is down: a
        # retryable 503 with the retry hint (contexts/kernel/availability.py).
        exc = unavailable
    elif isinstance(exc, SuspiciousOperation):
        exc = _refused_request(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        # An unexpected error: log it with the traceback, answer in the API's own shape.
        logger.exception("unhandled API error", exc_info=exc)
        return Response(
            error_body("server_error", "internal server error"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_field_error(exc.detail)
        body = error_body("invalid", message, field, details=exc.detail)
    elif isinstance(exc, Conflict):
        body = error_body("conflict", str(exc.detail), exc.field, **exc.extra)
    elif isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        body = error_body(str(code), str(exc.detail), getattr(exc, "field", None))
        if getattr(exc, "wait", None) is not None:  # throttled, or a service is down
            body["error"]["retry_after"] = exc.wait
    else:  # pragma: no cover - DRF only handles APIException subclasses
        body = error_body("error", str(exc))
    response.data = body
    return response
