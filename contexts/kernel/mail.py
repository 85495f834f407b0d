"""The e-mail backend of a machine without a mail server (``make run``'s default).

E-mails carry credentials: a new member's set-password link, the login-free answer links of
nudges. Django's console backend printed them whole into the server's output, which is the log.
This one keeps each message whole in its own file under ``EMAIL_FILE_PATH`` (``var/mail/``:
directory 0700, files 0600, readable by the operator's account only) and logs one line naming
the recipients and the file, never the body. Production sends mail over SMTP
(``docs/operations.md``, "E-mail").
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.core import checks
from django.core.mail import EmailMessage
from django.core.mail.backends.base import BaseEmailBackend
from django.utils import timezone

logger = logging.getLogger(__name__)


class FileMailBackend(BaseEmailBackend):
    """Writes each message to ``EMAIL_FILE_PATH/<UTC time>-<random>.eml`` (RFC 5322, what a
    mail client opens), created 0600 and never overwritten."""

    def __init__(self, *args, file_path: str | os.PathLike | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.directory = Path(file_path or settings.EMAIL_FILE_PATH)

    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        if not email_messages:
            return 0
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        sent = 0
        for message in email_messages:
            if not message.recipients():
                continue
            try:
                path = self._write(message)
            except OSError:
                if not self.fail_silently:
                    raise
                logger.exception("could not write an e-mail to %s", self.directory)
                continue
            logger.info("mail to %s (%r) written to %s", ", ".join(message.recipients()),
                        message.subject, path)
            sent += 1
        return sent

    def _write(self, message: EmailMessage) -> Path:
        name = f"{timezone.now():%Y%m%dT%H%M%S}-{secrets.token_hex(4)}.eml"
        path = self.directory / name
        # O_EXCL: a file that appeared under that name (a link planted there) is never written
        # through; the mode applies at creation, so the file is never readable by others.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(message.message().as_bytes(linesep="\n"))
        return path


# Backends that deliver nothing to the person: fine on one machine, a deploy-check warning in
# production (the console one also prints every link into the log).
UNDELIVERED_BACKENDS = frozenset({
    "contexts.kernel.mail.FileMailBackend",
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.filebased.EmailBackend",
    "django.core.mail.backends.locmem.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
})


@checks.register(checks.Tags.security, deploy=True)
def check_mail_is_delivered(app_configs: object = None,
                            **kwargs: object) -> list[checks.CheckMessage]:
    if settings.EMAIL_BACKEND not in UNDELIVERED_BACKENDS:
        return []
    return [checks.Warning(
        f"EMAIL_BACKEND is {settings.EMAIL_BACKEND}, which delivers no mail: set-password and "
        "nudge e-mails never reach people",
        hint="set EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and EMAIL_HOST "
             "(docs/operations.md, 'E-mail')",
        id="contexts.W001")]
