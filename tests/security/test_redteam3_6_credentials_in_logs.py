"""Red-team 3, finding 6 (low): set-password links and the login-free links of nudge e-mails were
written to the server's log — whole, in e-mails printed by the console e-mail backend, and as
request paths in the web server's access log (and Django's "Not Found: <path>" lines).

After: logs never hold a credential-bearing URL. Every handler — ``settings.LOGGING``'s, the
web server's access log, Celery's — redacts the token of a set-password path, the token of a
nudge link, credential query parameters (``code``, ``state``, ``token``, ...) and anything
shaped like a signed value or reset token (``contexts.kernel.logfilters.RedactCredentials``).
Without a mail server the default e-mail backend keeps each message whole in a 0600 file under
``var/mail/`` and logs only where (``contexts.kernel.mail.FileMailBackend``); production uses SMTP,
and ``check --deploy`` warns while it does not.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import logging
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.core.mail import send_mail
from django.test import Client

from accounts.permissions import SYSTEM
from contexts.governance import nudges
from contexts.kernel.logfilters import REDACTED, RedactCredentials, redact, redact_every_handler
from contexts.models import Nudge
from contexts.services.fragments import create_fragment
from devtools.loadtest import gunicorn
from tests.console.conftest import client_for
from tests.domain.conftest import cast  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
SET_PASSWORD = re.compile(r"/account/set-password/([\w-]+)/([\w-]+)/")
NUDGE_LINK = re.compile(r"/governance/nudges/([\w.:-]+)/([\w-]+)")


# --- the filter's rules -----------------------------------------------------------------------

@pytest.mark.parametrize(("line", "secret", "kept"), [
    ('127.0.0.1:5000 - "GET /account/set-password/MTI/cm4k2x-0123456789abcdef0123456789abcdef/'
     ' HTTP/1.1" 302', "cm4k2x-0123456789abcdef0123456789abcdef", "/account/set-password/MTI/"),
    ("Not Found: /governance/nudges/eyJuIjoxLCJ1IjoyfQ:1vAbCd:" + "s" * 43 + "/bogus",
     "eyJuIjoxLCJ1IjoyfQ", "/governance/nudges/[redacted]/bogus"),
    ("GET /login/sso/callback/?code=the-code-123&state=the-state-456 HTTP/1.1", "the-code-123",
     "/login/sso/callback/?code=[redacted]&state=[redacted]"),
    ("GET /login/sso/callback/?code=the-code-123&state=the-state-456 HTTP/1.1", "the-state-456",
     "HTTP/1.1"),
    ("GET /login/?next=%2Fgovernance%2Fnudges%2Fopaque-token%2Fedit", "opaque-token",
     "/login/?next=%2Fgovernance%2Fnudges%2F[redacted]%2Fedit"),
    ("GET /x?Access_Token=abc.def&refresh_token=ghi&id_token=jkl&page=2", "abc.def", "page=2"),
    ("GET /x?Access_Token=abc.def&refresh_token=ghi&id_token=jkl&page=2", "ghi", "page=2"),
    ("a link in a message: https://h/any/where/.eJyrVkrOz8lJTVGyUkrOz0tOLUktUaoFAF:1vAbCd:"
     + "t" * 43, "eJyrVkrOz8lJTVGyUkrOz0tOLUktUaoFAF", "https://h/any/where/"),
    ("GET /account/set-password/MTI/weird/?proof=.eJzz:1vAbCd:" + "u" * 43, "weird", "MTI"),
])
def test_credentials_are_redacted_and_the_rest_is_kept(line, secret, kept):
    cleaned = redact(line)
    assert secret not in cleaned and REDACTED in cleaned and kept in cleaned, cleaned


@pytest.mark.parametrize("line", [
    '127.0.0.1:5000 - "GET /account/set-password/MTI/set-password/ HTTP/1.1" 200',
    '127.0.0.1:5000 - "GET /o/acme/members/?page=2 HTTP/1.1" 200',
    "fragment frag_0123456789abcdef0123 at sha 0123456789abcdef0123456789abcdef01234567 12:30:45",
    "ingested 3 files in 1.5 s (ratio:0.72)",
])
def test_ordinary_lines_are_left_alone(line):
    assert redact(line) == line


def test_records_keep_their_shape_for_formatters_that_unpack_them():
    """uvicorn's access formatter unpacks the five arguments and formats a number with %d."""
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                               '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:1", "GET", "/login/sso/callback/?code=c0de", "1.1",
                                404), None)
    RedactCredentials().filter(record)
    assert isinstance(record.args, tuple) and len(record.args) == 5 and record.args[4] == 404
    assert record.getMessage() == ('127.0.0.1:1 - "GET /login/sso/callback/?code=[redacted] '
                                   'HTTP/1.1" 404')
    # A credential split between the format and its argument is caught in the formatted text.
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "opening /x?token=%s", ("t0k",),
                               None)
    RedactCredentials().filter(record)
    assert record.getMessage() == "opening /x?token=[redacted]"


def test_tracebacks_are_redacted_too():
    try:
        raise ValueError("could not open /governance/nudges/s3cr3t-token/edit")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    RedactCredentials().filter(record)
    assert "s3cr3t-token" not in logging.Formatter().format(record)


def test_every_configured_handler_redacts():
    """settings.LOGGING's handlers name the filter; handlers made by others (gunicorn's, which
    uvicorn's loggers share) get it from redact_every_handler (the web worker calls it)."""
    root_handlers = logging.getLogger().handlers
    configured = [h for h in root_handlers if h.get_name() == "console"]
    assert configured and all(any(isinstance(f, RedactCredentials) for f in h.filters)
                              for h in configured)
    access = logging.getLogger("uvicorn.access")
    foreign = logging.StreamHandler(io.StringIO())
    access.addHandler(foreign)
    try:
        redact_every_handler()
        assert any(isinstance(f, RedactCredentials) for f in foreign.filters)
    finally:
        access.removeHandler(foreign)


# --- the e-mails and the log of this process ------------------------------------------------

class ServerLog:
    """The process's log: what the handlers settings.LOGGING configured write, and its
    standard output (where Django's console e-mail backend printed every message)."""

    def __init__(self, buffer: io.StringIO, capsys: pytest.CaptureFixture) -> None:
        self.buffer, self.capsys, self.printed = buffer, capsys, ""

    def getvalue(self) -> str:
        captured = self.capsys.readouterr()
        self.printed += captured.out + captured.err
        return self.buffer.getvalue() + self.printed


@pytest.fixture
def server_log(capsys) -> Iterator[ServerLog]:
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    try:
        yield ServerLog(buffer, capsys)
    finally:
        handler.setStream(previous)
        logging.getLogger().setLevel(level)


@functools.cache
def default_mail_settings() -> tuple[str, bool]:
    """The product's default EMAIL_BACKEND, and whether EMAIL_FILE_PATH is var/mail/ — read in
    a fresh process: the test session replaces the backend with locmem."""
    env = {k: v for k, v in os.environ.items() if k not in ("EMAIL_BACKEND", "EMAIL_FILE_PATH")}
    shown = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         "from django.conf import settings; print(settings.EMAIL_BACKEND); "
         "print(getattr(settings, 'EMAIL_FILE_PATH', None) == settings.VAR_DIR / 'mail')"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    backend, in_var = shown.stdout.split()[-2:]
    return backend, in_var == "True"


@pytest.fixture
def mail_dir(settings, tmp_path) -> Path:
    """The default e-mail backend, as `make run` has it (its var/ here under tmp_path)."""
    settings.EMAIL_BACKEND = default_mail_settings()[0]
    settings.EMAIL_FILE_PATH = tmp_path / "var" / "mail"
    return settings.EMAIL_FILE_PATH


def _mails(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.eml"))


def _credentials(text: str) -> set[str]:
    """The credential parts of the links in ``text``: set-password tokens (and any signed query
    value), nudge link tokens."""
    found = {m.group(2) for m in SET_PASSWORD.finditer(text)}
    found |= {m.group(1) for m in NUDGE_LINK.finditer(text)}
    found |= set(re.findall(r"[?&](?:proof|token)=([^&\s]+)", text))
    return found


@pytest.mark.django_db
def test_a_new_members_set_password_mail_is_kept_from_the_log(cast, mail_dir,  # noqa: F811
                                                              server_log):
    response = client_for(cast.owner).post(
        f"/o/{cast.org.slug}/members/create",
        {"username": "newbie", "email": "newbie@example.com", "role": "viewer"})
    assert response.status_code == 201, response.content.decode()[:500]
    log = server_log.getvalue()
    assert not _credentials(log), log  # no link of the mail made it into the log
    [mail] = _mails(mail_dir)
    body = mail.read_text()
    tokens = _credentials(body)
    assert tokens and "newbie@example.com" in body
    # The file is the operator's alone.
    assert stat.S_IMODE(mail.stat().st_mode) == 0o600
    assert stat.S_IMODE(mail_dir.stat().st_mode) == 0o700
    assert f"mail to newbie@example.com ('[Contexts] You were added to {cast.org.name}') " \
           f"written to {mail}" in log
    assert not [t for t in tokens if t in log], log


@pytest.mark.django_db
def test_a_nudge_mail_and_its_links_are_kept_from_the_log(cast, mail_dir,  # noqa: F811
                                                          server_log):
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Rate limiter",
                               body="The bucket refills once per second.", owner=cast.teammate)
    nudge = Nudge.objects.create(fragment=fragment, owner=cast.teammate)
    assert nudges.send_nudge_email([nudge], cast.teammate)
    assert not _credentials(server_log.getvalue()), server_log.getvalue()
    [mail] = _mails(mail_dir)
    links = [urlsplit(url).path for url in re.findall(r"https?://\S+", mail.read_text())
             if "/governance/nudges/" in url]
    tokens = _credentials("\n".join(links))
    assert len(links) == 4 and len(tokens) == 1
    # Requests of those links that Django logs (anything answered 4xx/5xx: "Not Found: <path>").
    for path in (links[0].rsplit("/", 1)[0] + "/no-such-answer",
                 links[0].replace("/governance/", "/governance//")):
        assert Client().get(path).status_code == 404
    log = server_log.getvalue()
    assert "Not Found: /governance/nudges/[redacted]/no-such-answer" in log
    assert "written to" in log
    assert not [t for t in tokens if t in log], log


def test_the_deploy_check_warns_while_no_mail_is_delivered(tmp_path):
    env = {**os.environ, "CONTEXTS_VAR_DIR": str(tmp_path / "var")}
    env.pop("EMAIL_BACKEND", None)
    undelivered = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--tag", "security"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert "contexts.W001" in undelivered.stdout + undelivered.stderr
    smtp = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--tag", "security"],
        cwd=ROOT, env={**env, "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend"},
        capture_output=True, text=True, timeout=120)
    assert "contexts.W001" not in smtp.stdout + smtp.stderr


def test_the_default_backend_keeps_mail_in_var():
    assert default_mail_settings() == ("contexts.kernel.mail.FileMailBackend", True)


def test_a_mail_file_is_never_written_through_a_planted_name(mail_dir, monkeypatch):
    """O_EXCL: the backend refuses a name that already exists instead of following it."""
    mail_dir.mkdir(parents=True)
    planted = mail_dir / "planted.eml"
    planted.write_text("")
    monkeypatch.setattr("contexts.kernel.mail.secrets.token_hex", lambda n: "same")
    monkeypatch.setattr("contexts.kernel.mail.timezone.now", lambda: dt.datetime(2026, 1, 1))
    (mail_dir / "20260101T000000-same.eml").symlink_to(planted)
    with pytest.raises(FileExistsError):
        send_mail("s", "b", "from@example.com", ["to@example.com"])
    assert planted.read_text() == ""


# --- the web server's access log ------------------------------------------------------------

@pytest.fixture(scope="module")
def static_root(services, tmp_path_factory) -> Path:
    """Pages are rendered with the collected (manifest) statics, as runstack does."""
    root = tmp_path_factory.mktemp("static")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
                   cwd=ROOT, env={**services.env(), "STATIC_ROOT": str(root)}, check=True,
                   timeout=300)
    return root


def _get(base_url: str, path: str) -> int:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(base_url).port, timeout=60)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the server reads what the test committed
def test_the_access_log_of_a_real_server_holds_no_link_token(cast, services,  # noqa: F811
                                                             static_root, tmp_path):
    from contexts.usecases.members import set_password_path

    newbie = type(cast.owner).objects.create_user("newbie", "newbie@example.com")
    set_password = set_password_path(newbie)
    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Rate limiter",
                               body="The bucket refills once per second.", owner=cast.teammate)
    nudge = Nudge.objects.create(fragment=fragment, owner=cast.teammate)
    nudge_link = urlsplit(nudges.answer_links(nudge, cast.teammate)["still-accurate"]).path
    callback = "/login/sso/callback/?code=the-provider-code&state=the-browser-state"
    tokens = (_credentials(set_password) | _credentials(nudge_link)
              | {"the-provider-code", "the-browser-state"})
    assert len(tokens) == 4

    access_log = tmp_path / "access.log"
    env = {**services.env(), "STATIC_ROOT": str(static_root), "CONTEXTS_QUERY_ENCODER": "thread",
           "SECRET_KEY": django_settings.SECRET_KEY}  # the links' signatures must hold there
    with gunicorn(1, asgi=True, env=env,
                  extra_args=["--access-logfile", str(access_log)]) as base_url:
        statuses = {path: _get(base_url, path) for path in (set_password, nudge_link, callback)}
    assert statuses[set_password] == 302  # the token went into the session: a working link
    assert statuses[nudge_link] == 200  # the one-click page: the link worked
    log = access_log.read_text()
    assert "GET /account/set-password/" in log and "GET /governance/nudges/[redacted]/" in log
    assert "GET /login/sso/callback/?code=[redacted]&state=[redacted]" in log
    assert not [t for t in tokens if t in log], log
