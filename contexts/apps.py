from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "contexts"
    verbose_name = "Contexts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from contexts import signals  # noqa: F401 - connects receivers
