"""Scope leakage, generated: random worlds driven through the HTTP API, the console and SQL.

Hypothesis generates organizations, repositories, personas, sessions, contexts (published or
not) with subscriptions, people with memberships and guardian grants, agent tokens (active,
revoked, expired) bound to assorted scopes, fragments in every kind of scope (some also in
contexts, some retired, some owned, pinned, nudged), ingestion jobs and retrieval traces. The
world is indexed for real (``reindex_fragments``) and then read through every door.

What each principal may read is computed by the **oracle** below straight from the generated
spec (memberships, grants, token bindings, sessions' repositories, contexts' homes,
subscriptions) — it never asks ``accounts.scopes`` or walks ``Scope.parent``. Checks:

* retrieval answers, stored traces (API and the RetrievalTrace row, every stage's candidates),
  console pages (lists, counts, facets, pins, inbox, traces, search preview) and error bodies
  hold no fragment outside the oracle's set;
* another organization's (or any unreadable) object answers exactly like an id that does not
  exist: the same status and the same body;
* with the application's scope filter deliberately widened, row-level security alone still
  returns nothing outside the allowed scopes.

Each example runs in a savepoint that is rolled back; the embedding vectors of the (few,
fixed) fragment bodies are computed once per test so examples stay cheap.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.utils import timezone
from guardian.shortcuts import assign_perm
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from accounts.models import (
    PUBLIC_ID_ALPHABET,
    ApiToken,
    Membership,
    Organization,
    Persona,
    Repository,
    Role,
    Session,
)
from accounts.permissions import SYSTEM
from accounts.tokens import create_token
from contexts.indexes.follower import reindex_fragments
from contexts.indexes.indexing import NAMESPACES, active_generation, cache_vectors
from contexts.models import (
    Context,
    ContextSubscription,
    Embedding,
    Fragment,
    FragmentKind,
    IngestionJob,
    Nudge,
    RetrievalTrace,
)
from contexts.models.embeddings import EMBEDDING_DIM
from contexts.models.governance import NudgeState
from contexts.services.fragments import content_hash, create_fragment, retire_fragment
from contexts.services.pins import pin_fragment
from contexts.services.rls import retrieval_scope

pytestmark = pytest.mark.slow

# --- the generated world ---------------------------------------------------------------------
MAX_FRAGMENTS = 10
TEMPLATES = [
    "The rate limiter drops requests on burst because the token bucket refills once a second.",
    "Deploys happen on weekdays only; never deploy on Friday afternoon.",
    "Billing retries failed charges three times with exponential backoff.",
    "When the rate limiter pages, raise the bucket size first and watch the error budget.",
    "Session finding: the limiter bucket size is ten and burst traffic exhausts it.",
    "Never cache tokens in memory; core dumps leak them to whoever reads the dump.",
    "def retry(fn):\n    return fn()  # the billing client retries once on timeout\n",
]
WORDS = ["rate", "limiter", "bucket", "burst", "deploy", "friday", "billing", "retries",
         "tokens", "session", "cache", "backoff", "retry"]
LANGUAGES = ["", "", "python", "markdown", "go"]
KINDS = [k for k in FragmentKind.values]
# What a console 404 says (Django's page, no path echoed) and the API's refusals.
API_NOT_FOUND = {"error": {"code": "not_found", "message": "Not found.", "field": None}}
SCOPE_REFUSED = "scope not found or not readable"


def fragment_title(n: int) -> str:
    return f"canary{n:02d}x"        # fixed width: no title is a substring of another


def fragment_marker(n: int) -> str:
    return f"ref{n:02d}q"


def fragment_body(n: int) -> str:
    # The body depends on the index only, so its vector is computed once per test (below).
    return f"{TEMPLATES[n % len(TEMPLATES)]} Marker {fragment_marker(n)}."


idx = st.integers(0, 60)   # indexes are taken modulo the length of what they pick from
world_specs = st.fixed_dictionaries({
    "orgs": st.integers(2, 3),
    "repos": st.lists(idx, min_size=1, max_size=4),
    "personas": st.lists(idx, max_size=2),
    "sessions": st.lists(st.tuples(idx, st.booleans(), idx), max_size=3),
    "contexts": st.lists(st.tuples(idx, st.booleans()), max_size=3),
    "subscriptions": st.lists(st.tuples(idx, idx), max_size=3),
    "users": st.lists(st.lists(st.tuples(idx, st.sampled_from(list(Role))), max_size=2),
                      min_size=1, max_size=3),
    "grants": st.lists(st.tuples(idx, idx), max_size=3),
    "tokens": st.lists(st.tuples(st.lists(idx, min_size=1, max_size=2),
                                 st.sampled_from(["active", "active", "revoked", "expired"])),
                       min_size=1, max_size=3),
    "fragments": st.lists(st.fixed_dictionaries({
        "home": idx, "kind": st.sampled_from(KINDS), "contexts": st.lists(idx, max_size=2),
        "retired": st.booleans(), "owner": st.integers(-1, 2),
        "language": st.sampled_from(LANGUAGES)}), min_size=2, max_size=MAX_FRAGMENTS),
    "pins": st.lists(st.tuples(idx, idx), max_size=3),
    "nudges": st.lists(st.tuples(idx, idx, st.booleans()), max_size=3),
    "jobs": st.lists(idx, max_size=2),
    "traces": st.lists(st.tuples(idx, st.lists(idx, min_size=1, max_size=3)), max_size=2),
})


@dataclass
class Node:
    """One scope as the generator made it (the oracle's view, not Scope.parent)."""

    scope_id: int
    public_id: str
    kind: str
    org: int                         # index of its organization
    obj: Any
    home: int | None = None          # contexts: the scope id they are defined in
    repo: int | None = None          # sessions: their repository's scope id


@dataclass
class Frag:
    obj: Fragment
    n: int
    org: int
    home: int
    scope_ids: frozenset[int]        # home + the contexts it was put in (from the spec)
    active: bool
    owner: int | None
    language: str

    @property
    def markers(self) -> tuple[str, ...]:
        return (self.obj.public_id, fragment_title(self.n), fragment_marker(self.n))


@dataclass
class World:
    tag: str
    orgs: list[Organization]
    nodes: list[Node]
    users: list[Any]
    memberships: dict[int, dict[int, str]]          # user index → org index → role
    grants: dict[int, set[int]]                     # user index → granted scope ids
    tokens: list[tuple[ApiToken, str, set[int], bool]]  # token, raw, bound scopes, active
    subscriptions: set[tuple[int, int]]             # (subscriber scope id, context scope id)
    published: set[int]                             # context scope ids that are published
    frags: list[Frag]
    pins: list[tuple[int, int]]                     # (fragment index, scope id)
    nudges: list[tuple[int, int, bool]]             # (fragment index, owner index, escalated)
    jobs: list[tuple[IngestionJob, int]]            # job, scope id
    traces: list[tuple[RetrievalTrace, int, frozenset[int]]]  # trace, org index, scope ids
    by_id: dict[int, Node] = field(default_factory=dict)

    def node(self, scope_id: int) -> Node:
        return self.by_id[scope_id]

    def of_kind(self, kind: str) -> list[Node]:
        return [n for n in self.nodes if n.kind == kind]


def _random_id(prefix: str) -> str:
    return prefix + "_" + "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(14))


def build(spec: dict) -> World:
    """Create the spec's world through the models and services (inside the caller's
    savepoint) and describe it for the oracle."""
    tag = "".join(secrets.choice("abcdefghjkmnpqrstvwxyz") for _ in range(5))
    pick = lambda seq, i: seq[i % len(seq)]  # noqa: E731
    orgs = [Organization.objects.create(slug=f"{tag}-org{i}", name=f"Org {i}")
            for i in range(spec["orgs"])]
    nodes: list[Node] = [Node(o.scope_id, o.scope.public_id, "org", i, o)
                         for i, o in enumerate(orgs)]
    for n, o in enumerate(spec["repos"]):
        repo = Repository.objects.create(org=pick(orgs, o), slug=f"{tag}-repo{n}", name="r")
        nodes.append(Node(repo.scope_id, repo.public_id, "repo", o % len(orgs), repo))
    for n, o in enumerate(spec["personas"]):
        persona = Persona.objects.create(org=pick(orgs, o), slug=f"{tag}-persona{n}", name="p")
        nodes.append(Node(persona.scope_id, persona.public_id, "persona", o % len(orgs),
                          persona))
    for n, (o, attach, r) in enumerate(spec["sessions"]):
        org = pick(orgs, o)
        repos = [x for x in nodes if x.kind == "repo" and x.org == o % len(orgs)]
        repo = pick(repos, r) if attach and repos else None
        session = Session.objects.create(org=org, repository=repo.obj if repo else None,
                                         external_id=f"{tag}-sess{n}")
        nodes.append(Node(session.scope_id, session.public_id, "session", o % len(orgs),
                          session, repo=repo.scope_id if repo else None))
    homes = list(nodes)
    published: set[int] = set()
    for n, (h, is_published) in enumerate(spec["contexts"]):
        home = pick(homes, h)
        ctx = Context.objects.create(org=orgs[home.org], home=home.obj.scope,
                                     slug=f"{tag}-cx{n}", name="c", published=is_published)
        nodes.append(Node(ctx.scope_id, ctx.public_id, "context", home.org, ctx,
                          home=home.scope_id))
        if is_published:
            published.add(ctx.scope_id)
    contexts = [n for n in nodes if n.kind == "context"]
    subscriptions: set[tuple[int, int]] = set()
    if contexts:
        for s, c in spec["subscriptions"]:
            subscriber, ctx = pick(homes, s), pick(contexts, c)
            ContextSubscription.objects.get_or_create(context=ctx.obj,
                                                      subscriber=subscriber.obj.scope)
            subscriptions.add((subscriber.scope_id, ctx.scope_id))
    users, memberships = [], {}
    for n, member_of in enumerate(spec["users"]):
        user = get_user_model().objects.create(username=f"{tag}-user{n}")
        users.append(user)
        memberships[n] = {}
        for o, role in member_of:
            if o % len(orgs) not in memberships[n]:
                Membership.objects.create(user=user, org=pick(orgs, o), role=role)
                memberships[n][o % len(orgs)] = role
    grants: dict[int, set[int]] = {n: set() for n in range(len(users))}
    for u, g in spec["grants"]:
        target = pick(homes, g)
        assign_perm(f"accounts.view_{type(target.obj).__name__.lower()}", pick(users, u),
                    target.obj)
        grants[u % len(users)].add(target.scope_id)
    tokens = []
    for n, (targets, state) in enumerate(spec["tokens"]):
        first = pick(nodes, targets[0])
        bound = {x.scope_id for x in (pick(nodes, t) for t in targets) if x.org == first.org}
        token, raw = create_token(orgs[first.org], f"{tag}-token{n}",
                                  [n_.obj.scope for n_ in nodes if n_.scope_id in bound])
        if state == "revoked":
            token.revoked_at = timezone.now()
        elif state == "expired":
            token.expires_at = timezone.now() - dt.timedelta(days=1)
        token.save()
        tokens.append((token, raw, bound, state == "active"))
    frags = []
    to_retire = []
    for n, f in enumerate(spec["fragments"]):
        home = pick(nodes, f["home"])
        in_contexts = {c.scope_id: c for c in (pick(contexts, i) for i in f["contexts"])
                       if c.org == home.org} if contexts else {}
        owner = users[f["owner"] % len(users)] if f["owner"] >= 0 else None
        fragment = create_fragment(SYSTEM, home.obj.scope, title=fragment_title(n),
                                   body=fragment_body(n), kind=f["kind"], owner=owner,
                                   language=f["language"],
                                   contexts=[c.obj for c in in_contexts.values()])
        if f["retired"]:
            to_retire.append(fragment)
        frags.append(Frag(fragment, n, home.org, home.scope_id,
                          frozenset({home.scope_id, *in_contexts}), not f["retired"],
                          f["owner"] % len(users) if owner else None, f["language"]))
    pins = []
    for fi, s in spec["pins"]:
        frag = pick(frags, fi)
        scope = pick([x for x in nodes if x.org == frag.org], s)
        pin_fragment(SYSTEM, frag.obj, scope.obj.scope)
        if (frags.index(frag), scope.scope_id) not in pins:
            pins.append((frags.index(frag), scope.scope_id))
    # Retired once pinned: a retired fragment cannot be pinned, a pin made before stays.
    for fragment in to_retire:
        retire_fragment(SYSTEM, fragment)
    nudges, nudged = [], set()
    for fi, u, escalated in spec["nudges"]:
        frag_index = fi % len(frags)
        if frag_index in nudged:
            continue  # one open nudge per fragment
        nudged.add(frag_index)
        Nudge.objects.create(fragment=frags[frag_index].obj, owner=pick(users, u),
                             state=NudgeState.ESCALATED if escalated else NudgeState.OPEN)
        nudges.append((frag_index, u % len(users), escalated))
    jobs = []
    for s in spec["jobs"]:
        scope = pick(nodes, s)
        jobs.append((IngestionJob.objects.create(org=orgs[scope.org], scope=scope.obj.scope,
                                                 source="/srv/docs"), scope.scope_id))
    traces = []
    for o, picks in spec["traces"]:
        org_index = o % len(orgs)
        in_org = [x for x in nodes if x.org == org_index]
        scope_ids = frozenset(pick(in_org, p).scope_id for p in picks)
        seen = [f for f in frags if f.scope_ids & scope_ids and f.active]
        trace = RetrievalTrace.objects.create(
            org=orgs[org_index], query="burst limiter", scope_ids=sorted(scope_ids),
            candidates=[{"id": f.obj.public_id, "final": 0.5} for f in seen],
            returned=[{"id": f.obj.public_id, "version": 1} for f in seen[:1]])
        traces.append((trace, org_index, scope_ids))
    reindex_fragments([f.obj.pk for f in frags])
    world = World(tag, orgs, nodes, users, memberships, grants, tokens, subscriptions,
                  published, frags, pins, nudges, jobs, traces)
    world.by_id = {n.scope_id: n for n in nodes}
    return world


# --- the oracle --------------------------------------------------------------------------------
def below(world: World, root: Node) -> set[int]:
    """``root`` and everything under it, from the spec's relations."""
    if root.kind == "org":
        return {n.scope_id for n in world.nodes if n.org == root.org}
    found = {root.scope_id}
    if root.kind == "repo":
        found |= {n.scope_id for n in world.of_kind("session") if n.repo == root.scope_id}
    found |= {n.scope_id for n in world.of_kind("context") if n.home in found}
    return found


def with_subscriptions(world: World, scopes: set[int]) -> set[int]:
    return scopes | {ctx for subscriber, ctx in world.subscriptions
                     if subscriber in scopes and ctx in world.published}


@dataclass(frozen=True)
class Principal:
    kind: str                 # "user" | "token"
    index: int

    def label(self) -> str:
        return f"{self.kind}{self.index}"


def readable(world: World, who: Principal) -> set[int]:
    if who.kind == "token":
        _token, _raw, bound, active = world.tokens[who.index]
        roots = bound if active else set()
    else:
        roots = {world.nodes[o].scope_id for o in world.memberships[who.index]}
        roots |= world.grants[who.index]
    closed: set[int] = set()
    for root in roots:
        closed |= below(world, world.node(root))
    return with_subscriptions(world, closed)


def visible_frags(world: World, scopes: set[int]) -> list[Frag]:
    return [f for f in world.frags if f.scope_ids & scopes]


def forbidden_markers(world: World, scopes: set[int]) -> list[str]:
    return [m for f in world.frags if not f.scope_ids & scopes for m in f.markers]


def navigable_orgs(world: World, scopes: set[int]) -> set[int]:
    """Organizations with a readable scope of their own (a subscribed context is not one)."""
    return {world.node(s).org for s in scopes if world.node(s).kind != "context"}


@dataclass(frozen=True)
class Ask:
    """A retrieval request: each ref is (node scope id | None for "missing", spelling)."""

    org: tuple[int | None, str]
    repo: tuple[int | None, str] | None = None
    persona: tuple[int | None, str] | None = None
    session: tuple[int | None, str] | None = None

    def parts(self) -> dict[str, tuple[int | None, str] | None]:
        return {"repo": self.repo, "persona": self.persona, "session": self.session}


def effective(world: World, who: Principal, ask: Ask) -> frozenset[int] | None:
    """The effective scope set of ``ask`` (None: refused), by the rule in docs/api.md."""
    can_read = readable(world, who)
    org_scope, _ = ask.org
    if org_scope is None:
        return None
    org = world.node(org_scope).org
    if not any(world.node(s).org == org for s in can_read):
        return None
    chain = []
    for ref in ask.parts().values():
        if ref is None:
            continue
        scope_id, _ = ref
        if scope_id is None or world.node(scope_id).org != org:
            return None     # does not exist in this organization
        chain.append(scope_id)
    if not chain or org_scope in can_read:
        chain.append(org_scope)
    if not set(chain) <= can_read:
        return None
    scopes = set(chain) | {n.scope_id for n in world.of_kind("context") if n.home in chain}
    return frozenset(with_subscriptions(world, scopes))


def spell(world: World, scope_id: int | None, style: str, kind: str) -> str:
    """The reference a client would type: public id or slug / external id; or a missing one
    of the same shape."""
    prefix = {"org": "org", "repo": "repo", "persona": "persona", "session": "sess"}[kind]
    if scope_id is None:
        return _random_id(prefix) if style == "id" else f"{world.tag}-missing-{kind}"
    obj = world.node(scope_id).obj
    if style == "id":
        return obj.public_id
    return obj.external_id if kind == "session" else obj.slug


def ask_body(world: World, ask: Ask, query: str) -> dict:
    scope = {"org_id": spell(world, ask.org[0], ask.org[1], "org")}
    for kind, ref in ask.parts().items():
        if ref is not None:
            scope[f"{'repo' if kind == 'repo' else kind}_id"] = spell(world, ref[0], ref[1],
                                                                      kind)
    return {"query": query, "scope": scope, "budget_tokens": 100000}


# --- strategies over a built world ----------------------------------------------------------
spellings = st.sampled_from(["id", "slug"])


def ref_of(world: World, kind: str) -> st.SearchStrategy:
    nodes = [n.scope_id for n in world.of_kind(kind)]
    options: list[int | None] = [None, *nodes]
    return st.tuples(st.sampled_from(options), spellings)


def asks(world: World, who: Principal) -> st.SearchStrategy[Ask]:
    """Half arbitrary requests (mostly refused), half built from what ``who`` may read."""
    orgs = [n.scope_id for n in world.of_kind("org")]
    optional = lambda kind: st.none() | ref_of(world, kind)  # noqa: E731
    arbitrary = st.builds(Ask, org=st.tuples(st.sampled_from([*orgs, None]), spellings),
                          repo=optional("repo"), persona=optional("persona"),
                          session=optional("session"))
    can_read = [world.node(s) for s in sorted(readable(world, who))
                if world.node(s).kind != "context"]
    if not can_read:
        return arbitrary

    def within(node: Node, style: str, persona: int | None) -> Ask:
        org = world.nodes[node.org].scope_id
        fields = {}
        if node.kind == "session":
            fields["session"] = (node.scope_id, style)
            if node.repo is not None:
                fields["repo"] = (node.repo, style)
        elif node.kind in ("repo", "persona"):
            fields[node.kind] = (node.scope_id, style)
        personas = [n for n in world.of_kind("persona") if n.org == node.org]
        if persona is not None and personas and "persona" not in fields:
            fields["persona"] = (personas[persona % len(personas)].scope_id, style)
        return Ask(org=(org, style), **fields)

    return st.one_of(arbitrary, st.builds(within, st.sampled_from(can_read), spellings,
                                          st.none() | st.integers(0, 3)))


queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


def principals(world: World) -> list[Principal]:
    return ([Principal("user", i) for i in range(len(world.users))]
            + [Principal("token", i) for i in range(len(world.tokens))])


# --- clients ---------------------------------------------------------------------------------
def api_client(world: World, who: Principal) -> APIClient:
    client = APIClient()
    if who.kind == "token":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.tokens[who.index][1]}")
    else:
        client.force_authenticate(world.users[who.index])
    return client


def console_client(world: World, user_index: int) -> Client:
    client = Client()
    client.force_login(world.users[user_index])
    return client


CSRF = [re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]+'),
        re.compile(r'("X-CSRFToken": ")[^"]+')]


def normalized(response, *ids: str) -> tuple[int, str, str]:
    """Status, Location and body with the requested ids and per-render CSRF tokens masked."""
    body = response.content.decode()
    location = response.get("Location", "")
    for value in ids:
        body, location = body.replace(value, "<ID>"), location.replace(value, "<ID>")
    for pattern in CSRF:
        body = pattern.sub(r"\1<CSRF>", body)
    return response.status_code, location, body


def assert_no_markers(response, markers: Iterable[str], where: str) -> None:
    body = response.content.decode()
    leaked = [m for m in markers if m in body]
    assert not leaked, f"{where} shows out-of-scope fragments {leaked}"


# --- fixtures --------------------------------------------------------------------------------
SETTINGS = settings(max_examples=6, deadline=None, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture
def warm(db, settings, tmp_path):  # noqa: F811 - pytest-django's settings fixture
    """Vectors for every body a generated fragment can have, in the vector cache that
    ``reindex_fragments`` reads before it encodes anything.

    They are fixed pseudo-random unit vectors, not the model's: which fragments leak does not
    depend on what the vectors say (with at most ten fragments and k_dense = 100 the dense leg
    returns every fragment its filter lets through), and it spares loading the model in this
    process (the query encoder still embeds each query with it)."""
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    hashes = [content_hash(fragment_body(n)) for n in range(MAX_FRAGMENTS)]
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((MAX_FRAGMENTS, EMBEDDING_DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for namespace in NAMESPACES:
        cache_vectors(active_generation(namespace), hashes, vectors)


def in_savepoint(check: Callable[[World], None], spec: dict, stats) -> None:
    cache.clear()  # the per-principal throttle counts live in Redis
    with transaction.atomic():
        world = build(spec)
        stats["worlds"] += 1
        check(world)
        transaction.set_rollback(True)


# --- 1. retrieval over the API -----------------------------------------------------------------
@SETTINGS
@given(spec=world_specs, data=st.data())
def test_retrieval_and_traces_hold_nothing_out_of_scope(warm, leak_stats, spec, data):
    def check(world: World) -> None:
        for who in principals(world):
            client = api_client(world, who)
            active = who.kind == "user" or world.tokens[who.index][3]
            can_read = readable(world, who)
            whoami = client.get("/api/whoami")
            if not active:
                assert whoami.status_code == 401
            else:
                expected = {world.node(s).public_id for s in can_read}
                assert {s["id"] for s in whoami.json()["scopes"]} == expected, who
            for ask in data.draw(st.lists(asks(world, who), min_size=1, max_size=2), label="asks"):
                leak_stats["retrieve"] += 1
                query = data.draw(queries, label="query")
                response = client.post("/api/contexts/retrieve", ask_body(world, ask, query),
                                       format="json")
                markers = forbidden_markers(world, can_read)
                assert_no_markers(response, markers, f"retrieve as {who.label()}")
                allowed = effective(world, who, ask) if active else None
                if not active:
                    assert response.status_code == 401
                    continue
                if allowed is None:
                    assert response.status_code == 403, (ask, response.content)
                    assert response.json()["error"]["message"] == SCOPE_REFUSED
                    continue
                assert response.status_code == 200, (ask, response.content)
                check_answer(world, who, allowed, response.json(), client, leak_stats)

    in_savepoint(check, spec, leak_stats)


def check_answer(world: World, who: Principal, allowed: frozenset[int], body: dict,
                 client: APIClient, leak_stats) -> None:
    """The answer, the stored trace row and ``GET /api/traces/{id}`` hold only fragments in
    the effective scopes; other principals see the trace iff they read all its scopes."""
    in_scope = {f.obj.public_id for f in world.frags if f.scope_ids & allowed and f.active}
    returned = {item["id"] for item in body["fragments"]}
    assert returned <= in_scope, (who, returned - in_scope)
    leak_stats["returned_fragments"] += len(returned)
    trace = RetrievalTrace.objects.get(public_id=body["trace_id"])
    assert set(trace.scope_ids) == set(allowed)
    # Only fragments the request may return are traced (a retired pinned one is not a
    # candidate), and never by an internal id.
    traceable = in_scope
    stage_ids = {c["id"] for c in trace.candidates} | {r["id"] for r in trace.returned}
    assert stage_ids <= traceable, (who, stage_ids - traceable)
    stored = client.get(f"/api/traces/{trace.public_id}")
    assert stored.status_code == 200
    assert {c["id"] for c in stored.json()["candidates"]} <= traceable
    assert set(stored.json()["scopes"]) == {world.node(s).public_id for s in allowed}
    for other in principals(world):
        if other == who:
            continue
        leak_stats["trace_reads"] += 1
        other_client = api_client(world, other)
        answer = other_client.get(f"/api/traces/{trace.public_id}")
        missing = other_client.get(f"/api/traces/{_random_id('tr')}")
        active = other.kind == "user" or world.tokens[other.index][3]
        if active and allowed <= readable(world, other):
            assert answer.status_code == 200
        else:
            assert (answer.status_code, answer.json()) == (missing.status_code, missing.json())


# --- 2. console pages ----------------------------------------------------------------------------
def counts_for(world: World, can_read: set[int], scope_id: int) -> dict[str, int]:
    """What the organization page shows for one scope, from the spec."""
    here = [f for f in visible_frags(world, can_read) if f.home == scope_id]
    stale = {world.frags[i].obj.pk for i, _owner, _esc in world.nudges}
    return {"active": sum(f.active for f in here), "total": len(here),
            "stale": sum(f.active and f.obj.pk in stale for f in here),
            # A pin counts where its scope is readable too: a repository reader is not told of
            # pins on the organization's own scope, even of fragments it can read.
            "pins": sum(1 for fi, s in world.pins
                        if s == scope_id and s in can_read
                        and world.frags[fi].scope_ids & can_read)}


def check_console_user(world: World, user: int, data, leak_stats) -> None:
    who = Principal("user", user)
    can_read = readable(world, who)
    orgs = navigable_orgs(world, can_read)
    markers = forbidden_markers(world, can_read)
    seen = visible_frags(world, can_read)
    client = console_client(world, user)

    def get(url: str, expected: int):
        leak_stats["console_pages"] += 1
        response = client.get(url)
        assert response.status_code == expected, (url, response.status_code)
        assert_no_markers(response, markers, url)
        return response

    home = get("/", 200)
    assert {o.slug for o in home.context["org_cards"]} == {world.orgs[o].slug for o in orgs}
    for card in home.context["org_cards"]:
        o = world.orgs.index(card)
        assert card.fragment_count == sum(f.active for f in seen if f.org == o), card
    user_role = world.memberships[user]
    inbox_expected = {world.frags[i].obj.pk for i, owner, _ in world.nudges
                      if owner == user and world.frags[i].scope_ids & can_read}
    assert home.context["inbox_count"] == len(inbox_expected)

    for o, org in enumerate(world.orgs):
        page = get(f"/o/{org.slug}/", 200 if o in orgs else 404)
        if o not in orgs:
            continue
        shown = {k: page.context["org_counts"][k] for k in ("active", "total", "stale", "pins")}
        assert shown == counts_for(world, can_read, org.scope_id)
        for key in ("repositories", "personas", "sessions", "bundles"):
            shown = page.context[key]
            kind = {"repositories": "repo", "personas": "persona", "sessions": "session",
                    "bundles": "context"}[key]
            assert {x.scope_id for x in shown} == {
                n.scope_id for n in world.of_kind(kind) if n.org == o and n.scope_id in can_read}
            for obj in shown:
                counts = {k: obj.counts[k] for k in ("active", "total", "stale", "pins")}
                assert counts == counts_for(world, can_read, obj.scope_id), (key, obj)
        get(f"/o/{org.slug}/traces/", 200)
        query = data.draw(queries, label="console query")
        get(f"/o/{org.slug}/search/?query={query.replace(' ', '+')}", 200)

    for node in data.draw(st.lists(st.sampled_from(world.nodes), max_size=6, unique_by=id),
                          label="scopes"):
        ok = node.scope_id in can_read
        listing = get(f"/scopes/{node.public_id}/fragments/?status=all", 200 if ok else 404)
        if ok:
            listed = {f.public_id for f in listing.context["page"].object_list}
            here = [f for f in world.frags if f.home == node.scope_id]
            assert listed == {f.obj.public_id for f in here}
            languages = [c[0] for c in listing.context["form"].fields["language"].choices
                         if c[0]]
            assert set(languages) <= {f.language for f in here}
        board = get(f"/scopes/{node.public_id}/pins/", 200 if ok else 404)
        if ok:
            pinned = {p.fragment.public_id for p in board.context["pins"]}
            assert pinned == {world.frags[fi].obj.public_id for fi, s in world.pins
                              if s == node.scope_id and world.frags[fi].scope_ids & can_read}

    inbox = get("/inbox/", 200)
    assert {n.fragment_id for n in inbox.context["nudges"]} == inbox_expected
    led = {o for o, role in user_role.items() if role in (Role.TECH_LEAD, Role.ADMIN)}
    assert {n.fragment_id for n in inbox.context["escalated"]} == {
        world.frags[i].obj.pk for i, owner, escalated in world.nudges
        if escalated and owner != user and world.frags[i].org in led
        and world.frags[i].scope_ids & can_read}
    assert {f.public_id for f in inbox.context["fragments"].object_list} == {
        f.obj.public_id for f in seen if f.owner == user and f.active}

    for frag in data.draw(st.lists(st.sampled_from(world.frags), max_size=4, unique_by=id),
                          label="fragments"):
        get(f"/fragments/{frag.obj.public_id}/", 200 if frag.scope_ids & can_read else 404)
    for trace, o, scope_ids in world.traces:
        listed = o in orgs and scope_ids <= can_read
        get(f"/traces/{trace.public_id}/", 200 if listed else 404)
    for job, scope_id in world.jobs:
        get(f"/jobs/{job.public_id}/", 200 if scope_id in can_read else 404)


@SETTINGS
@given(spec=world_specs, data=st.data())
def test_console_pages_show_nothing_out_of_scope(warm, leak_stats, spec, data):
    def check(world: World) -> None:
        user = data.draw(st.integers(0, len(world.users) - 1), label="user")
        check_console_user(world, user, data, leak_stats)

    in_savepoint(check, spec, leak_stats)


# --- 3. another organization's ids answer like ids that do not exist -------------------------
def compare(leak_stats, markers: list[str], send: Callable[[str], Any], foreign: str,
            missing: str, statuses: tuple[int, ...], what: str, *, echoes: bool = False) -> None:
    """``send(ref)`` for an unreadable object and for a made-up one of the same shape: same
    status, same Location, same body (the ids themselves masked), nothing out of scope.
    ``echoes``: a form that shows back what was typed (it must do so for both alike)."""
    leak_stats["foreign_vs_missing"] += 1
    a, b = send(foreign), send(missing)
    assert_no_markers(a, markers, what)
    assert echoes or foreign not in a.content.decode(), f"{what} echoes the unreadable id"
    left, right = normalized(a, foreign, missing), normalized(b, foreign, missing)
    assert left[0] in statuses, (what, left[0], a.content[:300])
    assert left == right, (what, left[:2], right[:2], "\n".join(difflib.unified_diff(
        left[2].splitlines(), right[2].splitlines(), "unreadable", "missing", lineterm="")))


def check_api_ids(world: World, who: Principal, data, leak_stats) -> None:
    can_read = readable(world, who)
    markers = forbidden_markers(world, can_read)
    client = api_client(world, who)
    post = lambda url, body, **kw: client.post(url, body, format=kw.get("fmt", "json"))  # noqa: E731
    hidden_traces = [t for t, _o, scopes in world.traces if not scopes <= can_read]
    for trace in hidden_traces[:1]:
        compare(leak_stats, markers, lambda ref: client.get(f"/api/traces/{ref}"),
                trace.public_id, _random_id("tr"), (404,), "GET /api/traces")
    for job, _s in [j for j in world.jobs if j[1] not in can_read][:1]:
        compare(leak_stats, markers, lambda ref: client.get(f"/api/jobs/{ref}"),
                job.public_id, _random_id("job"), (404,), "GET /api/jobs")
    hidden = [f for f in world.frags if not f.scope_ids & can_read]
    if hidden:
        frag = data.draw(st.sampled_from(hidden), label="hidden fragment")
        compare(leak_stats, markers,
                lambda ref: post(f"/api/fragments/{ref}/feedback", {"signal": "helped"}),
                frag.obj.public_id, _random_id("frag"), (404,), "POST feedback")
    # Scopes: an organization nothing of which is readable, then objects inside one that is.
    for node in world.of_kind("org"):
        if node.org in {world.node(s).org for s in can_read}:
            continue
        for style in ("id", "slug"):
            missing = spell(world, None, style, "org")
            compare(leak_stats, markers,
                    lambda ref: post("/api/contexts/retrieve",
                                     {"query": "limiter", "scope": {"org_id": ref}}),
                    spell(world, node.scope_id, style, "org"), missing, (403,), "retrieve org")
            compare(leak_stats, markers,
                    lambda ref: post("/api/fragments", {"body": "x", "scope": {"org_id": ref}}),
                    spell(world, node.scope_id, style, "org"), missing, (403,), "write org")
    resolvable = sorted({world.node(s).org for s in can_read})
    if not resolvable:
        return
    org = world.orgs[data.draw(st.sampled_from(resolvable), label="org")]
    for kind, field_name in (("repo", "repo_id"), ("persona", "persona_id"),
                             ("session", "session_id")):
        unreadable = [n for n in world.of_kind(kind) if n.scope_id not in can_read]
        if not unreadable:
            continue
        node = data.draw(st.sampled_from(unreadable), label=f"unreadable {kind}")
        style = data.draw(spellings, label="spelling")
        foreign, missing = spell(world, node.scope_id, style, kind), spell(world, None, style,
                                                                          kind)

        def ask(ref: str, path: str = "/api/contexts/retrieve", key: str = field_name) -> Any:
            scope = {"org_id": org.slug, key: ref}
            text = {"query": "limiter burst"} if "retrieve" in path else {"body": "x"}
            return post(path, {**text, "scope": scope})

        compare(leak_stats, markers, ask, foreign, missing, (403,), f"retrieve {kind}")
        compare(leak_stats, markers, lambda ref: ask(ref, "/api/fragments"), foreign, missing,
                (403,), f"write {kind}")
    hidden_contexts = [n for n in world.of_kind("context")
                       if n.scope_id not in can_read and n.obj.org_id == org.pk]
    for ctx in hidden_contexts[:1]:
        def upload(ref: str) -> Any:
            from django.core.files.uploadedfile import SimpleUploadedFile

            return client.post("/api/sources", {
                "org_id": org.slug, "context": ref,
                "files": [SimpleUploadedFile("a.md", b"# A\n\ntext\n")]}, format="multipart")

        compare(leak_stats, markers, upload, ctx.obj.slug, f"{world.tag}-missing-cx",
                (400, 403), "upload into a context")


def check_console_ids(world: World, user: int, data, leak_stats) -> None:
    who = Principal("user", user)
    can_read = readable(world, who)
    markers = forbidden_markers(world, can_read)
    client = console_client(world, user)
    seen = visible_frags(world, can_read)
    readable_nodes = [n for n in world.nodes if n.scope_id in can_read]
    mine = world.users[user].username
    hidden = [f for f in world.frags if not f.scope_ids & can_read]
    if hidden:
        fid = data.draw(st.sampled_from(hidden), label="hidden fragment").obj.public_id
        scope = readable_nodes[0].public_id if readable_nodes else _random_id("repo")
        routes: list[tuple[str, str, dict]] = [
            ("get", "/fragments/{}/", {}), ("get", "/fragments/{}/edit", {}),
            ("get", "/fragments/{}/diff?a=1&b=1", {}),
            ("post", "/fragments/{}/pin", {"scope": scope}),
            ("post", "/fragments/{}/unpin", {"scope": scope}),
            ("post", "/fragments/{}/retire", {}),
            ("post", "/fragments/{}/negative", {"value": "1"}),
            ("post", "/fragments/{}/supersede", {"replacement": "x"}),
            ("post", "/fragments/{}/owner", {"owner": mine}),
            ("post", "/inbox/{}/answer", {"answer": "still_accurate"}),
            ("post", f"/scopes/{scope}/pins/{{}}/move", {"direction": "up"}),
            ("post", f"/scopes/{scope}/pins/{{}}/remove", {}),
            ("post", f"/scopes/{scope}/pins/{{}}/expiry", {}),
        ]
        for method, url, form in routes:
            compare(leak_stats, markers,
                    lambda ref, m=method, u=url, f=form: getattr(client, m)(u.format(ref), f),
                    fid, _random_id("frag"), (404,), f"{method} {url}")
        if seen:  # naming the hidden fragment as a visible one's replacement
            visible_id = seen[0].obj.public_id
            compare(leak_stats, markers,
                    # Followed, so that the message it leaves is compared too (and consumed).
                    lambda ref: client.post(f"/fragments/{visible_id}/supersede",
                                            {"replacement": ref}, follow=True),
                    fid, _random_id("frag"), (200, 403), "supersede by a hidden fragment")
    unreadable = [n for n in world.nodes if n.scope_id not in can_read]
    if unreadable:
        sid = data.draw(st.sampled_from(unreadable), label="hidden scope").public_id
        some = seen[0].obj.public_id if seen else _random_id("frag")
        for method, url, form in [
            ("get", "/scopes/{}/fragments/", {}), ("get", "/scopes/{}/pins/", {}),
            ("post", "/scopes/{}/pins/reorder", {"order": some}),
            ("post", f"/scopes/{{}}/pins/{some}/move", {"direction": "up"}),
            ("post", f"/scopes/{{}}/pins/{some}/remove", {}),
        ] + ([("post", f"/fragments/{some}/pin", {"scope": "{}"})] if seen else []):
            compare(leak_stats, markers,
                    lambda ref, m=method, u=url, f=form: getattr(client, m)(
                        u.format(ref), {k: v.format(ref) for k, v in f.items()}),
                    sid, _random_id("repo"), (404,), f"{method} {url}")
    for trace, o, scopes in world.traces:
        if not (scopes <= can_read and o in navigable_orgs(world, can_read)):
            compare(leak_stats, markers, lambda ref: client.get(f"/traces/{ref}/"),
                    trace.public_id, _random_id("tr"), (404,), "trace page")
            break
    for job, scope_id in world.jobs:
        if scope_id not in can_read:
            compare(leak_stats, markers, lambda ref: client.get(f"/jobs/{ref}/"),
                    job.public_id, _random_id("job"), (404,), "job page")
            break
    orgs = navigable_orgs(world, can_read)
    for o, org in enumerate(world.orgs):
        if o in orgs:
            continue
        missing = f"{world.tag}-missing-org"
        for method, url in [("get", "/o/{}/"), ("get", "/o/{}/search/?query=x"),
                            ("get", "/o/{}/ingest/"), ("get", "/o/{}/traces/"),
                            ("get", "/o/{}/tokens/"), ("get", "/switch/?org={}"),
                            ("post", "/o/{}/ingest/path"), ("post", "/o/{}/tokens/")]:
            compare(leak_stats, markers,
                    lambda ref, m=method, u=url: getattr(client, m)(u.format(ref)),
                    org.slug, missing, (404,), f"{method} {url}")
        break
    # Inside an organization the user navigates: the search form's session field.
    for o in sorted(orgs)[:1]:
        sessions = [n for n in world.of_kind("session") if n.scope_id not in can_read]
        for node in sessions[:1]:
            style = data.draw(spellings, label="session spelling")
            compare(leak_stats, markers,
                    lambda ref, slug=world.orgs[o].slug: client.get(
                        f"/o/{slug}/search/", {"query": "limiter", "session": ref}),
                    spell(world, node.scope_id, style, "session"),
                    spell(world, None, style, "session"), (200,), "search in a hidden session",
                    echoes=True)


@SETTINGS
@given(spec=world_specs, data=st.data())
def test_unreadable_ids_answer_exactly_like_missing_ones(warm, leak_stats, spec, data):
    def check(world: World) -> None:
        user = data.draw(st.integers(0, len(world.users) - 1), label="user")
        check_console_ids(world, user, data, leak_stats)
        active = [i for i, (_t, _raw, _bound, ok) in enumerate(world.tokens) if ok]
        tokens = [Principal("token", data.draw(st.sampled_from(active), label="token"))
                  ] if active else []
        for who in [Principal("user", user), *tokens]:
            check_api_ids(world, who, data, leak_stats)

    in_savepoint(check, spec, leak_stats)


# --- 4. row-level security when the application's filter is wrong -----------------------------
# Tables the retrieval role reads with no row-level security: scopes, repositories and
# embedding generations, none of which says anything about a fragment. Pins, source pointers
# and documents are guarded through their fragment (tests/domain/test_rls.py). Everything else
# that holds text (versions, audit, traces, nudges, the embedding partitions) is refused.
UNGUARDED = {"accounts_scope", "accounts_repository", "contexts_embeddinggeneration"}
# A persona's compose weights and half-lives, read by retrieval (migration 0021): no text.
# A git source's permalink template, joined to the citations (migration 0031): not its URL,
# which may hold a credential.
# Where a fragment no file brought was written (migration 0037): a version's fragment, number,
# editor and time, an approved proposal's id and decision time, a person's username — no text.
COLUMNS_GRANTED = {("accounts_persona", column)
                   for column in ("id", "w_r", "w_f", "w_c", "w_p", "halflife_days")} | {
    ("contexts_source", column) for column in ("org_id", "repository_id", "web_url_template")} | {
    ("contexts_fragmentversion", column)
    for column in ("org_id", "fragment_id", "number", "editor_id", "created_at")} | {
    ("contexts_proposal", column)
    for column in ("public_id", "result_fragment_id", "decided_at")} | {
    ("auth_user", column) for column in ("id", "username")}
# Guarded through the fragment they name (migration 0013; versions and proposals, 0037); a git
# source through its repository or a readable document of it (0031).
GUARDED = {"contexts_fragment", "contexts_embedding", "contexts_pin", "contexts_sourcepointer",
           "contexts_sourcedocument", "contexts_source", "contexts_fragmentversion",
           "contexts_proposal"}
TEXT_TABLES = ["contexts_fragmentversion", "contexts_auditevent", "contexts_retrievaltrace",
               "contexts_nudge", "contexts_fragment_contexts"]


def rows(sql: str, params: Iterable[Any] = ()) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        return cursor.fetchall()


def refused(sql: str) -> bool:
    """Whether the retrieval role may not run ``sql`` at all (its savepoint keeps the role)."""
    try:
        with transaction.atomic():
            rows(sql)
    except DatabaseError as exc:
        return "permission denied" in str(exc)
    return False


@SETTINGS
@given(spec=world_specs, data=st.data())
def test_row_level_security_alone_keeps_other_scopes_out(warm, leak_stats, spec, data):
    from contexts.retrieval import dense
    from contexts.retrieval.rows import CandidateRows
    from contexts.retrieval.types import RetrievalRequest

    def check(world: World) -> None:
        # The scopes a real request would be allowed (or, half the time, any subset at all).
        who = data.draw(st.sampled_from(principals(world)), label="principal")
        ask = data.draw(asks(world, who), label="ask")
        active = who.kind == "user" or world.tokens[who.index][3]
        allowed = effective(world, who, ask) if active else None
        if allowed is None or data.draw(st.booleans(), label="arbitrary subset"):
            subset = data.draw(st.lists(st.sampled_from(world.nodes), max_size=4),
                               label="subset")
            allowed = frozenset(n.scope_id for n in subset)
        everything = [n.scope_id for n in world.nodes]
        inside = {f.obj.pk for f in world.frags if f.scope_ids & allowed}
        embedded = {f.obj.pk for f in world.frags if f.active}
        org_ids = [o.pk for o in world.orgs]
        with retrieval_scope(allowed):
            leak_stats["rls_queries"] += 1
            # No WHERE on scope at all, through SQL and through the ORM.
            assert {r[0] for r in rows("SELECT id FROM contexts_fragment")} == inside
            assert {r[0] for r in rows("SELECT fragment_id FROM contexts_embedding")} == (
                inside & embedded)
            assert set(Fragment.objects.values_list("pk", flat=True)) == inside
            assert set(Embedding.objects.values_list("fragment_id", flat=True)) == (
                inside & embedded)
            # Pins, source pointers and documents are visible exactly with their fragment.
            assert {r[0] for r in rows("SELECT fragment_id FROM contexts_pin")} <= inside
            assert {r[0] for r in rows("SELECT fragment_id FROM contexts_sourcepointer")} \
                <= inside
            # Versions and approved proposals too (the columns retrieval reads, 0037).
            assert {r[0] for r in rows("SELECT fragment_id FROM contexts_fragmentversion")} \
                <= inside
            assert {r[0] for r in rows("SELECT result_fragment_id FROM contexts_proposal")} \
                <= inside
            documents = {r[0] for r in rows("SELECT id FROM contexts_sourcedocument")}
            assert documents == {r[0] for r in rows(
                "SELECT document_id FROM contexts_sourcepointer")}
            assert rows("SELECT count(*) FROM contexts_fragment WHERE NOT scope_ids && %s::int[]",
                        [list(allowed)])[0][0] == 0
            # The production queries with their own scope filter widened to every scope.
            vectors = {tuple(g.pk for g in dense.generations().values()):
                       np.ones(EMBEDDING_DIM, dtype=np.float32)}
            for org_id in org_ids:
                # as_of: every status, so retired fragments are asked for too.
                request = RetrievalRequest(query="x", org_id=org_id,
                                           scope_ids=frozenset(everything), chain=(),
                                           as_of=timezone.now())
                dense_rows = CandidateRows(request)
                hits = dense.search(request, vectors, dense_rows)
                assert {pk for pk, _ in hits} <= inside and set(dense_rows.by_pk) <= inside
                fetched = CandidateRows(request, wanted={f.obj.pk for f in world.frags})
                fetched.read(public_ids={f.obj.public_id for f in world.frags})
                assert set(fetched.by_pk) <= inside
            # Direct reads of what holds text elsewhere are refused outright.
            for table in [*TEXT_TABLES, *(f"contexts_embedding_p{o}" for o in org_ids)]:
                assert refused(f"SELECT * FROM {table} LIMIT 1"), table
        leak_stats["rls_rows_hidden"] += len(world.frags) - len(inside)

    in_savepoint(check, spec, leak_stats)


@pytest.mark.django_db
def test_the_retrieval_role_reads_text_only_through_row_level_security():
    """An inventory: a new table granted to the retrieval role must have a policy, or be
    added to UNGUARDED here after checking it holds no fragment text."""
    granted = {r[0] for r in rows(
        "SELECT table_name FROM information_schema.role_table_grants "
        "WHERE grantee = 'contexts_retrieval' AND privilege_type = 'SELECT'")}
    guarded = {r[0] for r in rows(
        "SELECT c.relname FROM pg_class c JOIN pg_policies p ON p.tablename = c.relname "
        "WHERE c.relrowsecurity AND 'contexts_retrieval' = ANY(p.roles)")}
    assert guarded == GUARDED
    assert granted - guarded == UNGUARDED
    # Columns granted one by one (a table grant lists every column here too).
    columns = {r for r in rows(
        "SELECT table_name, column_name FROM information_schema.column_privileges "
        "WHERE grantee = 'contexts_retrieval' AND privilege_type = 'SELECT'")
        if r[0] not in granted}
    assert columns == COLUMNS_GRANTED
