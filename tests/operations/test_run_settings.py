"""Issue 22, small things: e-mail links from one base URL, the settings `make run` records for
`manage.py`, and a one-line answer from a command that cannot reach its database.

Real processes throughout: `manage.py` runs as a subprocess against the session's PostgreSQL
(or a port nothing listens on); nothing about the database is mocked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contexts.governance import nudges
from contexts.management.commands.runstack import Command as RunStack
from contexts.models import Nudge
from contexts.stack import runsettings
from contexts.stack.servers import free_port
from tests.domain.conftest import cast  # noqa: F401 - re-exported fixture
from tests.governance.conftest import hot

ROOT = Path(__file__).resolve().parents[2]
# A made-up password, kept out of URL literals so the repository scan finds none.
PASSWORD = "secret-pw"
# What a developer's shell may hold that would decide the outcome instead of the test.
OWN = ("DATABASE_URL", "DATABASE_OWNER_URL", "REDIS_URL", "HOST", "PORT", "SECRET_KEY",
       "DJANGO_SETTINGS_MODULE", *runsettings.RECORDED, "CONTEXTS_RUN_SETTINGS")


def manage(args: list[str], env: dict[str, str],
           timeout: float = 120) -> subprocess.CompletedProcess:
    clean = {key: value for key, value in os.environ.items()
             if key not in OWN and not key.endswith("_FILE")}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, env={**clean, **env})


def last_line(result: subprocess.CompletedProcess) -> str:
    return result.stdout.strip().splitlines()[-1]


# --- 1. links in e-mails ---------------------------------------------------------------------

def test_the_base_url_defaults_to_the_address_make_run_serves():
    assert runsettings.served_url() == "http://127.0.0.1:8000"
    assert runsettings.served_url("127.0.0.1", 8123) == "http://127.0.0.1:8123"
    assert runsettings.served_url("0.0.0.0", "9000") == "http://127.0.0.1:9000"  # a visitable one
    assert runsettings.served_url("::1", 8000) == "http://[::1]:8000"


def test_settings_take_the_base_url_from_port_or_contexts_base_url(tmp_path):
    show = ["shell", "-c", "from django.conf import settings; print(settings.BASE_URL)"]
    common = {"CONTEXTS_RUN_SETTINGS": "off", "CONTEXTS_VAR_DIR": str(tmp_path / "var")}
    derived = manage(show, {**common, "PORT": "8123"})
    assert derived.returncode == 0, derived.stderr
    assert last_line(derived) == "http://127.0.0.1:8123"
    explicit = manage(show, {**common, "PORT": "8123",
                             "CONTEXTS_BASE_URL": "https://contexts.example.com/"})
    assert last_line(explicit) == "https://contexts.example.com"


@pytest.mark.django_db
def test_nudge_links_start_with_the_configured_base_url(cast, settings, mailoutbox):  # noqa: F811
    settings.BASE_URL = "https://contexts.example.com:8443"
    fragment = hot(cast.repo.scope, "Rate limiter", "The bucket refills once per second.",
                   owner=cast.teammate)
    nudge = Nudge.objects.create(fragment=fragment, owner=cast.teammate)
    assert nudges.send_nudge_email([nudge], cast.teammate)
    links = re.findall(r"https?://\S+", mailoutbox[0].body)
    assert len(links) >= 4
    assert all(link.startswith("https://contexts.example.com:8443/") for link in links), links


# --- 2. the settings make run records ----------------------------------------------------------

def test_the_environment_wins_over_the_recorded_settings(tmp_path):
    file = tmp_path / "run-settings.json"
    environ = {"CONTEXTS_RUN_SETTINGS": str(file)}
    runsettings.record({"CONTEXTS_PG_PORT": "55001", "CONTEXTS_REDIS_PORT": "55002",
                        "CONTEXTS_VAR_DIR": "/srv/var", "DATABASE_URL": "postgres://x:pw@h/db"},
                       address="http://127.0.0.1:8001", environ=environ)
    assert "DATABASE_URL" not in file.read_text()  # never a URL or a password
    environ.update({"CONTEXTS_PG_PORT": "6000", "CONTEXTS_REDIS_PORT": ""})
    filled = runsettings.apply_defaults(environ)
    assert filled == {"CONTEXTS_REDIS_PORT": "55002", "CONTEXTS_VAR_DIR": "/srv/var"}
    assert environ["CONTEXTS_PG_PORT"] == "6000"  # explicit: kept
    file.write_text("{half a file")
    assert runsettings.apply_defaults({"CONTEXTS_RUN_SETTINGS": str(file)}) == {}
    assert runsettings.path({"CONTEXTS_RUN_SETTINGS": "off"}) is None
    assert runsettings.path({}) == ROOT / "var" / "run-settings.json"


def test_runstack_records_its_settings_and_hands_the_base_url_on(tmp_path, settings,
                                                                 monkeypatch):
    file = tmp_path / "run-settings.json"
    monkeypatch.setenv("CONTEXTS_RUN_SETTINGS", str(file))
    # Set, then removed: monkeypatch then undoes what runstack writes into the environment.
    monkeypatch.setenv("CONTEXTS_BASE_URL", "")
    monkeypatch.delenv("CONTEXTS_BASE_URL")
    monkeypatch.delenv("CONTEXTS_INDEX_DIR", raising=False)
    settings.EMBEDDED_PG_PORT, settings.EMBEDDED_REDIS_PORT = 55101, 55102
    command = RunStack()
    assert command._record_settings("127.0.0.1", 8001) == "http://127.0.0.1:8001"
    # Its children (web, worker, beat) and its own bootstrap link to what is served.
    assert os.environ["CONTEXTS_BASE_URL"] == settings.BASE_URL == "http://127.0.0.1:8001"
    data = json.loads(file.read_text())
    assert data["address"] == "http://127.0.0.1:8001"
    assert data["environment"] == {"CONTEXTS_VAR_DIR": str(settings.VAR_DIR),
                                   "CONTEXTS_PG_PORT": "55101", "CONTEXTS_REDIS_PORT": "55102",
                                   "CONTEXTS_BASE_URL": "http://127.0.0.1:8001"}


def test_manage_py_finds_the_services_make_run_recorded(services, tmp_path):
    """As after `make run PORT=8001` with the ports exported in that shell only: another
    shell's `manage.py` reaches the same PostgreSQL with nothing exported."""
    file = tmp_path / "run-settings.json"
    recorded = {"CONTEXTS_VAR_DIR": str(services.root), "CONTEXTS_BASE_URL": "http://127.0.0.1:8001",
                "CONTEXTS_PG_PORT": str(services.postgres.port),
                "CONTEXTS_REDIS_PORT": str(services.redis.port)}
    runsettings.record(recorded, address="http://127.0.0.1:8001",
                       environ={"CONTEXTS_RUN_SETTINGS": str(file)})
    probe = ("from django.conf import settings; from django.db import connection; "
             "connection.ensure_connection(); "
             "print(settings.EMBEDDED_PG_PORT, settings.EMBEDDED_REDIS_PORT, settings.VAR_DIR, "
             "settings.BASE_URL)")
    result = manage(["shell", "-c", probe], {"CONTEXTS_RUN_SETTINGS": str(file)})
    assert result.returncode == 0, result.stderr
    assert last_line(result).split() == [str(services.postgres.port), str(services.redis.port),
                                         str(services.root), "http://127.0.0.1:8001"]
    # An explicitly set variable wins over the file.
    result = manage(["shell", "-c", probe], {"CONTEXTS_RUN_SETTINGS": str(file),
                                             "CONTEXTS_BASE_URL": "https://elsewhere.example"})
    assert result.returncode == 0, result.stderr
    assert last_line(result).split()[-1] == "https://elsewhere.example"


# --- 3. a command that cannot reach its database ----------------------------------------------

def assert_one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_closed_port_is_one_line_naming_the_settings_to_check(tmp_path):
    port = free_port()  # nothing listens there
    result = manage(["create_token", "--name", "agent", "--scope", "org:demo"],
                    {"CONTEXTS_RUN_SETTINGS": "off", "CONTEXTS_PG_PORT": str(port),
                     "CONTEXTS_VAR_DIR": str(tmp_path / "var")})
    line = assert_one_line(result)
    assert line.startswith(f"manage.py create_token: cannot reach the database at "
                           f"127.0.0.1:{port}/contexts (Connection refused)"), line
    for hint in (f"CONTEXTS_PG_PORT ({port})", f"CONTEXTS_VAR_DIR ({tmp_path / 'var'})",
                 "DATABASE_URL", "manage.py services status"):
        assert hint in line, line


def test_the_message_says_which_values_came_from_the_recorded_file(tmp_path):
    file = tmp_path / "run-settings.json"
    port = free_port()
    runsettings.record({"CONTEXTS_PG_PORT": str(port), "CONTEXTS_VAR_DIR": str(tmp_path / "v")},
                       address="http://127.0.0.1:8001",
                       environ={"CONTEXTS_RUN_SETTINGS": str(file)})
    line = assert_one_line(manage(["create_token", "--name", "agent", "--scope", "org:demo"],
                                  {"CONTEXTS_RUN_SETTINGS": str(file)}))
    assert f"CONTEXTS_PG_PORT ({port})" in line
    assert f"CONTEXTS_PG_PORT, CONTEXTS_VAR_DIR from {file}" in line, line


def test_an_external_database_names_database_url(tmp_path):
    port = free_port()
    result = manage(["create_token", "--name", "agent", "--scope", "org:demo"],
                    {"CONTEXTS_RUN_SETTINGS": "off", "CONTEXTS_VAR_DIR": str(tmp_path / "var"),
                     "DATABASE_URL": f"postgres://contexts_app:{PASSWORD}@127.0.0.1:{port}/ctx"})
    line = assert_one_line(result)
    assert "check DATABASE_URL" in line and f"127.0.0.1:{port}/ctx" in line, line
    assert "secret-pw" not in result.stderr


def test_a_rejected_password_is_one_line_too(services, tmp_path):
    """The real server answers: a var dir whose passwords are not the cluster's."""
    result = manage(["create_token", "--name", "agent", "--scope", "org:demo"],
                    {"CONTEXTS_RUN_SETTINGS": "off", "CONTEXTS_VAR_DIR": str(tmp_path / "var"),
                     "CONTEXTS_PG_PORT": str(services.postgres.port)})
    line = assert_one_line(result)
    assert 'password authentication failed for user "contexts_app"' in line, line
    assert str(tmp_path / "var") in line


def test_other_database_errors_keep_their_traceback(services):
    """Only a failure to connect is shortened: a failing statement is a bug to read."""
    env = {**services.env(), "CONTEXTS_RUN_SETTINGS": "off"}
    failing = ("from django.db import connection; cursor = connection.cursor(); "
               "cursor.execute('SET statement_timeout = 1'); cursor.execute('SELECT pg_sleep(1)')")
    result = manage(["shell", "-c", failing], env)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "canceling statement" in result.stderr
    assert "cannot reach the database" not in result.stderr


def test_traceback_flag_keeps_the_traceback(tmp_path):
    result = manage(["create_token", "--name", "agent", "--scope", "org:demo", "--traceback"],
                    {"CONTEXTS_RUN_SETTINGS": "off", "CONTEXTS_PG_PORT": str(free_port()),
                     "CONTEXTS_VAR_DIR": str(tmp_path / "var")})
    assert result.returncode != 0 and "Traceback" in result.stderr
