"""Logging filters named in ``settings.LOGGING`` (and installed on every handler, see
:func:`redact_every_handler`)."""

from __future__ import annotations

import logging
import re

REDACTED = "[redacted]"

# Query parameters that carry a credential: link tokens, OpenID Connect's authorization code and
# state, signatures, passwords, OAuth tokens, the e-mailed proof of an address.
CREDENTIAL_PARAMS = (
    "token", "code", "state", "key", "signature", "sig", "password", "passwd", "secret",
    "client_secret", "access_token", "refresh_token", "id_token", "api_key", "apikey",
    "proof", "invite", "invitation", "otp",
)
# A separator and "=" either plain or percent-encoded once: a link inside ``?next=`` is still
# a link.
_SEP = r"(?:[?&;]|%3[Ff]|%26)"
_EQ = r"(?:=|%3[Dd])"
_SLASH = r"(?:/|%2[Ff])"
_SEGMENT = r"(?:(?!%2[Ff]|%3[Ff])[^/\s?#&\"'<>])+"  # one path segment, plain or inside a query
_QUERY = re.compile(
    rf"({_SEP}(?:{'|'.join(CREDENTIAL_PARAMS)}){_EQ})((?:(?!%26)[^&;\s#\"'<>])+)",
    re.IGNORECASE)
# Routes whose path segment is the credential, whatever its shape: a new member's set-password
# link (``/account/set-password/<uidb64>/<token>/``, but not Django's own placeholder
# ``set-password`` that the page redirects to once the token is in the session) and the
# login-free answer links of nudge e-mails (``/governance/nudges/<signed>/<answer>``).
_PATH_RULES = (
    re.compile(rf"({_SLASH}account{_SLASH}set-password{_SLASH}{_SEGMENT}{_SLASH})"
               rf"(?!set-password(?:{_SLASH}|$|[\s?#\"']))({_SEGMENT})"),
    re.compile(rf"({_SLASH}governance{_SLASH}nudges{_SLASH})({_SEGMENT})"),
)
# Credentials recognised by shape, wherever they appear (another route, a mail body, an error
# message): django.core.signing output — ``[.]payload:timestamp:signature`` and
# ``value:signature`` with a SHA-256 signature — and Django's password-reset token
# (``<timestamp in base 36>-<32 hex>``).
_SHAPES = (
    re.compile(r"(?<![\w.:-])\.?[\w-]+:[0-9A-Za-z]{1,13}:[\w-]{43}(?![\w-])"),
    re.compile(r"(?<![\w.:-])\.?[\w-]+:[\w-]{43}(?![\w-])"),
    re.compile(r"(?<![\w-])[0-9a-z]{1,13}-[0-9a-f]{32}(?![\w-])"),
)


def redact(text: str) -> str:
    """``text`` with every credential-bearing part of a URL (and every signed value or reset
    token) replaced by ``[redacted]``; what is left still says which page was asked for."""
    text = _QUERY.sub(rf"\g<1>{REDACTED}", text)
    for rule in _PATH_RULES:
        text = rule.sub(rf"\g<1>{REDACTED}", text)
    for shape in _SHAPES:
        text = shape.sub(REDACTED, text)
    return text


def _redact_arg(value: object) -> object:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, (int, float)):
        return value  # kept as they are: "%d" must still get a number
    text = str(value)  # an object whose text holds a URL (a request, an exception)
    cleaned = redact(text)
    return value if cleaned == text else cleaned


class RedactCredentials(logging.Filter):
    """Logs never hold a credential-bearing URL: the access log, Django's "Not Found: <path>"
    and every other record have their set-password tokens, nudge link tokens and credential
    query parameters (``code``, ``state``, ``token``, ...) redacted before any handler writes
    them. The record keeps its shape (a tuple of arguments stays a tuple, a number a number),
    so formatters that unpack the arguments, as uvicorn's access formatter does, still work."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(arg) for arg in record.args)
        elif isinstance(record.args, dict):  # gunicorn's access log: one mapping of atoms
            record.args = {key: _redact_arg(arg) for key, arg in record.args.items()}
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            message = None  # a malformed record: logging reports it, with nothing formatted
        if message is not None and (cleaned := redact(message)) != message:
            # A credential the arguments alone did not show ("token=%s" and its value, or a
            # URL in the message itself): the record becomes its redacted text.
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            # Formatted here, as a formatter would, so that the traceback's text is redacted
            # too; formatters use exc_text when it is set.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def redact_every_handler() -> None:
    """Put :class:`RedactCredentials` on every handler of every logger that has none yet: the
    ones ``settings.LOGGING`` configures name it themselves, but gunicorn's access and error
    handlers (which uvicorn's loggers share) and Celery's are made by those programs."""
    named = logging.Logger.manager.loggerDict.values()
    loggers = [logging.getLogger(), *(item for item in named if isinstance(item, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactCredentials) for f in handler.filters):
                handler.addFilter(RedactCredentials())


class TerseRefusals(logging.Filter):
    """Django logs a refused request (403) with the PermissionDenied's full traceback. A refusal
    is an answer, not a fault: keep its one line, drop the traceback, so that an attacker
    probing the console cannot fill the logs and a real fault is not buried among them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
