"""The one parser for ids and slugs that arrive from outside: URL paths, query strings, form
fields and MCP tool arguments.

PostgreSQL refuses NUL in text, and the driver raised before a lookup could answer "not found",
so an id with a NUL byte was a 500 (red-team finding 5). Checking the *shape* here — public ids
are ``<prefix>_<base32 or hex>``, slugs follow ``accounts.models.SLUG_VALIDATOR`` — rejects NUL,
every other control character and over-long input in one place, before any query:

- URL patterns use the converters below (``<pid:…>``, ``<signed:…>``, ``<digits:…>``): a
  malformed id does not match, so the answer is the ordinary 404.
- Values from query strings, form fields and tool arguments go through :func:`parse_public_id`
  or :func:`parse_slug`; :class:`InvalidId` (an :class:`InvalidField`, which views also raise
  for other refused fields) becomes a 400 naming the field (the API's error body through
  ``contexts.api.errors``, a short plain-text answer in the console through
  :class:`InvalidIdMiddleware`). The message never echoes the value.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import register_converter

from contexts.kernel.errors import error_body, is_api

# accounts.models.new_public_id ("org_", "repo_", "tok_", "job_", "tr_", … + 14 base32) and
# contexts.models.fragments.fragment_public_id ("frag_" + 20 hex); Scope.public_id holds up to 40.
PUBLIC_ID = r"[a-z]{1,12}_[0-9a-z]{1,27}"
SLUG = r"[a-z0-9][a-z0-9_-]{0,62}"  # accounts.models.SLUG_VALIDATOR
# django.core.signing output (base64url, ":" separators, "." marking compression): nudge links.
SIGNED = r"[A-Za-z0-9_.:-]{1,1024}"
DIGITS = r"[0-9]{1,18}"  # a bigint primary key

_PUBLIC_ID = re.compile(PUBLIC_ID)
_SLUG = re.compile(SLUG)


class InvalidField(BadRequest, ValueError):
    """A value from a query string, form field or tool argument that is refused before any
    query. A ``BadRequest`` so that even an unhandled one is Django's 400, never a 500; a
    ``ValueError`` so that converters' callers see one."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class InvalidId(InvalidField):
    """An id or slug that cannot name anything."""

    def __init__(self, field: str, what: str) -> None:
        super().__init__(field, f"not a valid {what}")


def _parse(value: object, pattern: re.Pattern[str], field: str, what: str) -> str:
    # fullmatch: "$" would accept a trailing newline.
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise InvalidId(field, what)
    return value


def parse_public_id(value: object, field: str) -> str:
    """``value`` if it has the shape of a public id, else :class:`InvalidId` for ``field``."""
    return _parse(value, _PUBLIC_ID, field, "id")


def parse_slug(value: object, field: str) -> str:
    return _parse(value, _SLUG, field, "slug")


# --- URL converters -------------------------------------------------------------------------------
class _Converter:
    regex = ""

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: object) -> str:
        return str(value)


class PublicIdConverter(_Converter):
    regex = PUBLIC_ID

    def to_python(self, value: str) -> str:
        return parse_public_id(value, "id")  # the regex already holds; one rule all the same


class SignedConverter(_Converter):
    regex = SIGNED


class DigitsConverter(_Converter):
    """A primary key kept as a string (views such as django-guardian's pass it to ``unquote``)."""

    regex = DIGITS


class UsernameConverter(_Converter):
    """What Django's username validator accepts (letters, digits and ``@ . + - _``): a control
    character or NUL never reaches a view, it is "not found"."""

    regex = r"[\w.@+-]{1,150}"


class UrlSafeConverter(_Converter):
    """A URL-safe base64 value or token (Django's set-password link: ``<uidb64>/<token>``)."""

    regex = r"[0-9A-Za-z_-]{1,200}"


CONVERTERS = {"pid": PublicIdConverter, "signed": SignedConverter, "digits": DigitsConverter,
              "username": UsernameConverter, "urlsafe": UrlSafeConverter}


def register_converters() -> None:
    """Called from ``ContextsConfig.ready``, before any URLconf is imported."""
    for name, converter in CONVERTERS.items():
        register_converter(converter, name)


# --- answering ------------------------------------------------------------------------------------
class InvalidIdMiddleware:
    """A malformed id from a query string or form field is a 400 naming the field, logged as
    nothing more than the request line (it is the caller's mistake, not the server's)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception
                          ) -> HttpResponse | None:
        if not isinstance(exception, InvalidField):
            return None
        if is_api(request):
            return JsonResponse(error_body("invalid", exception.reason, exception.field),
                                status=400)
        return HttpResponse(str(exception), status=400,
                            content_type="text/plain; charset=utf-8")
