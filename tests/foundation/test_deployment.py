"""Production configuration: `check --deploy` and the compose file."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "DEBUG": "false",
    "SECRET_KEY": "x" * 20 + "-production-like-secret-key-with-enough-entropy-123456",
    "ALLOWED_HOSTS": "contexts.example.com",
    "DATABASE_URL": "postgres://contexts:pw@db:5432/contexts",
    "REDIS_URL": "redis://redis:6379/0",
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
    "EMAIL_HOST": "smtp.example.com",
}


def test_check_deploy_is_clean_with_production_values():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**{k: v for k, v in os.environ.items()
                          if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},  # set by the browser tests
                       **PRODUCTION_ENV},
        capture_output=True, text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_the_compose_file_is_valid():
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed (.ci/run installs it: "
                    "apt-get install docker-compose)")
    result = subprocess.run(
        ["docker-compose", "-f", str(ROOT / "docker" / "compose.yaml"), "config", "-q"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr


def _compose() -> dict:
    import yaml  # PyYAML resolves the file's anchors and merge keys as Compose does

    return yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())


def _option(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def test_the_compose_file_is_well_formed_yaml_whose_references_resolve():
    """What `docker-compose config` would refuse, checked without it: every service runs an
    image with a command or the image's own, every dependency is a service, every named volume
    is declared."""
    compose = _compose()
    services, volumes = compose["services"], compose["volumes"]
    for name, service in services.items():
        assert service.get("image"), name
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown service {dependency}"
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            assert source.startswith(("/", ".")) or source in volumes, (name, source)


def test_compose_runs_one_worker_per_lane_on_the_queues_runstack_uses():
    """`make run` starts a worker per lane (contexts/ingestion/lanes.py's WORKER_QUEUES); the
    Compose stack runs the same ones, so "Sync now" never waits behind a bulk ingest there
    either, and each worker's healthcheck pings the name it runs under."""
    from contexts.ingestion import lanes

    workers = {}
    for name, service in _compose()["services"].items():
        command = service.get("command") or []
        if command[:4] != ["celery", "-A", "contexts", "worker"]:
            continue
        queues = _option(command, "--queues")
        assert queues, f"{name} consumes Celery's default queue, not a lane"
        hostname = _option(command, "--hostname")
        assert hostname and hostname.endswith("@%h"), name
        node = hostname.removesuffix("@%h")
        # "$$" is Compose's escape for a "$" the container's shell expands.
        assert f"-d {node}@$$HOSTNAME" in " ".join(service["healthcheck"]["test"]), name
        assert service["environment"]["CONTEXTS_INDEX_FOLLOWER"] == "off", name
        workers[node] = tuple(queues.split(","))
    assert workers == lanes.WORKER_QUEUES
