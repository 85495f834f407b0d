from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "contexts"
    verbose_name = "Contexts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from contexts import signals  # noqa: F401 - connects receivers
        from contexts.ids import register_converters

        register_converters()  # <pid:…> and friends, before any URLconf is imported
