"""Twenty editors of one fragment at once: no version is lost, duplicated or skipped.

tests/domain/test_fragments.py and tests/console/test_edit.py check one stale edit, in one
thread. Here 20 threads, each with its own database connection (so the row lock and the version
check really race), start from the same base version — through the service and through the
console's edit view — and then once more, each retrying on conflict by rebasing its change onto
the version it lost to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from accounts.models import Role
from contexts.models import Fragment, FragmentVersion
from contexts.services.errors import EditConflict
from contexts.services.fragments import create_fragment, edit_fragment
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)

EDITORS = 20
BASE = "The limiter drops requests on burst."


@pytest.fixture
def fragment(cast) -> Fragment:  # noqa: F811
    return create_fragment(cast.teammate, cast.repo.scope, title="Rate limiter", body=BASE)


@pytest.fixture
def editors(cast) -> list[Any]:  # noqa: F811
    users = [UserFactory(username=f"editor{i:02d}") for i in range(EDITORS)]
    for user in users:
        MembershipFactory(user=user, org=cast.org, role=Role.CURATOR)
    return users


def race(work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` for every editor in its own thread, released together by a barrier.

    Each thread's outcome (return value or exception) is collected; each thread closes its own
    database connection, so the test database can be dropped afterwards.
    """
    barrier = threading.Barrier(EDITORS)
    outcomes: list[Any] = [None] * EDITORS

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes[i] = work(i)
        except BaseException as exc:  # noqa: BLE001 - the test inspects what each thread got
            outcomes[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(EDITORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "an editor hung"
    return outcomes


def assert_history_is_whole(fragment: Fragment, applied_bodies: list[str]) -> list[str]:
    """Versions are 1..n without gaps or duplicates, every applied edit is exactly one of them,
    and the fragment shows the last one. Returns the bodies in version order."""
    versions = list(FragmentVersion.objects.filter(fragment=fragment).order_by("number")
                    .values_list("number", "body"))
    numbers = [number for number, _ in versions]
    assert numbers == list(range(1, len(versions) + 1))
    bodies = [body for _, body in versions]
    assert bodies[0] == BASE
    for body in applied_bodies:
        assert bodies.count(body) == 1, f"applied edit {body!r} is not exactly one version"
    assert len(bodies) == 1 + len(applied_bodies)  # nothing but the applied edits was written
    fragment.refresh_from_db()
    assert fragment.version == numbers[-1] and fragment.body == bodies[-1]
    return bodies


def test_twenty_service_edits_from_one_base_apply_once_and_refuse_the_rest(fragment, editors):
    def edit(i: int) -> Fragment:
        return edit_fragment(editors[i], Fragment.objects.get(pk=fragment.pk),
                             based_on_version=1, body=f"{BASE} (editor {i})")

    outcomes = race(edit)
    applied = [i for i, o in enumerate(outcomes) if isinstance(o, Fragment)]
    refused = [i for i, o in enumerate(outcomes) if isinstance(o, EditConflict)]
    unexpected = [o for o in outcomes if not isinstance(o, Fragment | EditConflict)]
    assert not unexpected
    assert len(applied) + len(refused) == EDITORS
    # All started from version 1: exactly one can win, every other one sees it won.
    assert len(applied) == 1
    winner = f"{BASE} (editor {applied[0]})"
    assert all(outcomes[i].current_version == 2 and outcomes[i].current_body == winner
               for i in refused)
    assert_history_is_whole(fragment, [winner])


def test_twenty_console_edits_from_one_base_save_once_and_show_the_rest_a_conflict(
        fragment, editors):
    clients = []
    for user in editors:  # log in up front: the race is the edit, not the session writes
        client = Client()
        client.force_login(user)
        clients.append(client)

    def post(i: int):
        return clients[i].post(f"/fragments/{fragment.public_id}/edit", {
            "title": fragment.title, "body": f"{BASE} (console editor {i})",
            "based_on_version": 1, "reason": "race"})

    outcomes = race(post)
    assert not [o for o in outcomes if isinstance(o, BaseException)]
    statuses = [response.status_code for response in outcomes]
    applied = [i for i, status in enumerate(statuses) if status == 302]
    refused = [i for i, status in enumerate(statuses) if status == 409]
    assert len(applied) + len(refused) == EDITORS, statuses
    assert len(applied) == 1
    winner = f"{BASE} (console editor {applied[0]})"
    for i in refused:  # the conflict page shows the winning text and keeps the loser's
        html = outcomes[i].content.decode()
        assert winner in html and f"(console editor {i})" in html
        assert 'name="based_on_version" value="2"' in html
    assert_history_is_whole(fragment, [winner])


def test_twenty_editors_who_rebase_on_conflict_all_get_their_change_in(fragment, editors):
    def line(i: int) -> str:
        return f"- note from editor {i}"

    def edit_until_applied(i: int) -> int:
        version, body, attempts = 1, BASE, 0
        while True:
            attempts += 1
            try:
                edit_fragment(editors[i], Fragment.objects.get(pk=fragment.pk),
                              based_on_version=version, body=f"{body}\n{line(i)}")
                return attempts
            except EditConflict as conflict:  # rebase my line onto what won
                version, body = conflict.current_version, conflict.current_body
                if attempts > EDITORS:
                    raise

    outcomes = race(edit_until_applied)
    assert all(isinstance(o, int) for o in outcomes), outcomes
    assert sum(outcomes) > EDITORS  # they really raced: someone had to rebase

    versions = list(FragmentVersion.objects.filter(fragment=fragment).order_by("number")
                    .values_list("number", "body"))
    assert [number for number, _ in versions] == list(range(1, EDITORS + 2))
    # Each version is the one before plus exactly one editor's line: no update overwrote another.
    for (_, before), (_, after) in zip(versions, versions[1:], strict=False):
        assert after.startswith(before + "\n") and after.count("\n") == before.count("\n") + 1
    final = versions[-1][1]
    assert sorted(final.splitlines()[1:]) == sorted(line(i) for i in range(EDITORS))
    fragment.refresh_from_db()
    assert fragment.version == EDITORS + 1 and fragment.body == final
