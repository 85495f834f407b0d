"""The agents' API as MCP tools: ``retrieve``, ``write_session_fragment``, ``feedback`` and the
proposal tools (``propose_promotion``, ``propose_fragment``, ``proposal_status``) over
Streamable HTTP at ``/mcp`` (official ``mcp`` SDK), mounted next to Django by ``contexts.asgi``.

Nothing here decides anything: every tool validates with the serializers REST validates with
and renders what REST renders (``contexts.protocol``), calls the same use case
(``contexts.usecases.retrieval`` / ``.fragments``), is throttled by the same per-token bucket
and reports every error — the SDK's own check of the arguments against the tool's schema
included, and an unknown tool — as an ``isError`` result whose structured content (and text) is
the REST error body (``{"error": {"code", "message", "field"}}``), made by REST's own mapping
(``contexts.protocol.errors.exception_handler``). An MCP call and the matching REST call
therefore cannot disagree; neither imports the other.

Authentication is the REST API's agent token (``Authorization: Bearer ctx_…``), checked by
:class:`BearerTokenMiddleware` before the SDK sees the request; the token rides in the ASGI scope
to the tools (``ctx.request_context.request``). A request without a valid token is refused as
the MCP authorization rules say: HTTP 401 with ``WWW-Authenticate: Bearer`` naming the
resource's metadata (``contexts.mcp.metadata``), its body a JSON-RPC error whose ``data`` is the
REST error body — so an SDK client reports the reason rather than a bare failed request.

The server is stateless (every POST stands alone, no MCP session to pin to a worker) and answers
with plain JSON rather than SSE: no tool streams, and it keeps proxies and gunicorn workers
simple. Tool calls run side by side, as REST requests do: each in a thread of the process's
request threads (:func:`_in_thread`), with its own database connection.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from types import SimpleNamespace
from typing import Annotated, Any, TypeVar

from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field
from rest_framework import exceptions
from rest_framework.utils.encoders import JSONEncoder
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from accounts.models import ApiToken
from accounts.tokens import verify_token
from contexts.kernel.availability import (
    RETRY_AFTER_SECONDS,
    outage,
    require_broker,
    unavailable_body,
)
from contexts.kernel.errors import error_body
from contexts.mcp.metadata import MCP_PATH, challenge
from contexts.models import FragmentKind
from contexts.protocol.errors import exception_handler
from contexts.protocol.fragments import (
    FeedbackSerializer,
    FragmentInSerializer,
    created_payload,
    feedback_command,
    write_command,
)
from contexts.protocol.proposals import (
    PromoteSerializer,
    ProposeNewSerializer,
    promote_command,
    propose_new_command,
)
from contexts.protocol.retrieval import (
    CURRENCY_STATES,
    RetrieveRequestSerializer,
    response_payload,
    retrieve_command,
)
from contexts.protocol.throttling import AgentRateThrottle
from contexts.usecases import fragments as fragment_cases
from contexts.usecases import proposals as proposal_cases
from contexts.usecases import retrieval as retrieval_cases
from contexts.web.csp import SecurityHeadersASGI

# Where BearerTokenMiddleware leaves the verified ApiToken for the tools.
TOKEN_SCOPE_KEY = "contexts.api_token"

LIMITS = settings.RETRIEVAL

# Stateless mode opens and closes a transport per POST and logs "Terminating session: None" at
# INFO each time; unless LOGGING sets a level for it, keep that out of the logs.
_transport_logger = logging.getLogger("mcp.server.streamable_http")
if _transport_logger.level == logging.NOTSET:
    _transport_logger.setLevel(logging.WARNING)

INSTRUCTIONS = (
    "Contexts is the system of record for what coding agents need to know about an "
    "organization's repositories. Call `retrieve` with the task as the query and your scope "
    "(org_id, repo_id, optionally persona_id and session_id) to get a cited context bundle "
    "within a token budget; repo_id \"*\" searches the organization-wide fragments and every "
    "repository you can read, and an empty answer's `hint` says where readable fragments "
    "are when they lie outside the scope you asked for. At the end of a session, "
    "`write_session_fragment` stores a short summary in the session. Tell Contexts which "
    "fragments helped (or hurt) with `feedback`. A new session_id (with repo_id) in a write "
    "opens that session. `propose_promotion` asks a tech lead to make a session finding a "
    "repository or organization fragment; `proposal_status` tells the outcome. "
    "Every returned fragment has a `source` object whose `kind` says where it came from: "
    "`file`, `git` or `archive` (with path, anchor, lines, commit) or, when no file brought "
    "it, `console`, `session` or `proposal` (with written_by, written_at, and session_id or "
    "proposal_id). Every tool error, bad arguments included, is a result with isError true "
    "whose structuredContent is {\"error\": {\"code\", \"message\", \"field\"}} — the REST "
    "API's error body; `field` names the argument (dotted for nested ones, e.g. scope.org_id)."
)


# --- tool arguments -----------------------------------------------------------------------------
# The pydantic types only describe the arguments for the tool listing; validation (lengths, ranges,
# choices, defaults) is left to the shared serializers so both surfaces enforce one rule set.
# Optional arguments default to None, meaning "the API's default".


class RetrievalScope(BaseModel):
    """Where to look: an organization and, optionally, a repository, persona and session."""

    # As the REST serializers do: a misspelt key ("repo" for "repo_id") is refused, not
    # silently dropped, which would widen the search to the whole organization. The schema
    # says so (additionalProperties: false); the refusal is the REST serializer's (unknown keys
    # are kept here and handed to it), so it reads the same on both surfaces.
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    org_id: Annotated[str, Field(description="organization public id or slug")]
    repo_id: Annotated[str | None, Field(
        description='repository public id or slug; "*": the organization-wide fragments plus '
                    "every repository you can read; absent: the organization-wide fragments "
                    "only")] = None
    persona_id: Annotated[str | None, Field(description="persona public id or slug")] = None
    session_id: Annotated[str | None, Field(
        description="session public id or external id: adds that session's fragments")] = None


class SessionScope(RetrievalScope):
    """The session to write into (agents write into sessions only)."""

    session_id: Annotated[str, Field(
        description="session public id or external id; a new external id (such as an issue "
                    "key) with repo_id opens that session on this first write")]


def _choices(serializer: type, field: str) -> list[str]:
    """A serializer's choices, for the tool schema's ``enum`` (None is listed where the argument
    is optional: ``null`` means "the API's default")."""
    return list(serializer().fields[field].choices)


Signal = Annotated[str, Field(description="did the fragment help, hurt, or get cited",
                              json_schema_extra={"enum": _choices(FeedbackSerializer, "signal")})]


def _encode(payload: Any) -> Any:
    """What DRF's JSON renderer would send (datetimes as ISO 8601 with Z, decimals, …)."""
    return json.loads(json.dumps(payload, cls=JSONEncoder))


def _without_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


# --- running the REST operations ----------------------------------------------------------------
# Tools return a CallToolResult they build themselves, so that an error's text is exactly the REST
# error body (a raised ToolError would reach the client prefixed with "Error executing tool …").
# The annotation keeps the advertised output schema: a JSON object.
ToolResult = Annotated[CallToolResult, dict[str, Any]]


def _result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    data = _encode(payload)
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data))],
                          structured_content=data, is_error=is_error)


def _error(exc: Exception, id_field: str | None = None) -> CallToolResult:
    """The REST error body for ``exc``; an unexpected error is logged (with its traceback) by the
    API's handler and reported as a bare ``server_error``, so no internals reach the caller.

    ``id_field``: the argument that named the object, for a ``not_found`` — in REST the id is
    in the path and the 404 names no field; here it is an argument, and the error names it."""
    response = exception_handler(exc, {})
    assert response is not None  # the API's handler answers every exception
    body = response.data
    if id_field is not None and body["error"]["code"] == "not_found" \
            and body["error"]["field"] is None:
        body["error"]["field"] = id_field
    return _result(body, is_error=True)


def _throttle(token: ApiToken) -> None:
    """The REST API's per-token bucket: MCP and REST calls of one token share one budget."""
    throttle = AgentRateThrottle()
    if not throttle.allow_request(SimpleNamespace(user=token), None):
        raise exceptions.Throttled(throttle.wait())


def _validated(serializer_class: type, data: dict[str, Any]) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


T = TypeVar("T")


class _Threads:
    """Where a tool call's synchronous work (the token check, the throttle, the use case) runs:
    the web process's request threads, which ``contexts.asgi`` hands over (the WSGI bridge's
    pool; :func:`build_application`), so that ``CONTEXTS_WEB_THREADS`` bounds REST requests and
    MCP calls together and MCP calls run side by side as REST requests do. Until one is handed
    over (an app built without it, a test), a pool of that size of its own.

    Not asgiref's thread-sensitive ``sync_to_async``: that runs every such call of the process
    in one thread, so MCP calls were served one at a time while REST's ran four at once. A
    call keeps its thread from start to end, and Django's database connections are per
    thread: no two calls share a connection or a transaction."""

    executor: Executor | None = None

    @classmethod
    def get(cls) -> Executor:
        if cls.executor is None:  # the event loop's thread only: no race
            cls.executor = ThreadPoolExecutor(settings.WEB_THREADS, thread_name_prefix="mcp")
        return cls.executor


async def _in_thread(function: Callable[[], T]) -> T:
    """``function()`` in a request thread, with the caller's context variables."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_Threads.get(), context.run,
                                                            function)


async def _run(ctx: Context, operation: Callable[[ApiToken], dict[str, Any]],
               id_field: str | None = None) -> CallToolResult:
    """Run ``operation`` for the request's token as Django runs a sync view: in a request
    thread (:func:`_in_thread`), with stale database connections dropped before and after
    (nothing sends request_started / request_finished here)."""
    request = ctx.request_context.request
    token = request.scope.get(TOKEN_SCOPE_KEY) if request is not None else None
    if not isinstance(token, ApiToken):
        # Only reachable if the MCP app is served without BearerTokenMiddleware.
        return _error(exceptions.NotAuthenticated())

    def call() -> CallToolResult:
        try:
            close_old_connections()  # inside: with the database gone even this can raise
            _throttle(token)
            return _result(operation(token))
        except Exception as exc:  # noqa: BLE001 - every failure is answered, never raised
            return _error(exc, id_field)
        finally:
            close_old_connections()

    return await _in_thread(call)


# --- tools --------------------------------------------------------------------------------------
# Said by every tool's description (retrieve says it in its own words).
_ERRORS = (" Errors, bad arguments included, are isError results whose structuredContent is the "
           "REST error body {\"error\": {\"code\", \"message\", \"field\"}}; `field` names the "
           "argument.")


class ContextsServer(MCPServer):
    """The SDK's server, with its refusals in the REST error body: arguments that fail the tool's
    schema (the SDK checks them before the tool runs, and used to answer pydantic's text) and an
    unknown tool. A tool itself never raises (:func:`_run` answers every failure)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if exc.__cause__ is not None:  # a pydantic ValidationError, or a crash (logged)
                return _error(exc.__cause__)
            unknown = exceptions.NotFound(
                f"unknown tool {name[:100]!r}; expected one of: "
                f"{', '.join(tool.name for tool in self._tool_manager.list_tools())}")
            unknown.field = "name"
            return _error(unknown)


server = ContextsServer(
    name="contexts",
    title="Contexts",
    instructions=INSTRUCTIONS,
    version=settings.SPECTACULAR_SETTINGS["VERSION"],
)


@server.tool(
    title="Retrieve context",
    description=(
        "Retrieve a cited, scope-safe context bundle for a query within a token budget "
        "(the same as POST /api/contexts/retrieve). Returns fragments (id, text, score, "
        "source, kind, …), trace_id, reranker, tokens_used, and a hint when nothing came back "
        "but fragments you can read lie elsewhere in the organization. Every fragment's "
        "`source` is an object, never null: `kind` file, git or archive with path, anchor, "
        "lines, commit, state and url; or, for a fragment no file brought, console, session "
        "(session_id) or proposal (proposal_id) with written_by and written_at. Errors, bad "
        "arguments included, are isError results whose structuredContent is the REST error "
        "body {\"error\": {\"code\", \"message\", \"field\"}}."
    ),
)
async def retrieve(
    query: Annotated[str, Field(description="the question or task, in plain words "
                                            f"(at most {LIMITS['max_query_chars']} characters)")],
    scope: RetrievalScope,
    ctx: Context,
    budget_tokens: Annotated[int | None, Field(
        description=f"token budget of the bundle, 1–{LIMITS['max_budget_tokens']} "
                    "(default 3200)")] = None,
    k_lexical: Annotated[int | None, Field(description="lexical candidates")] = None,
    k_dense: Annotated[int | None, Field(description="dense (embedding) candidates")] = None,
    rerank_top: Annotated[int | None, Field(description="candidates to rerank")] = None,
    freshness_halflife_days: Annotated[float | None, Field(
        description="how fast older fragments lose weight")] = None,
    min_score: Annotated[float | None, Field(
        description="drop fragments scoring below this (0–1)")] = None,
    include_superseded: Annotated[bool | None, Field(
        description="also return superseded fragments")] = None,
    as_of: Annotated[str | None, Field(
        description="ISO 8601 date-time: retrieve what was valid then")] = None,
    reranker: Annotated[str | None, Field(
        description="override the configured reranker",
        json_schema_extra={"enum": [*_choices(RetrieveRequestSerializer, "reranker"), None]},
    )] = None,
    max_age_days: Annotated[float | None, Field(
        description="leave out fragments neither edited nor verified within this many days")
    ] = None,
    verified_only: Annotated[bool | None, Field(
        description="only fragments someone verified")] = None,
    exclude_states: Annotated[list[str] | None, Field(
        description="leave out fragments whose source or evidence state is one of these",
        json_schema_extra={"items": {"enum": list(CURRENCY_STATES)}})] = None,
) -> ToolResult:
    body = _without_none({
        "query": query, "scope": scope.model_dump(), "budget_tokens": budget_tokens,
        "k_lexical": k_lexical, "k_dense": k_dense, "rerank_top": rerank_top,
        "freshness_halflife_days": freshness_halflife_days, "min_score": min_score,
        "include_superseded": include_superseded, "as_of": as_of, "reranker": reranker,
        "max_age_days": max_age_days, "verified_only": verified_only,
        "exclude_states": exclude_states,
    })

    def operation(token: ApiToken) -> dict[str, Any]:
        command = retrieve_command(_validated(RetrieveRequestSerializer, body))
        return response_payload(retrieval_cases.retrieve(token, command))

    return await _run(ctx, operation)


@server.tool(
    title="Write a session fragment",
    description=(
        "Store a fragment (typically the session's summary or a finding) in a session scope so "
        "that later retrievals with that session_id find it (the same as POST /api/fragments). "
        "Returns the new fragment's id, version, scope and kind."
        + _ERRORS
    ),
)
async def write_session_fragment(
    scope: SessionScope,
    body: Annotated[str, Field(description="the fragment's text (Markdown)")],
    ctx: Context,
    title: Annotated[str | None, Field(description="a short title")] = None,
    kind: Annotated[str | None, Field(
        description=f"fragment kind (default {FragmentKind.SESSION_SUMMARY.value})",
        json_schema_extra={"enum": [*FragmentKind.values, None]})] = None,
    heading_path: Annotated[list[str] | None, Field(
        description="headings the fragment sits under")] = None,
) -> ToolResult:
    data = _without_none({"scope": scope.model_dump(), "body": body, "title": title,
                          "kind": kind, "heading_path": heading_path})

    def operation(token: ApiToken) -> dict[str, Any]:
        require_broker()  # as the REST API does for every write (contexts.kernel.availability)
        command = write_command(_validated(FragmentInSerializer, data))
        return created_payload(fragment_cases.write_fragment(token, command))

    return await _run(ctx, operation)


@server.tool(
    title="Fragment feedback",
    description=(
        "Tell Contexts whether a retrieved fragment helped, hurt or was cited (the same as "
        "POST /api/fragments/{id}/feedback). Returns the fragment id and the signal recorded."
        + _ERRORS
    ),
)
async def feedback(
    fragment_id: Annotated[str, Field(description="a fragment id from a retrieve result")],
    signal: Signal,
    ctx: Context,
    trace_id: Annotated[str | None, Field(
        description="the trace_id of the retrieval that returned it")] = None,
) -> ToolResult:
    data = _without_none({"signal": signal, "trace_id": trace_id})

    def operation(token: ApiToken) -> dict[str, Any]:
        require_broker()
        validated = _validated(FeedbackSerializer, data)
        fragment = fragment_cases.record_feedback(token,
                                                  feedback_command(fragment_id, validated))
        return {"id": fragment.public_id, "signal": validated["signal"]}

    return await _run(ctx, operation, id_field="fragment_id")


@server.tool(
    title="Propose promoting a session fragment",
    description=(
        "Propose that a fragment of your session become a repository (target \"repository\", "
        "the session's) or organization fragment; a tech lead reviews it (the same as POST "
        "/api/fragments/{id}/propose). Nothing proposed is retrievable outside the session "
        "until approved. Returns the proposal: id, state, target_scope, fragment once approved."
        + _ERRORS
    ),
)
async def propose_promotion(
    fragment_id: Annotated[str, Field(description="the session fragment's id")],
    ctx: Context,
    target: Annotated[str | None, Field(
        description="where it should go (default repository)",
        json_schema_extra={"enum": [*_choices(PromoteSerializer, "target"), None]})] = None,
) -> ToolResult:
    data = _without_none({"target": target})

    def operation(token: ApiToken) -> dict[str, Any]:
        require_broker()
        command = promote_command(fragment_id, _validated(PromoteSerializer, data))
        return proposal_cases.outcome(proposal_cases.propose_promotion(token, command))

    return await _run(ctx, operation, id_field="fragment_id")


@server.tool(
    title="Propose a new repository fragment",
    description=(
        "Propose a new fragment for a repository, reviewed before anyone retrieves it (the "
        "same as POST /api/proposals); only tokens that allow proposals. Returns the proposal."
        + _ERRORS
    ),
)
async def propose_fragment(
    scope: RetrievalScope,
    body: Annotated[str, Field(description="the fragment's text (Markdown)")],
    ctx: Context,
    title: Annotated[str | None, Field(description="a short title")] = None,
    kind: Annotated[str | None, Field(
        description=f"fragment kind (default {FragmentKind.PROSE.value})",
        json_schema_extra={"enum": [*FragmentKind.values, None]})] = None,
) -> ToolResult:
    data = _without_none({"scope": _without_none(scope.model_dump()), "body": body,
                          "title": title, "kind": kind})

    def operation(token: ApiToken) -> dict[str, Any]:
        require_broker()
        command = propose_new_command(_validated(ProposeNewSerializer, data))
        return proposal_cases.outcome(proposal_cases.propose_new(token, command))

    return await _run(ctx, operation)


@server.tool(
    title="A proposal's outcome",
    description=(
        "One of your proposals: state (open, approved, merged, rejected), the fragment it "
        "became, the reason of a rejection (the same as GET /api/proposals/{id})."
        + _ERRORS
    ),
)
async def proposal_status(
    proposal_id: Annotated[str, Field(description="the id propose_* returned")],
    ctx: Context,
) -> ToolResult:
    def operation(token: ApiToken) -> dict[str, Any]:
        return proposal_cases.outcome(proposal_cases.own_proposal(token, proposal_id))

    return await _run(ctx, operation, id_field="proposal_id")


# --- HTTP ---------------------------------------------------------------------------------------
def _allowed_hosts() -> list[str]:
    # Django's own rule (HttpRequest.get_host): DEBUG with no ALLOWED_HOSTS means local names.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def _verify(raw: str) -> ApiToken | None:
    """An agent's token; a personal token (a member's, for scripts: the REST API) is none."""
    close_old_connections()
    try:
        token = verify_token(raw)
        return token if token is not None and token.user_id is None else None
    finally:
        close_old_connections()


class BearerTokenMiddleware:
    """``Authorization: Bearer ctx_…`` for ``/mcp``, as the REST API checks it.

    Also applies Django's ``ALLOWED_HOSTS`` to the Host header (the SDK's own DNS-rebinding
    check is switched off in favour of it, so one setting governs the whole site). A request
    without a valid token — none, another scheme, malformed, unknown, revoked, expired, or a
    member's personal token — is a 401 as the MCP authorization rules have it: a
    ``WWW-Authenticate: Bearer`` challenge naming the resource's metadata
    (``contexts.mcp.metadata``), with ``error="invalid_token"`` when a token was presented. Its
    body is a JSON-RPC error (code :data:`UNAUTHORIZED`) carrying the REST error body as
    ``data``: the SDK's client surfaces a JSON-RPC error from a refused request, and reported
    only "Server returned an error response" for the REST body alone. An outage met while
    checking the token answers as REST does (the database down: 503 with ``Retry-After``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value.decode("latin-1") for key, value in scope["headers"]}
        domain, _port = split_domain_port(headers.get(b"host", ""))
        if not domain or not validate_host(domain, _allowed_hosts()):
            await _json(send, 400, error_body("bad_request", "invalid Host header"))
            return
        keyword, _, raw = headers.get(b"authorization", "").partition(" ")
        if keyword.lower() != "bearer" or not raw.strip():
            await _unauthorized(send, "not_authenticated",
                                "Authentication credentials were not provided.",
                                invalid_token=False)
            return
        try:
            token = await _in_thread(lambda: _verify(raw.strip()))
        except Exception as exc:
            unavailable = outage(exc)  # contexts/kernel/availability.py: one rule for REST and MCP
            if unavailable is None:
                raise
            await _json(send, 503, unavailable_body(str(unavailable.get_codes()),
                                                    str(unavailable.detail)))
            return
        if token is None:
            await _unauthorized(send, "authentication_failed",
                                "invalid, expired or revoked token", invalid_token=True)
            return
        await self.app({**scope, TOKEN_SCOPE_KEY: token}, receive, send)


# JSON-RPC's range for a server's own errors (-32000 to -32099): the request was not authorized.
UNAUTHORIZED = -32001


async def _unauthorized(send: Send, code: str, message: str, *, invalid_token: bool) -> None:
    # "id": null — the request is refused before its body is read (JSON-RPC 2.0 allows it; the
    # SDK's client matches the error to the request it sent).
    body = {"jsonrpc": "2.0", "id": None,
            "error": {"code": UNAUTHORIZED, "message": message, "data": error_body(code, message)}}
    await _json(send, 401, body, challenge=challenge(invalid_token=invalid_token))


async def _json(send: Send, status: int, body: dict[str, Any], *,
                challenge: str | None = None) -> None:
    content = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(content)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    if status == 503:
        headers.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})


def build_application(threads: Executor | None = None) -> ASGIApp:
    """The ``/mcp`` ASGI app: the SDK's Starlette app behind token authentication, every
    response with the security headers REST responses carry (``contexts.web.csp``).
    ``threads``: the process's request threads, where the tools run (:class:`_Threads`).

    Its lifespan runs the SDK's session manager and must be served: ``contexts.asgi`` forwards
    the ASGI lifespan events here (the middleware lets them through untouched).
    """
    if threads is not None:
        _Threads.executor = threads
    app: Starlette = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return SecurityHeadersASGI(BearerTokenMiddleware(app))
