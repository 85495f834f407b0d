"""accounts.lookups.find_chain: a request's scope fields resolved in one statement, with the
same rules as the one-object lookups (public id or slug; a public id match wins; inside the
named organization only)."""

from accounts.lookups import Found, find_chain, find_in_org, find_org
from accounts.models import Persona, Repository, Session
from tests.factories import RepositoryFactory


def test_every_field_by_slug_or_public_id(cast):
    by_slug = find_chain("acme", repo="web", persona="sre", session=cast.session.external_id)
    by_id = find_chain(cast.org.public_id, repo=cast.repo.public_id,
                       persona=cast.persona.public_id, session=cast.session.public_id)
    expected = {"org": Found(cast.org.pk, cast.org.scope_id),
                "repo": Found(cast.repo.pk, cast.repo.scope_id),
                "persona": Found(cast.persona.pk, cast.persona.scope_id),
                "session": Found(cast.session.pk, cast.session.scope_id)}
    assert by_slug == by_id == expected


def test_only_the_fields_given_and_found(cast):
    assert set(find_chain("acme")) == {"org"}
    assert set(find_chain("acme", repo="web", persona="")) == {"org", "repo"}
    assert set(find_chain("acme", repo="nope")) == {"org"}
    assert find_chain("nope", repo="web") == {}


def test_objects_of_another_organization_are_not_found(cast):
    RepositoryFactory(org=cast.other_org, slug="infra")
    assert "repo" not in find_chain("acme", repo="infra")
    assert "repo" not in find_chain("globex", repo=cast.repo.public_id)
    assert "session" not in find_chain("globex", session=cast.session.external_id)


def test_a_public_id_match_wins_over_a_slug_that_looks_like_one(cast):
    # billing's public id becomes "web", the slug of the older repository; rewriting the row
    # also stores it after web, so an unordered lookup would answer web.
    Repository.objects.filter(pk=cast.other_repo.pk).update(public_id="web")
    found = find_chain("acme", repo="web")
    assert found["repo"] == Found(cast.other_repo.pk, cast.other_repo.scope_id)


def test_it_agrees_with_the_one_object_lookups(cast):
    org = find_org("acme")
    for kind, model, ref, slug_field in [
        ("repo", Repository, "billing", "slug"),
        ("persona", Persona, "sre", "slug"),
        ("session", Session, cast.session.external_id, "external_id"),
    ]:
        one = find_in_org(model, org, ref, slug_field)
        assert find_chain("acme", **{kind: ref})[kind] == Found(one.pk, one.scope_id)
