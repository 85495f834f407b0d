"""E-mail: where set-password and nudge e-mails go."""

from contexts.config.schema import BOOL, INT, PATH, TEXT, Area, Setting

AREA = Area("E-mail", "Without a mail server (`make run`) each message is kept whole in a file "
            "(0600) and the log says only where; production sets SMTP (`docs/operations.md`, "
            "*E-mail*).", (
    Setting("EMAIL_BACKEND", TEXT, "contexts.kernel.mail.FileMailBackend",
            "Django's e-mail backend, e.g. `django.core.mail.backends.smtp.EmailBackend`."),
    Setting("EMAIL_FILE_PATH", PATH, None, "Directory of the file backend's messages.",
            shown_default="`$CONTEXTS_VAR_DIR/mail`"),
    Setting("EMAIL_HOST", TEXT, "localhost", "The SMTP server."),
    Setting("EMAIL_PORT", INT, 25, "The SMTP server's port.", minimum=1),
    Setting("EMAIL_HOST_USER", TEXT, "", "The SMTP user."),
    Setting("EMAIL_HOST_PASSWORD", TEXT, "", "The SMTP password.", secret=True),
    Setting("EMAIL_USE_TLS", BOOL, False, "STARTTLS to the SMTP server."),
    Setting("DEFAULT_FROM_EMAIL", TEXT, "contexts@localhost", "The sender of every e-mail."),
))
