from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "contexts"
    verbose_name = "Contexts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.tokens import token_changed
        from contexts import signals  # noqa: F401 - connects receivers
        from contexts.ids import register_converters
        from contexts.services.token_audit import record_token_change

        register_converters()  # <pid:…> and friends, before any URLconf is imported
        # Token changes go to the audit trail, which accounts (below contexts) cannot import.
        token_changed.connect(record_token_change, dispatch_uid="contexts.audit.tokens")
