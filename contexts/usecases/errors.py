"""What a use case refuses with. Each adapter says it in its own words: REST and MCP as the
API's error body (``contexts.protocol.errors``), the console as a form error or page."""

from __future__ import annotations


class Refused(PermissionError):
    """The principal may not do this (a 403 over the API); the message says what is missing
    and never whether something it may not read exists."""


class NotVisible(LookupError):
    """No such object among those the principal reads (a 404: missing and unreadable answer
    alike)."""
