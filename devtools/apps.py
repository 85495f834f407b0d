from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """Registers the lab's management commands (bench_*, loadtest, simulate_nodes, ...)."""

    name = "devtools"
    verbose_name = "Contexts lab"
