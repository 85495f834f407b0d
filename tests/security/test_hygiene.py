"""Security hygiene, each point checked against the running code.

Covered elsewhere, not repeated here:

* ``check --deploy`` is clean with production values: tests/foundation/test_deployment.py.
* The API's per-token rate limit (atomic, per principal): tests/api/test_throttling.py.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import string
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.models import ApiToken
from accounts.permissions import SYSTEM
from accounts.tokens import create_token, hash_token_secret
from contexts.console.views.login import LoginFailureThrottle
from contexts.governance import dedup_review, nudges
from contexts.kernel import availability
from contexts.models import (
    AuditEvent,
    Context,
    DedupCandidate,
    Fragment,
    FragmentVersion,
    Nudge,
    SourceDocument,
    SourcePointer,
)
from contexts.models.fragments import fragment_public_id
from contexts.models.governance import NudgeKind
from contexts.services import fragments as fragment_services
from contexts.services import pins as pin_services
from contexts.usecases import curation, source_conflicts
from tests.domain.conftest import cast  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "templates"

pytestmark = pytest.mark.django_db


# --- API tokens are stored hashed -----------------------------------------------------------------
def test_no_table_holds_a_raw_token_or_its_secret(cast, client):  # noqa: F811
    token, raw = create_token(cast.org, "scanner", [cast.org.scope], created_by=cast.owner)
    secret = ApiToken.split(raw)[1]
    # Use it once, so whatever a request writes (last_used_at, audit, traces) is written too.
    assert client.get("/api/whoami", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    token.refresh_from_db()
    assert token.secret_hash == hash_token_secret(secret) != secret

    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = [name for (name,) in cursor.fetchall()]
        holding = []
        for table in tables:
            cursor.execute(f'SELECT count(*) FROM "{table}" AS row WHERE row::text LIKE %s',
                           [f"%{secret}%"])
            if cursor.fetchone()[0]:
                holding.append(table)
    assert "accounts_apitoken" in tables and len(tables) > 20  # the scan really covered them
    assert holding == []


# --- CSRF -----------------------------------------------------------------------------------------
def _routes(resolver: URLResolver, prefix: str = "") -> list[tuple[str, URLPattern]]:
    found = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            found += _routes(entry, prefix + str(entry.pattern))
        else:
            found.append((prefix + str(entry.pattern), entry))
    return found


def console_routes() -> list[str]:
    """Every URL of the console and the governance pages, with placeholder arguments: the CSRF
    check runs before the view, so the objects need not exist."""
    urls = []
    for pattern, entry in _routes(get_resolver()):
        module = getattr(entry.callback, "__module__", "")
        if not module.startswith(("contexts.console", "contexts.governance",
                                  "django.contrib.auth")):
            continue
        path = re.sub(r"<int:\w+>", "1", pattern)
        # "x_1" matches every converter (a <pid:…> is a prefix, "_" and an id).
        urls.append("/" + re.sub(r"<(?:\w+:)?\w+>", "x_1", path))
    return sorted(set(urls))


def test_every_console_post_without_a_csrf_token_is_refused(cast):  # noqa: F811
    urls = console_routes()
    assert {"/login/", "/fragments/x_1/edit", "/scopes/x_1/pins/reorder",
            "/governance/dedup/1/decide", "/o/x_1/tokens/x_1/revoke"} <= set(urls)
    assert len(urls) >= 30
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.owner)
    accepted = {url: client.post(url, {"body": "x"}).status_code for url in urls}
    assert {url: status for url, status in accepted.items() if status != 403} == {}


def test_the_token_htmx_sends_from_the_page_passes_the_check(cast):  # noqa: F811
    fragment = fragment_services.create_fragment(SYSTEM, cast.repo.scope, body="Some note.")
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.owner)
    page = client.get(f"/fragments/{fragment.public_id}/").content.decode()
    found = re.search(r"""<body hx-headers='\{"X-CSRFToken": "([^"]+)"\}'>""", page)
    assert found, "the base template must give htmx the CSRF token"
    url = f"/fragments/{fragment.public_id}/negative"
    assert client.post(url, {"value": "1"}, HTTP_HX_REQUEST="true").status_code == 403
    response = client.post(url, {"value": "1"}, HTTP_HX_REQUEST="true",
                           HTTP_X_CSRFTOKEN=found.group(1))
    assert response.status_code == 200
    fragment.refresh_from_db()
    assert fragment.negative


# --- security headers -----------------------------------------------------------------------------
def assert_security_headers(response) -> None:
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    policy = dict(part.strip().split(" ", 1) for part in
                  response["Content-Security-Policy"].split(";"))
    assert policy["script-src"] == "'self'"  # no inline script, no eval
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    assert policy["default-src"] == "'self'"


def test_console_and_api_responses_carry_the_security_headers(cast, client):  # noqa: F811
    assert_security_headers(client.get("/login/"))
    assert_security_headers(client.get("/api/whoami"))  # a 401 JSON error
    assert_security_headers(client.get("/api/whoami",
                                       HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}"))
    assert_security_headers(client.get("/api/docs/"))
    client.force_login(cast.owner)
    assert_security_headers(client.get("/"))
    assert_security_headers(client.get("/governance/"))


def test_templates_need_no_inline_script_so_the_policy_holds():
    """What ``script-src 'self'`` would break: inline scripts, event-handler attributes, htmx's
    evaluated ``hx-on`` and ``js:`` values. Inline styles are allowed by the policy."""
    offending = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for pattern in (r"<script(?![^>]*\bsrc=)[^>]*>", r"\son[a-z]+\s*=", r"hx-on",
                        r"""hx-(?:vals|headers)=['"]\s*js:""", r"javascript:"):
            if re.search(pattern, text, flags=re.IGNORECASE):
                offending.append(f"{path.relative_to(ROOT)}: {pattern}")
    assert offending == []


# --- login rate limit -----------------------------------------------------------------------------
@pytest.fixture()
def login_clock(monkeypatch, settings) -> None:
    """The limit's fixed window, held in its middle: a run that crossed a window boundary would
    start counting again and pass or fail by the clock. Redis is reachable: forget a verdict
    "down" another test left (the limit is lifted for 2 s after one)."""
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    monkeypatch.setattr(LoginFailureThrottle, "timer", lambda self: 1_000 * window + window / 2)
    availability._cache.forget()


def login(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password},
                       REMOTE_ADDR=address)


def test_failed_logins_are_limited_per_address_and_username(cast, settings, login_clock):  # noqa: F811
    cache.clear()
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        response = login(client, "lead", "wrong")
        assert response.status_code == 200 and b"didn't match" in response.content
    # Used up: even the right password is refused now, with a clear message.
    locked = login(client, "LEAD", "pw-for-tests-only")
    assert locked.status_code == 429
    assert b"Too many failed log-in attempts" in locked.content
    assert 0 < int(locked["Retry-After"]) <= settings.LOGIN_FAILURE_WINDOW_SECONDS
    assert "_auth_user_id" not in client.session
    # Other people, and the same person elsewhere, are not locked out.
    assert login(Client(), "teammate", "pw-for-tests-only").status_code == 302
    assert login(Client(), "lead", "pw-for-tests-only", address="10.0.0.2").status_code == 302


def test_a_successful_login_below_the_limit_goes_through(cast, settings, login_clock):  # noqa: F811
    cache.clear()
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT - 1):
        login(client, "lead", "wrong")
    response = login(client, "lead", "pw-for-tests-only")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(cast.lead.pk)


def test_the_admin_has_no_login_form_of_its_own(cast):  # noqa: F811
    """Its form would be a second, unthrottled place to guess passwords."""
    url = "/admin/login/?next=/admin/contexts/"
    for response in (Client().get(url),
                     Client().post(url, {"username": "lead", "password": "wrong"})):
        assert response.status_code == 302
        assert response["Location"] == "/login/?next=/admin/contexts/"
    anonymous = Client().get("/admin/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")


# --- every curation action is audited -------------------------------------------------------------
@dataclass
class Audited:
    """Calls one curation action as ``actor``; ``events`` are the (action, object public id)
    pairs it must record, exactly, each with ``actor``."""

    call: Callable[[], object]
    events: list[tuple[str, str]]


def _fragment(cast, title: str, **kw) -> Fragment:  # noqa: F811
    return fragment_services.create_fragment(SYSTEM, cast.repo.scope, title=title,
                                             body=f"{title}: some text.", **kw)


def _pinned(cast, *titles: str) -> list[Fragment]:  # noqa: F811
    found = [_fragment(cast, title) for title in titles]
    for fragment in found:
        pin_services.pin_fragment(SYSTEM, fragment, cast.repo.scope)
    return found


def case_create_fragment(cast, actor) -> Audited:  # noqa: F811
    uid = uuid.uuid4()  # so the new fragment's public id is known before it exists
    return Audited(lambda: fragment_services.create_fragment(actor, cast.repo.scope,
                                                             body="New.", uid=uid),
                   [("fragment.create", fragment_public_id(uid))])


def case_import_fragments(cast, actor) -> Audited:  # noqa: F811
    # An archive's fragments (manage.py import_org): one event per fragment written.
    uid = uuid.uuid4()
    fragment = Fragment(uid=uid, public_id=fragment_public_id(uid), org=cast.org,
                        scope=cast.repo.scope, body="Imported.", content_hash="0" * 64)
    version = FragmentVersion(org=cast.org, fragment=fragment, number=1, body="Imported.")
    return Audited(lambda: fragment_services.import_fragments(actor, cast.org.scope, [fragment],
                                                              [version]),
                   [("fragment.import", fragment.public_id)])


def case_supersede_fragment(cast, actor) -> Audited:  # noqa: F811
    old, new = _fragment(cast, "old"), _fragment(cast, "new")
    return Audited(lambda: fragment_services.supersede_fragment(actor, old, new),
                   [("fragment.supersede", old.public_id)])


def case_restore_fragment(cast, actor) -> Audited:  # noqa: F811
    f = _fragment(cast, "retired")
    fragment_services.retire_fragment(SYSTEM, f)
    return Audited(lambda: fragment_services.restore_fragment(actor, f),
                   [("fragment.restore", f.public_id)])


def case_set_contexts(cast, actor) -> Audited:  # noqa: F811
    f = _fragment(cast, "bundle me")
    bundle = Context.objects.create(org=cast.org, home=cast.org.scope, slug="onboarding",
                                    name="Onboarding")
    return Audited(lambda: fragment_services.set_contexts(actor, f, [bundle]),
                   [("fragment.set_contexts", f.public_id)])


def case_unpin_fragment(cast, actor) -> Audited:  # noqa: F811
    (f,) = _pinned(cast, "unpin me")
    return Audited(lambda: pin_services.unpin_fragment(actor, f, cast.repo.scope),
                   [("pin.delete", f.public_id)])


def case_reorder_pins(cast, actor) -> Audited:  # noqa: F811
    a, b = _pinned(cast, "first", "second")
    return Audited(lambda: pin_services.reorder_pins(actor, cast.repo.scope,
                                                     [b.public_id, a.public_id]),
                   [("pin.reorder", cast.repo.scope.public_id)])


def case_move_pin(cast, actor) -> Audited:  # noqa: F811
    a, _b = _pinned(cast, "first", "second")
    return Audited(lambda: pin_services.move_pin(actor, cast.repo.scope, a, 1),
                   [("pin.reorder", cast.repo.scope.public_id)])


def case_answer_nudge(cast, actor) -> Audited:  # noqa: F811
    f = _fragment(cast, "still true?", owner=cast.lead)
    nudge = Nudge.objects.create(fragment=f, owner=cast.lead, reasons=[{"code": "hot"}])
    # "Still accurate" changes the fragment (verified) and settles the nudge: one event each.
    return Audited(lambda: nudges.answer_nudge(actor, nudge, "still_accurate"),
                   [("fragment.verify", f.public_id), ("nudge.answer", f.public_id)])


def case_merge_duplicates(cast, actor) -> Audited:  # noqa: F811
    keep, drop = _fragment(cast, "keep"), _fragment(cast, "drop")
    # Merging retires the duplicate (its own event) and records the merge on the one kept.
    return Audited(lambda: dedup_review.merge_duplicates(actor, keep, drop),
                   [("fragment.retire", drop.public_id), ("fragment.merge", keep.public_id)])


def case_dismiss_candidate(cast, actor) -> Audited:  # noqa: F811
    a, b = sorted([_fragment(cast, "alike"), _fragment(cast, "alike too")], key=lambda f: f.pk)
    candidate = DedupCandidate.objects.create(org=cast.org, fragment_a=a, fragment_b=b)
    return Audited(lambda: dedup_review.dismiss_candidate(actor, candidate),
                   [("dedup.dismiss", a.public_id)])


def case_merge_fragments(cast, actor) -> Audited:  # noqa: F811
    keep, drop = _fragment(cast, "keep"), _fragment(cast, "drop")
    # The service under the dedup review: the duplicate is retired, the merge recorded on keep.
    return Audited(lambda: fragment_services.merge_fragments(actor, keep, drop),
                   [("fragment.retire", drop.public_id), ("fragment.merge", keep.public_id)])


def case_update_metadata(cast, actor) -> Audited:  # noqa: F811
    a, b = _fragment(cast, "first"), _fragment(cast, "second")
    # One event per fragment that changes, however many are changed at once.
    return Audited(lambda: fragment_services.update_metadata(actor, [a, b], kind="runbook"),
                   [("fragment.edit_metadata", a.public_id),
                    ("fragment.edit_metadata", b.public_id)])


def case_follow_repository_owner(cast, actor) -> Audited:  # noqa: F811
    # A person's choice of owner cleared: the owner the repository names (its document's).
    f = _fragment(cast, "owned by the file", owner=cast.teammate)
    Fragment.objects.filter(pk=f.pk).update(owner_set_by_person=True)
    document = SourceDocument.objects.create(org=cast.org, repository=cast.repo,
                                             path="docs/owned.md", content_hash="x",
                                             owner=cast.lead)
    SourcePointer.objects.create(document=document, fragment=f, anchor="owned")
    return Audited(lambda: fragment_services.follow_repository_owner(actor, f),
                   [("fragment.follow_repository_owner", f.public_id)])


def case_verify(cast, actor) -> Audited:  # noqa: F811
    # The console's Verify: the fragment verified, and each evidence or verify-by nudge it
    # settles answered — one event each.
    f = _fragment(cast, "verify me", owner=cast.teammate)
    for kind in (NudgeKind.EVIDENCE_CHANGED, NudgeKind.VERIFY_DUE):
        Nudge.objects.create(fragment=f, owner=cast.teammate, kind=kind, reasons=[])
    return Audited(lambda: curation.verify(actor, Fragment.objects.get(pk=f.pk)),
                   [("fragment.verify", f.public_id), ("nudge.answer", f.public_id),
                    ("nudge.answer", f.public_id)])


def conflict_case(choice: str, events: list[str]) -> Callable:
    """A source conflict answered with ``choice`` (ADR 0020): ``events`` the actions beside
    ``fragment.source_resolved`` (an answer that changes the text writes a version too)."""

    def case(cast, actor) -> Audited:  # noqa: F811
        f = _fragment(cast, f"conflicted {choice}", owner=cast.teammate)
        nudge = Nudge.objects.create(
            fragment=f, owner=cast.teammate, kind=NudgeKind.SOURCE_CONFLICT, reasons=[],
            detail={"base": "Base.", "upstream": "Upstream.", "path": "docs/x.md",
                    "commit": "c0ffee"})
        text = "Merged by hand." if choice == source_conflicts.EDIT_MERGE else None
        return Audited(lambda: source_conflicts.resolve_conflict(actor, nudge, choice, text),
                       [(action, f.public_id) for action in
                        [*events, "fragment.source_resolved"]])

    return case


case_resolve_conflict_keep_mine = conflict_case(source_conflicts.KEEP_MINE, [])
case_resolve_conflict_take_upstream = conflict_case(source_conflicts.TAKE_UPSTREAM,
                                                    ["fragment.edit"])
case_resolve_conflict_edit_merge = conflict_case(source_conflicts.EDIT_MERGE, ["fragment.edit"])


# Actions on one fresh fragment: name → (expected action, fragment options, the call with the
# cast, the actor and the fragment).
ONE_FRAGMENT: dict[str, tuple[str, dict, Callable]] = {
    "edit_fragment": ("fragment.edit", {}, lambda c, actor, f: fragment_services.edit_fragment(
        actor, f, based_on_version=1, body="Edited.")),
    "retire_fragment": ("fragment.retire", {}, lambda c, actor, f:
                        fragment_services.retire_fragment(actor, f)),
    "mark_negative": ("fragment.mark_negative", {}, lambda c, actor, f:
                      fragment_services.mark_negative(actor, f)),
    "unmark_negative": ("fragment.unmark_negative", {"kind": "negative"}, lambda c, actor, f:
                        fragment_services.mark_negative(actor, f, False)),
    "reassign_owner": ("fragment.reassign_owner", {}, lambda c, actor, f:
                       fragment_services.reassign_owner(actor, f, c.teammate)),
    "pin_fragment": ("pin.create", {}, lambda c, actor, f:
                     pin_services.pin_fragment(actor, f, c.repo.scope)),
    "verify_fragment": ("fragment.verify", {}, lambda c, actor, f:
                        fragment_services.verify_fragment(actor, f)),
}


def one_fragment_case(name: str) -> Callable:
    action, options, call = ONE_FRAGMENT[name]

    def case(cast, actor) -> Audited:  # noqa: F811
        f = _fragment(cast, name, **options)
        return Audited(lambda: call(cast, actor, f), [(action, f.public_id)])

    return case


CASES: dict[str, Callable] = {
    **{name: one_fragment_case(name) for name in ONE_FRAGMENT},
    **{name.removeprefix("case_"): fn for name, fn in list(globals().items())
       if name.startswith("case_")},
}
# Every curation action: the functions of these modules that take the acting user first.
CURATION_MODULES: list[ModuleType] = [fragment_services, pin_services, nudges, dedup_review,
                                      curation, source_conflicts]
NOT_ACTIONS = {
    "require",      # the permission check itself
    "is_lead",      # nudges: who may answer, what the inbox shows — reading only
    "may_answer",
    "inbox",
}
# Actions whose table entries are named after the variant they test.
VARIANTS = {"mark_negative": {"mark_negative", "unmark_negative"},
            "resolve_conflict": {f"resolve_conflict_{choice}"
                                 for choice in source_conflicts.ANSWERS}}


# The one door's curation use cases (contexts/usecases/curation.py) that forward to a write
# above under another name: covered by that write's case (names they share need no entry).
FORWARDS = {"edit": "edit_fragment", "retire": "retire_fragment",
            "restore": "restore_fragment", "supersede": "supersede_fragment",
            "pin": "pin_fragment", "unpin": "unpin_fragment",
            "dismiss_duplicate": "dismiss_candidate"}


def curation_functions() -> set[str]:
    names = set()
    for module in CURATION_MODULES:
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__ or name.startswith("_") or name in NOT_ACTIONS:
                continue
            params = list(inspect.signature(fn).parameters)
            if params and params[0] in {"principal", "user"}:
                names.add(name)
    return names


def test_the_audit_table_covers_every_curation_action():
    covered = set(CASES)
    missing = {name for name in curation_functions()
               if not VARIANTS.get(FORWARDS.get(name, name), {FORWARDS.get(name, name)})
               <= covered}
    assert len(curation_functions()) >= 14
    assert missing == set(), "add a case_<name> below for each new curation action"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_curation_action_records_exactly_its_audit_events(cast, name):  # noqa: F811
    actor = cast.lead  # tech lead: curate and pin
    audited = CASES[name](cast, actor)
    before = AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    audited.call()
    recorded = list(AuditEvent.objects.filter(pk__gt=before).order_by("pk"))
    assert sorted((e.action, e.object_id) for e in recorded) == sorted(audited.events)
    assert all(e.actor_id == actor.pk and e.org_id == cast.org.pk for e in recorded)


# --- secrets come from the environment ------------------------------------------------------------
PRINT_SETTINGS = ("import json; from contexts import settings as s; print(json.dumps({"
                  "'secret': s.SECRET_KEY, 'db': s.DATABASES['default'],"
                  "'redis': s.CACHES['default']['LOCATION'], 'broker': s.CELERY_BROKER_URL}))")


def settings_in(env: dict[str, str], tmp_path: Path, *,
                started: bool = False) -> subprocess.CompletedProcess:
    """The settings a process reads with ``env``: imported (``started`` off), or in a process
    started as ``manage.py`` starts one — the secrets of a one-machine run generated, an invalid
    configuration refused (contexts/stack/cli.py)."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CONTEXTS_",
                                  "DEBUG"))}
    command = ["manage.py", "shell", "-c", PRINT_SETTINGS] if started else ["-c", PRINT_SETTINGS]
    return subprocess.run([sys.executable, *command], cwd=ROOT, text=True,
                          capture_output=True, timeout=60,
                          env={**clean, "CONTEXTS_VAR_DIR": str(tmp_path / "var"),
                               "CONTEXTS_RUN_SETTINGS": "off", **env})


def printed(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_secrets_and_service_urls_are_read_from_the_environment(tmp_path):
    key_file = tmp_path / "key"
    # Composed: no high-entropy literal in this file (the repository scan finds none).
    key_file.write_text(f"from-a-docker-secret-file-{string.digits}{string.ascii_lowercase}\n")
    result = settings_in({"SECRET_KEY_FILE": str(key_file),
                          "DATABASE_URL": "postgres://app:pw@db.internal:6543/ctx",
                          "REDIS_URL": "redis://cache.internal:6390/2"}, tmp_path)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["secret"] == key_file.read_text().strip()
    db = values["db"]
    assert (db["HOST"], db["PORT"], db["NAME"], db["USER"], db["PASSWORD"]) == (
        "db.internal", 6543, "ctx", "app", "pw")
    assert values["redis"] == values["broker"] == "redis://cache.internal:6390/2"


def test_without_a_production_flag_a_missing_key_is_random_and_kept_private(tmp_path):
    first = printed(settings_in({}, tmp_path, started=True))["secret"]
    again = printed(settings_in({}, tmp_path, started=True))["secret"]
    elsewhere = printed(settings_in({}, tmp_path / "other", started=True))["secret"]
    assert len(first) >= 50 and first == again != elsewhere
    assert (tmp_path / "var" / "secret_key").stat().st_mode & 0o077 == 0
    # Only a start generates it: importing the settings reads what is there.
    assert printed(settings_in({}, tmp_path / "imported"))["secret"] == ""
    assert not (tmp_path / "imported").exists()


@pytest.mark.parametrize("env", [{}, {"SECRET_KEY": "change-me-to-a-long-random-string"}],
                         ids=["missing", "compose placeholder"])
def test_in_production_a_missing_or_placeholder_key_stops_the_start(tmp_path, env):
    result = settings_in({"CONTEXTS_PRODUCTION": "true", **env}, tmp_path, started=True)
    assert result.returncode != 0
    assert "the configuration has" in result.stderr and "SECRET_KEY: must be set" in result.stderr
    assert not (tmp_path / "var" / "secret_key").exists()  # nothing generated in its place
    ok = settings_in({"CONTEXTS_PRODUCTION": "true", "SECRET_KEY": "k" * 60}, tmp_path,
                     started=True)
    assert ok.returncode == 0, ok.stderr
    assert printed(ok)["secret"] == "k" * 60


def test_a_web_thread_pool_of_none_stops_the_start_naming_the_setting(tmp_path):
    result = settings_in({"CONTEXTS_WEB_THREADS": "0"}, tmp_path, started=True)
    assert result.returncode != 0
    assert "CONTEXTS_WEB_THREADS: must be at least 1, not 0" in result.stderr
    assert settings_in({"CONTEXTS_WEB_THREADS": "2"}, tmp_path, started=True).returncode == 0
