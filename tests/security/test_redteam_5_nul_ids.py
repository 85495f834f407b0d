"""Red-team finding 5: a NUL byte in an id answered 500 (PostgreSQL refuses NUL in text, and the
driver raised before any lookup could say "not found").

Every URL pattern with a parameter is walked from the resolver (so a new one is covered without
editing this test), and each parameter in turn gets NUL and other control characters while the
others stay valid, over GET and POST, as a superuser in the console and as an agent token. Then
the ids that arrive in query strings and form fields, and the MCP tool's argument. All must be
a 4xx — 404 for a path that names nothing, 400 naming the field otherwise — and never a 500.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote, urlencode

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RoutePattern
from rest_framework.test import APIClient

from accounts.models import Role
from contexts.kernel.ids import InvalidId, parse_public_id, parse_slug
from contexts.web import health
from tests.api.conftest import as_token, world  # noqa: F401 - fixture
from tests.domain.conftest import cast  # noqa: F401 - fixture
from tests.factories import MembershipFactory, UserFactory
from tests.security.mcp_process import serve, tool_error

# NUL (what PostgreSQL refuses), other C0 controls, DEL, and NUL inside a plausible id.
HOSTILE = ["\x00", "frag_\x00x", "tr_\x00", "\x01", "\x1f", "\x7f", "\n", "a\tb", "\r\n"]
PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def routes(resolver: URLResolver | None = None, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(route, view name) of every pattern, includes flattened; regex patterns are yielded
    with their raw regex so the caller can see them."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        pattern = entry.pattern
        text = str(pattern) if isinstance(pattern, RoutePattern) else f"<regex>{pattern}"
        if isinstance(entry, URLResolver):
            yield from routes(entry, prefix + text)
        else:
            assert isinstance(entry, URLPattern)
            yield prefix + text, entry.lookup_str


def parameterised_routes() -> list[tuple[str, str]]:
    found = [(route, view) for route, view in routes() if "<" in route]
    regex = [(route, view) for route, view in found if "<regex>" in route]
    # Django's admin has one regex pattern (the app index), restricted to the installed apps'
    # labels: nothing else may hide an id from this walk.
    assert all(view.startswith("django.contrib.admin") for _, view in regex), regex
    return [(route, view) for route, view in found if "<regex>" not in route]


def own(view: str) -> bool:
    return view.startswith(("contexts.", "accounts."))


def test_the_walk_covers_the_ids_the_red_team_used():
    found = {route for route, _ in parameterised_routes()}
    for route in ["api/traces/", "api/jobs/", "api/fragments/", "o/", "scopes/", "fragments/",
                  "jobs/", "traces/", "governance/fragments/", "governance/nudges/",
                  "admin/"]:
        assert any(r.startswith(route) for r in found), route


@pytest.fixture
def valid(cast, world) -> dict[str, str]:  # noqa: F811
    """A value per parameter name that resolves, so that the hostile one is the only fault."""
    return {"slug": cast.org.slug, "scope_id": cast.repo.scope.public_id,
            "fragment_id": world.repo_limiter.public_id,
            "public_id": world.repo_limiter.public_id, "token_id": cast.token.public_id,
            "answer": "still-valid", "object_id": "1", "content_type_id": "1", "pk": "1"}


def url(route: str, values: dict[str, str]) -> str:
    return "/" + PARAMETER.sub(lambda m: quote(values[m["name"]], safe=""), route)


@pytest.fixture
def superuser(cast) -> Client:  # noqa: F811
    admin = UserFactory(username="root", is_superuser=True, is_staff=True)
    MembershipFactory(user=admin, org=cast.org, role=Role.ADMIN)
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    return client


@pytest.fixture
def agent(cast) -> APIClient:  # noqa: F811
    return as_token(APIClient(raise_request_exception=False), cast.raw_token)


@pytest.mark.slow  # a sweep: every route × parameter × character × client × method
def test_control_characters_in_any_path_parameter_never_answer_500(superuser, agent, valid):
    failures, own_answers, tried = [], [], 0
    for route, view in parameterised_routes():
        names = [m["name"] for m in PARAMETER.finditer(route)]
        for name in names:
            for hostile in HOSTILE:
                path = url(route, {**{n: valid.get(n, "x") for n in names}, name: hostile})
                for who, client in (("superuser", superuser), ("agent", agent)):
                    for method in ("get", "post"):
                        # A body the feedback endpoint accepts: the id is the only fault.
                        data = {"signal": "helped"} if method == "post" else None
                        status = getattr(client, method)(path, data).status_code
                        tried += 1
                        if status >= 500:
                            failures.append((who, method.upper(), path, status))
                        elif own(view) and who == "superuser":
                            own_answers.append((method.upper(), path, status))
    assert not failures, f"{len(failures)} of {tried}: {failures[:20]}"
    # The project's own patterns refuse the malformed id before any view runs: "not found".
    wrong = [answer for answer in own_answers if answer[2] != 404]
    assert not wrong, wrong[:20]


# Every query parameter and form field the console and governance views read.
FIELDS = ["org", "scope", "token", "q", "page", "owner", "kind", "status", "stale", "pinned",
          "negative", "language", "sort", "next", "partial", "order", "direction", "query",
          "repo", "persona", "session", "a", "b", "replacement", "reason", "title", "body",
          "value", "action", "new_owner", "version", "answer", "based_on_version", "scopes",
          "name", "expires_in_days", "path", "budget_tokens", "reranker"]


@pytest.mark.slow  # a sweep: every route × each of 40 fields and all at once × method
def test_control_characters_in_any_query_parameter_or_form_field_never_answer_500(
        superuser, valid, monkeypatch):
    """The ids in paths valid, NUL in every field at once and in each on its own."""
    # /healthz pings for a Celery worker, none runs here, and each of its 41 GETs waited the
    # ping's full timeout for the same 503 (84 of the sweep's ~210 s).
    monkeypatch.setattr(health, "CELERY_PING_TIMEOUT", 0.05)
    failures = []
    for route, view in parameterised_routes() + [(r, v) for r, v in routes() if "<" not in r]:
        if not own(view):
            continue
        path = url(route, {name: valid.get(name, "x_1") for name in
                           (m["name"] for m in PARAMETER.finditer(route))})
        for fields in [FIELDS, *([name] for name in FIELDS)]:
            data = {name: "\x00" for name in fields}
            for method in ("get", "post"):
                status = getattr(superuser, method)(path, data).status_code
                if status >= 500 and status != 503:  # 503: /healthz, no worker in tests
                    failures.append((method.upper(), path, fields[0] if len(fields) == 1
                                     else "all", status))
    assert not failures, "\n".join(map(str, failures))


@pytest.mark.parametrize("hostile", HOSTILE)
def test_control_characters_in_query_string_and_form_ids_are_400_naming_the_field(
        superuser, world, hostile):  # noqa: F811
    limiter = world.repo_limiter.public_id
    answers = {
        "switch org": superuser.get("/switch/?" + urlencode({"org": hostile})),
        "pin scope": superuser.post(f"/fragments/{limiter}/pin", {"scope": hostile}),
        "unpin scope": superuser.post(f"/fragments/{limiter}/unpin", {"scope": hostile}),
        "negative scope": superuser.post(f"/fragments/{limiter}/negative", {"scope": hostile}),
    }
    for what, response in answers.items():
        assert response.status_code == 400, (what, response.status_code)


def test_pin_reorder_refuses_a_control_character_in_the_order(superuser, cast, world):  # noqa: F811
    limiter = world.repo_limiter.public_id
    response = superuser.post(f"/scopes/{cast.repo.scope.public_id}/pins/reorder",
                              {"order": f"{limiter},frag_\x00x"})
    assert response.status_code == 400


def test_feedback_through_the_rest_helper_names_the_field(cast, world):  # noqa: F811
    """The MCP ``feedback`` tool passes its ``fragment_id`` argument to the same use case as
    REST; a hostile one is the API's 400 naming the field (the MCP end-to-end case is below)."""
    from contexts.protocol.errors import exception_handler
    from contexts.usecases.fragments import Feedback, record_feedback

    for hostile in HOSTILE:
        with pytest.raises(InvalidId) as raised:
            record_feedback(cast.token, Feedback(fragment_id=hostile, signal="helped"))
        response = exception_handler(raised.value, {})
        assert response.status_code == 400
        assert response.data["error"]["field"] == "fragment_id"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_mcp_feedback_tool_answers_400_naming_the_argument(
        services, django_db_setup, cast, tmp_path):  # noqa: F811
    """The red team's MCP case, end to end: the served application in its own process."""
    env = {**services.env(), "CONTEXTS_INDEX_DIR": str(tmp_path / "index")}
    with serve(env, tmp_path) as served:
        for hostile in HOSTILE:
            response = served.call_tool(cast.raw_token, "feedback",
                                        {"fragment_id": hostile, "signal": "helped"})
            error = tool_error(response)["error"]
            assert (error["code"], error["field"]) == ("invalid", "fragment_id"), error


@pytest.mark.parametrize("value", ["frag_0123abc", "tr_0123456789abcd", "repo_abc"])
def test_the_parser_takes_public_ids(value):
    assert parse_public_id(value, "id") == value


@pytest.mark.parametrize("value", HOSTILE + ["", "frag", "FRAG_abc", "frag_abc/x",
                                             "frag_" + "a" * 100, "a b", "frag_é"])
def test_the_parser_refuses_anything_else(value):
    with pytest.raises(InvalidId) as raised:
        parse_public_id(value, "fragment_id")
    assert raised.value.field == "fragment_id"
    assert "\x00" not in str(raised.value)  # the message does not echo the value


def test_slugs_follow_the_models_rule():
    assert parse_slug("acme-2", "org") == "acme-2"
    for value in ["\x00", "Acme", "-acme", "a" * 64, ""]:
        with pytest.raises(InvalidId):
            parse_slug(value, "org")
