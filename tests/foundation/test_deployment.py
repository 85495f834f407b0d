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
