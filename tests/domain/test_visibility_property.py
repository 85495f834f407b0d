"""Property: readable_scopes never returns a scope the principal may not read, and never omits
one it may. The oracle below re-derives visibility from the domain objects (memberships,
guardian grants, sessions' repositories, contexts' homes, subscriptions) without touching
Scope.parent, which is what the implementation walks."""

import datetime as dt

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from guardian.shortcuts import assign_perm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import Membership, Organization, Persona, Repository, Role, Scope, Session
from accounts.scopes import readable_scopes
from accounts.tokens import create_token
from contexts.models import Context, ContextSubscription

world = st.fixed_dictionaries({
    "orgs": st.integers(1, 3),
    "repos": st.lists(st.integers(0, 2), max_size=4),            # org index per repo
    "personas": st.lists(st.integers(0, 2), max_size=2),
    "sessions": st.lists(st.tuples(st.integers(0, 2), st.integers(-1, 3)), max_size=4),
    "contexts": st.lists(st.tuples(st.integers(0, 20), st.booleans()), max_size=3),
    "subscriptions": st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30)), max_size=3),
    "users": st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=3),
    "memberships": st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2),
                                      st.sampled_from(list(Role))), max_size=4),
    "grants": st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40)), max_size=3),
    "tokens": st.lists(st.tuples(st.lists(st.integers(0, 40), min_size=1, max_size=3),
                                 st.sampled_from(["active", "revoked", "expired"])),
                       max_size=3),
})


def build(spec):
    orgs = [Organization.objects.create(slug=f"o{i}", name=f"o{i}") for i in range(spec["orgs"])]
    pick = lambda seq, i: seq[i % len(seq)]  # noqa: E731
    repos = [Repository.objects.create(org=pick(orgs, o), slug=f"r{n}", name="r")
             for n, o in enumerate(spec["repos"])]
    personas = [Persona.objects.create(org=pick(orgs, o), slug=f"p{n}", name="p")
                for n, o in enumerate(spec["personas"])]
    sessions = []
    for n, (o, r) in enumerate(spec["sessions"]):
        org = pick(orgs, o)
        repo = next((x for x in repos[r:] if x.org_id == org.id), None) if r >= 0 else None
        sessions.append(Session.objects.create(org=org, repository=repo, external_id=f"s{n}"))
    homes = [*orgs, *repos, *personas, *sessions]
    contexts = []
    for n, (h, published) in enumerate(spec["contexts"]):
        home = pick(homes, h)
        org = home if isinstance(home, Organization) else home.org
        contexts.append(Context.objects.create(org=org, home=home.scope, slug=f"c{n}",
                                               name="c", published=published))
    if contexts:
        for s, c in spec["subscriptions"]:
            ContextSubscription.objects.get_or_create(context=pick(contexts, c),
                                                      subscriber=pick(homes, s).scope)
    users = [get_user_model().objects.create(username=f"u{n}", is_superuser=su,
                                             is_active=active)
             for n, (su, active) in enumerate(spec["users"])]
    for u, o, role in spec["memberships"]:
        Membership.objects.get_or_create(user=pick(users, u), org=pick(orgs, o),
                                         defaults={"role": role})
    guarded = [*orgs, *repos, *personas, *sessions]
    for u, g in spec["grants"]:
        target = pick(guarded, g)
        assign_perm(f"accounts.view_{type(target).__name__.lower()}", pick(users, u), target)
    tokens = []
    for n, (targets, state) in enumerate(spec["tokens"]):
        first = pick(guarded, targets[0])
        org = first if isinstance(first, Organization) else first.org
        scopes = [x.scope for x in (pick(guarded, t) for t in targets)
                  if (x if isinstance(x, Organization) else x.org) == org]
        token, _ = create_token(org, f"t{n}", scopes)
        if state == "revoked":
            token.revoked_at = timezone.now()
        elif state == "expired":
            token.expires_at = timezone.now() - dt.timedelta(days=1)
        token.save()
        tokens.append(token)
    return users, tokens, guarded, contexts


def below(obj) -> set[int]:
    """The object's scope and every scope under it, from domain relations."""
    result = {obj.scope_id}
    if isinstance(obj, Organization):
        return set(Scope.objects.filter(org=obj).values_list("id", flat=True))
    if isinstance(obj, Repository):
        result |= set(Session.objects.filter(repository=obj).values_list("scope_id", flat=True))
    changed = True
    while changed:  # contexts defined in anything readable
        more = set(Context.objects.filter(home_id__in=result).values_list("scope_id", flat=True))
        changed = not more <= result
        result |= more
    return result


def oracle(principal, guarded) -> set[int]:
    from accounts.models import ApiToken

    if isinstance(principal, ApiToken):
        now = timezone.now()
        if principal.revoked_at or (principal.expires_at and principal.expires_at <= now):
            return set()
        roots = [o for o in guarded if o.scope_id in
                 set(principal.scopes.values_list("id", flat=True))]
    elif not principal.is_active:
        return set()
    elif principal.is_superuser:
        return set(Scope.objects.values_list("id", flat=True))
    else:
        member_orgs = set(Membership.objects.filter(user=principal).values_list("org", flat=True))
        roots = [o for o in guarded
                 if (isinstance(o, Organization) and o.id in member_orgs)
                 or principal.has_perm(f"accounts.view_{type(o).__name__.lower()}", o)]
    readable = set().union(*(below(o) for o in roots)) if roots else set()
    subscribed = ContextSubscription.objects.filter(subscriber_id__in=readable,
                                                    context__published=True)
    return readable | set(subscribed.values_list("context__scope_id", flat=True))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=world)
def test_visibility_matches_the_oracle(db, spec):
    with transaction.atomic():
        users, tokens, guarded, _ = build(spec)
        for principal in [*users, *tokens]:
            fresh = type(principal).objects.get(pk=principal.pk)  # no cached perms
            assert set(readable_scopes(fresh)) == oracle(fresh, guarded), principal
        transaction.set_rollback(True)
