"""Secret scanning: finding secrets in text, in-process, with detect-secrets and this project's
own detectors (:mod:`contexts.secret_scan.scanner`, ADR 0016). It only finds and redacts;
what a finding becomes — redact or refuse, the finding's row, the owner's nudge — is the write
path's rule (``contexts.services.secrets``)."""

from contexts.secret_scan.scanner import (
    PLACEHOLDER_MARK,
    Finding,
    describe,
    normalised,
    placeholder,
    redact,
    scan,
)

__all__ = ["PLACEHOLDER_MARK", "Finding", "describe", "normalised", "placeholder", "redact",
           "scan"]
