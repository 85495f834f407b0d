"""The one JSON error shape, ``{"error": {"code", "message", "field"}}``, and which requests are
answered in it.

A leaf: the REST API (``contexts.api.errors``), the MCP server, the availability middleware,
the id converters and the operator endpoints all answer in this shape, and none of them may
import another to reach it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict:
    return {"error": {"code": code, "message": message, "field": field, **extra}}


def is_api(request: HttpRequest) -> bool:
    """Whether a request is an agent's (REST or MCP), answered in JSON rather than a page."""
    return request.path.startswith("/api/") or request.path.startswith("/mcp")
