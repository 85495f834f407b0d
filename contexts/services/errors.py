"""Domain errors raised by service functions; the API and console turn them into responses."""

from __future__ import annotations


class EditConflict(Exception):
    """An edit was based on a version that is no longer current.

    Carries both texts so that the caller can show them side by side: nothing is lost.
    """

    def __init__(self, *, fragment_id: str, based_on: int, current_version: int,
                 current_title: str, current_body: str, submitted_title: str,
                 submitted_body: str) -> None:
        super().__init__(
            f"fragment {fragment_id} is at version {current_version}; your edit was based on "
            f"version {based_on}"
        )
        self.fragment_id = fragment_id
        self.based_on = based_on
        self.current_version = current_version
        self.current_title = current_title
        self.current_body = current_body
        self.submitted_title = submitted_title
        self.submitted_body = submitted_body

    def as_dict(self) -> dict:
        return {
            "fragment_id": self.fragment_id,
            "based_on": self.based_on,
            "current_version": self.current_version,
            "current": {"title": self.current_title, "body": self.current_body},
            "submitted": {"title": self.submitted_title, "body": self.submitted_body},
        }


class InvalidOperation(ValueError):
    """A request that is well-formed but not allowed in the object's state; names the field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
