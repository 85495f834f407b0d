"""Logging filters named in ``settings.LOGGING``."""

from __future__ import annotations

import logging


class TerseRefusals(logging.Filter):
    """Django logs a refused request (403) with the PermissionDenied's full traceback. A refusal
    is an answer, not a fault: keep its one line, drop the traceback, so that an attacker
    probing the console cannot fill the logs and a real fault is not buried among them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
