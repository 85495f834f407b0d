"""Red-team 3, finding 7 (low): with password login switched off (``CONTEXTS_LOCAL_LOGIN=false``)
the login form still checked passwords — a correct password got 403, a wrong one 200 — so it
told anyone whether a password was right.

After: while password login is off, only the operator's active staff and superuser accounts
(the break-glass way in, ``/login/?operator``) have their password checked. Every other
attempt — another account's right password, a wrong password, a name no account has, an
operator's wrong password — gets the same status and the same page, after the same work: the
password hasher runs exactly once (counted here through a hasher class that observes its calls;
no timing is measured), and every refusal counts against the login throttle.
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from typing import ClassVar

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-for-tests-only"  # tests.factories.UserFactory's


class CountingHasher(MD5PasswordHasher):
    """The test suite's hasher (MD5, algorithm ``md5``), counting each run of its hash."""

    runs: ClassVar[Counter] = Counter()

    def encode(self, password: str, salt: str) -> str:
        CountingHasher.runs["encode"] += 1
        return super().encode(password, salt)

    def verify(self, password: str, encoded: str) -> bool:
        # MD5PasswordHasher.verify hashes through encode: counted as one run, not two.
        CountingHasher.runs["verify"] += 1
        before = CountingHasher.runs["encode"]
        try:
            return super().verify(password, encoded)
        finally:
            CountingHasher.runs["encode"] = before


@pytest.fixture
def password_login_off(settings) -> None:
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    settings.LOCAL_LOGIN_ENABLED = False


def _name() -> str:
    return f"u{uuid.uuid4().hex[:10]}"  # its own throttle bucket, whatever ran before


def _normalised(html: str) -> str:
    """The page without its CSRF token (form field and htmx header), which Django masks
    afresh in every response."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"',
                  'name="csrfmiddlewaretoken" value=""', html)
    return re.sub(r'"X-CSRFToken": "[^"]+"', '"X-CSRFToken": ""', html)


def _attempt(path: str, username: str, password: str) -> tuple[int, str, bool, Counter]:
    """(status, page, signed in?, hasher runs) of one POST of the login form."""
    CountingHasher.runs.clear()
    client = Client()
    response = client.post(path, {"username": username, "password": password})
    runs = Counter(CountingHasher.runs)
    return (response.status_code, _normalised(response.content.decode()),
            "_auth_user_id" in client.session, runs)


@pytest.mark.parametrize("path", ["/login/", "/login/?operator"])
def test_every_refused_password_gets_the_same_answer_after_the_same_work(password_login_off,
                                                                         path):
    member = UserFactory(username=_name())
    operator = UserFactory(username=_name(), is_staff=True, is_superuser=True)
    attempts = {
        "a member's right password": _attempt(path, member.username, PASSWORD),
        "a member's wrong password": _attempt(path, member.username, "not-the-password"),
        "a name no account has": _attempt(path, _name(), PASSWORD),
        "an operator's wrong password": _attempt(path, operator.username, "not-the-password"),
    }
    answers = {(status, page) for status, page, _, _ in attempts.values()}
    assert len(answers) == 1, {what: a[0] for what, a in attempts.items()}
    status, page = answers.pop()
    assert status == 200 and "Password login is switched off" in page
    assert not any(signed_in for _, _, signed_in, _ in attempts.values())
    # The hasher ran exactly once in each case ...
    assert {what: sum(a[3].values()) for what, a in attempts.items()} == dict.fromkeys(attempts, 1)
    # ... and the same way for every non-operator, whose stored hash is never looked at.
    non_operator = [a[3] for what, a in attempts.items() if "operator" not in what]
    assert non_operator[0] == non_operator[1] == non_operator[2] == Counter(encode=1)


def test_a_deactivated_operator_is_refused_like_anyone(password_login_off):
    retired = UserFactory(username=_name(), is_staff=True, is_active=False)
    member = UserFactory(username=_name())
    refused = _attempt("/login/?operator", retired.username, PASSWORD)
    assert refused[:3] == _attempt("/login/?operator", member.username, PASSWORD)[:3]
    assert sum(refused[3].values()) == 1


@pytest.mark.parametrize("flags", [{"is_staff": True}, {"is_superuser": True},
                                   {"is_staff": True, "is_superuser": True}])
def test_the_operators_break_glass_way_in_still_works(password_login_off, flags):
    operator = UserFactory(username=_name(), **flags)
    client = Client()
    assert 'name="password"' in client.get("/login/?operator").content.decode()
    response = client.post("/login/?operator", {"username": operator.username,
                                                 "password": PASSWORD})
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(operator.pk)


def test_a_right_password_counts_against_the_throttle_like_a_wrong_one(password_login_off,
                                                                       settings):
    settings.LOGIN_FAILURE_LIMIT = 2
    member = UserFactory(username=_name())
    for _ in range(2):
        assert Client().post("/login/", {"username": member.username,
                                         "password": PASSWORD}).status_code == 200
    # Locked out as wrong guesses would be: the right password earns nothing.
    assert Client().post("/login/", {"username": member.username,
                                     "password": PASSWORD}).status_code == 429


def test_with_password_login_on_a_member_still_signs_in(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    member = UserFactory(username=_name())
    client = Client()
    assert client.post("/login/", {"username": member.username,
                                   "password": PASSWORD}).status_code == 302
    assert client.session["_auth_user_id"] == str(member.pk)
    wrong = Client().post("/login/", {"username": member.username, "password": "nope"})
    assert wrong.status_code == 200 and "didn't match" in wrong.content.decode()
