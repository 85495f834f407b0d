"""Configuration with a schema (issue 39, item 4).

Every environment variable is declared once in ``contexts/config/`` (type, default, a sentence);
``docs/configuration.md`` is exactly ``manage.py settings_reference``; importing the settings
writes no file and sets no environment variable; an invalid value does not break the import but
is listed — every one, naming the variable — by ``manage.py check``, and ``manage.py`` commands
(``runstack``, that is ``make run``), the web application and Celery refuse to start on it.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from contexts import config
from contexts.config import schema

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"
# What the processes below must not inherit from the test process: any declared variable.
DECLARED = {setting.name for area in config.AREAS for setting in area.settings}
# Three mistakes at once; each must be named.
INVALID = {"CONTEXTS_WEB_THREADS": "0", "CONTEXTS_TRUSTED_PROXIES": "10.0.0.0/8, proxy.internal",
           "CONTEXTS_FUSION": "best"}
NAMED = ("CONTEXTS_WEB_THREADS: must be at least 1, not 0",
         "CONTEXTS_TRUSTED_PROXIES: 'proxy.internal' is not an IP address or CIDR network",
         "CONTEXTS_FUSION: must be one of adaptive, convex, rrf, not 'best'")


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in DECLARED and name.removesuffix("_FILE") not in DECLARED
           and not name.startswith(("HF_", "TRANSFORMERS_", "TOKENIZERS_"))}
    return {**env, "DJANGO_SETTINGS_MODULE": "contexts.settings", "PYTHONPATH": str(ROOT),
            "CONTEXTS_VAR_DIR": str(tmp_path / "var"), "CONTEXTS_RUN_SETTINGS": "off", **extra}


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


# --- the reference -------------------------------------------------------------------------------
def test_docs_configuration_md_is_exactly_the_settings_reference():
    out = io.StringIO()
    call_command("settings_reference", stdout=out)
    assert REFERENCE.read_text() == out.getvalue(), (
        "regenerate it: python manage.py settings_reference > docs/configuration.md")


def test_the_reference_has_every_setting_once_with_its_type_default_and_sentence():
    text = REFERENCE.read_text()
    rows = re.findall(r"^\| `([A-Z0-9_]+)`", text, flags=re.MULTILINE)
    assert sorted(rows) == sorted(DECLARED) and len(rows) == len(set(rows)) >= 120
    assert "| `CONTEXTS_WEB_THREADS` | integer, at least 1 | `4` | Requests served" in text


def test_every_declared_variable_is_read_by_the_product():
    """A setting nothing reads any more would stay in the reference; settings.py reads an
    undeclared one only with a KeyError."""
    sources = "".join(path.read_text() for path in (ROOT / "contexts").rglob("*.py")
                      if "config" not in path.parts)
    unread = {name for name in DECLARED if f'"{name}"' not in sources}
    assert unread == set()


def test_the_readme_points_to_the_reference():
    assert "docs/configuration.md" in (ROOT / "README.md").read_text()


# --- reading values ------------------------------------------------------------------------------
def read(environ: dict[str, str], name: str) -> tuple[object, list[str]]:
    env = config.environment(environ)
    return env(name), env.errors


def test_values_are_typed_and_an_invalid_one_keeps_its_default_and_is_recorded(tmp_path):
    assert read({"CONTEXTS_WEB_THREADS": " 8 "}, "CONTEXTS_WEB_THREADS") == (8, [])
    assert read({"CONTEXTS_WEB_THREADS": ""}, "CONTEXTS_WEB_THREADS") == (4, [])
    assert read({"CONTEXTS_WEB_THREADS": "many"}, "CONTEXTS_WEB_THREADS") == (
        4, ["CONTEXTS_WEB_THREADS: not an integer: 'many'"])
    assert read({"DEBUG": "On"}, "DEBUG") == (True, [])
    assert read({"DEBUG": "maybe"}, "DEBUG")[1] == [
        "DEBUG: not a boolean: 'maybe' (1, true, yes, on or 0, false, no, off)"]
    assert read({"CONTEXTS_TRUSTED_PROXIES": "10.0.0.1, ::1"}, "CONTEXTS_TRUSTED_PROXIES") == (
        ["10.0.0.1/32", "::1/128"], [])
    assert read({"CONTEXTS_SECRET_POLICY": " Refuse "}, "CONTEXTS_SECRET_POLICY") == (
        "refuse", [])
    # A text keeps an empty value; a list is empty.
    assert read({"OIDC_SCOPES": ""}, "OIDC_SCOPES") == ("", [])
    assert read({"ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS") == ([], [])


def test_a_file_variant_wins_and_an_unreadable_one_is_named(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    assert read({"SECRET_KEY": "from-the-env", "SECRET_KEY_FILE": str(secret)},
                "SECRET_KEY") == ("from-a-file", [])
    value, errors = read({"SECRET_KEY_FILE": str(tmp_path / "missing")}, "SECRET_KEY")
    assert value == "" and errors == [
        f"SECRET_KEY_FILE: cannot read {tmp_path / 'missing'}: No such file or directory"]


def test_an_undeclared_variable_cannot_be_read():
    with pytest.raises(KeyError):
        config.environment({})("CONTEXTS_NO_SUCH_SETTING")


def test_a_setting_is_described_in_a_sentence():
    with pytest.raises(ValueError, match="a description is a sentence"):
        schema.Setting("X", schema.INT, 1, "no period")


# --- importing the settings ----------------------------------------------------------------------
# The environment around the import of the settings module (Django itself then sets TZ from
# TIME_ZONE when it loads them); the files after Django is set up too.
PROBE = """
import json, os
before = dict(os.environ)
from contexts import settings
after = dict(os.environ)
import django
django.setup()
print(json.dumps({"changed": sorted(k for k in set(before) | set(after)
                                    if before.get(k) != after.get(k)),
                  "errors": list(getattr(settings, "CONFIGURATION_ERRORS", ())),
                  "key": settings.SECRET_KEY}))
"""


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("var_dir_exists", [False, True], ids=["no var dir", "empty var dir"])
def test_importing_the_settings_writes_no_file_and_sets_no_variable(tmp_path, var_dir_exists):
    if var_dir_exists:
        (tmp_path / "var").mkdir()
    before = files_under(tmp_path)
    result = run(["-c", PROBE], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["changed"] == [] and probe["errors"] == []
    assert files_under(tmp_path) == before
    assert probe["key"] == ""  # nothing generated: a start makes it (below)


def test_invalid_values_do_not_break_the_import_and_are_all_recorded(tmp_path):
    result = run(["-c", PROBE], clean_env(tmp_path, **INVALID))
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(result.stdout.strip().splitlines()[-1])["errors"]) == sorted(NAMED)


# --- the start ------------------------------------------------------------------------------------
def test_manage_py_check_lists_every_invalid_value_without_a_traceback(tmp_path):
    result = run(["manage.py", "check"], clean_env(tmp_path, **INVALID))
    assert result.returncode == 1
    assert all(f"(contexts.E001) {message}" in result.stderr for message in NAMED)
    assert "Traceback" not in result.stderr


def test_make_run_refuses_to_start_listing_them(tmp_path):
    result = run(["manage.py", "runstack", "--no-demo"], clean_env(tmp_path, **INVALID))
    assert result.returncode == 1
    assert result.stderr.startswith("manage.py runstack: the configuration has 3 errors:")
    assert all(message in result.stderr for message in NAMED)
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "var" / "pgdata").exists()  # no service was started


def test_the_web_application_refuses_to_start_listing_them(tmp_path):
    result = run(["-c", "import contexts.asgi"], clean_env(tmp_path, **INVALID))
    assert result.returncode == 3  # gunicorn's "worker failed to boot": it stops
    assert "web: the configuration has 3 errors:" in result.stderr
    assert all(message in result.stderr for message in NAMED)
    assert "Traceback" not in result.stderr


def test_celery_refuses_to_start_listing_them(tmp_path):
    result = run(["-c", "from contexts.celery import app; app.conf.broker_url"],
                 clean_env(tmp_path, **INVALID))
    assert result.returncode == 1
    assert result.stderr.startswith("celery: the configuration has 3 errors:")
    assert all(message in result.stderr for message in NAMED)


def test_a_start_generates_the_secret_key_once_and_keeps_it_private(tmp_path):
    show = ["manage.py", "shell", "-c", "from django.conf import settings; "
            "print(settings.SECRET_KEY)"]
    first = run(show, clean_env(tmp_path))
    assert first.returncode == 0, first.stderr
    key = first.stdout.strip().splitlines()[-1]
    assert len(key) >= 50 and key == (tmp_path / "var" / "secret_key").read_text().strip()
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0
    assert run(show, clean_env(tmp_path)).stdout.strip().splitlines()[-1] == key
    assert sorted(p.name for p in (tmp_path / "var" / "secrets").iterdir()) == [
        "postgres_app.password", "postgres_owner.password", "redis.password"]
