"""Every action for every member of the cast, in every scope."""

import pytest
from guardian.shortcuts import assign_perm

from accounts.permissions import may
from accounts.scopes import ScopeDenied, readable_scopes, retrieval_scopes

ALL_ACTIONS = ("view", "contribute", "curate", "pin", "administer")


def allowed(principal, scope) -> set[str]:
    return {action for action in ALL_ACTIONS if may(principal, action, scope)}


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ("owner", set(ALL_ACTIONS)),
        ("lead", {"view", "contribute", "curate", "pin"}),
        ("teammate", {"view", "contribute", "curate"}),
        ("viewer", {"view"}),
        ("stranger", set()),
    ],
)
def test_roles_decide_actions_in_every_scope_of_their_org(cast, who, expected):
    principal = getattr(cast, who)
    for obj in (cast.org, cast.repo, cast.other_repo, cast.persona, cast.session):
        assert allowed(principal, obj.scope) == expected, (who, obj)


def test_nobody_from_one_org_acts_in_another(cast):
    for who in ("owner", "lead", "teammate", "viewer"):
        assert allowed(getattr(cast, who), cast.other_org.scope) == set()
    assert allowed(cast.stranger, cast.other_org.scope) == set(ALL_ACTIONS)


def test_a_token_reads_its_scopes_and_below_and_writes_only_into_sessions(cast):
    assert allowed(cast.token, cast.repo.scope) == {"view"}
    assert allowed(cast.token, cast.session.scope) == {"view", "contribute"}
    for outside in (cast.org, cast.other_repo, cast.persona, cast.other_org):
        assert allowed(cast.token, outside.scope) == set()


def test_a_revoked_or_expired_token_reads_nothing(cast):
    from django.utils import timezone

    cast.token.revoked_at = timezone.now()
    assert readable_scopes(cast.token) == frozenset()
    cast.token.revoked_at = None
    cast.token.expires_at = timezone.now()
    assert readable_scopes(cast.token) == frozenset()


def test_guardian_grants_reach_a_non_member(cast):
    assign_perm("accounts.view_repository", cast.stranger, cast.repo)
    assert allowed(cast.stranger, cast.repo.scope) == {"view"}
    assert allowed(cast.stranger, cast.session.scope) == {"view"}  # sessions of that repo
    assert allowed(cast.stranger, cast.org.scope) == set()
    assign_perm("accounts.pin_repository", cast.stranger, cast.repo)
    assert allowed(cast.stranger, cast.repo.scope) == {"view", "pin"}


def test_requested_scopes_that_are_not_readable_are_refused_not_dropped(cast):
    with pytest.raises(ScopeDenied):
        readable_scopes(cast.token, [cast.repo.scope, cast.org.scope])
    assert readable_scopes(cast.token, [cast.repo.scope]) == {cast.repo.scope_id}


def test_retrieval_scopes_keep_out_sibling_scopes(cast):
    chain = [cast.session.scope, cast.repo.scope, cast.org.scope]
    effective = retrieval_scopes(cast.viewer, chain)
    assert effective == {cast.session.scope_id, cast.repo.scope_id, cast.org.scope_id}
    assert cast.other_repo.scope_id not in effective


def test_anonymous_reads_nothing(cast):
    from django.contrib.auth.models import AnonymousUser

    assert readable_scopes(AnonymousUser()) == frozenset()
    assert readable_scopes(None) == frozenset()
