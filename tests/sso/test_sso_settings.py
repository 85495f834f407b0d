"""Single sign-on is configured entirely from the environment (a fresh process reads it, started
as ``manage.py`` starts one): the secret and the mapping may come from files, and a
configuration that cannot work stops the start with a message naming the variable."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT = ("import json; from django.conf import settings as s; "
         "print(json.dumps([s.OIDC_ENABLED, s.OIDC_DISCOVERY_URL, s.OIDC_CLIENT_SECRET, "
         "s.OIDC_GROUP_MAPPING, s.OIDC_ALLOWED_DOMAINS, s.LOCAL_LOGIN_ENABLED, "
         "s.CELERY_BEAT_SCHEDULE['sso-recheck']]))")


def _settings(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OIDC_")
            and k != "CONTEXTS_LOCAL_LOGIN"}
    return subprocess.run([sys.executable, "manage.py", "shell", "-c", PRINT], cwd=ROOT,
                          text=True, capture_output=True, timeout=120,
                          env={**base, "DJANGO_SETTINGS_MODULE": "contexts.settings", **env})


def test_the_client_secret_and_the_mapping_may_come_from_files(tmp_path):
    secret = tmp_path / "secret"
    value = secrets.token_urlsafe(16)  # made at run time: no credential-shaped literal
    secret.write_text(value + "\n")
    mapping = tmp_path / "mapping.json"
    mapping.write_text('{"leads": [{"org": "acme", "role": "tech_lead"}]}')
    result = _settings({"OIDC_ISSUER": "https://id.example.com/realms/acme/",
                        "OIDC_CLIENT_ID": "contexts", "OIDC_CLIENT_SECRET_FILE": str(secret),
                        "OIDC_GROUP_MAPPING_FILE": str(mapping),
                        "OIDC_ALLOWED_DOMAINS": "Example.com, @acme.test",
                        "CONTEXTS_LOCAL_LOGIN": "0", "OIDC_RECHECK_SECONDS": "600"})
    assert result.returncode == 0, result.stderr
    enabled, discovery, client_secret, group_mapping, domains, local, beat = json.loads(
        result.stdout.strip().splitlines()[-1])
    assert enabled and not local
    assert discovery == "https://id.example.com/realms/acme/.well-known/openid-configuration"
    assert client_secret == value
    assert '"tech_lead"' in group_mapping
    assert domains == ["example.com", "acme.test"]
    # Beat looks for people due four times an interval (each is asked within it).
    assert beat == {"task": "contexts.governance.tasks.recheck_identities", "schedule": 150.0}


def test_sso_is_off_without_a_provider():
    result = _settings({})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("[false")


def test_switching_passwords_off_needs_a_provider():
    result = _settings({"CONTEXTS_LOCAL_LOGIN": "0"})
    assert result.returncode != 0
    assert "CONTEXTS_LOCAL_LOGIN: off (0) needs single sign-on" in result.stderr


def test_a_recheck_interval_below_a_minute_is_refused():
    result = _settings({"OIDC_ISSUER": "https://id.example.com", "OIDC_CLIENT_ID": "c",
                        "OIDC_RECHECK_SECONDS": "5"})
    assert result.returncode != 0
    assert "OIDC_RECHECK_SECONDS: must be at least 60, not 5" in result.stderr


def test_a_mistake_in_the_group_mapping_stops_the_start():
    result = _settings({"OIDC_ISSUER": "https://id.example.com", "OIDC_CLIENT_ID": "c",
                        "OIDC_GROUP_MAPPING": '{"leads": [{"org": "acme", "role": "boss"}]}'})
    assert result.returncode != 0
    assert "OIDC_GROUP_MAPPING['leads'][0]" in result.stderr and "boss" in result.stderr
