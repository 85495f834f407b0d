"""Retrieve: a query and a scope, as any surface names them, to a cited bundle.

REST and MCP call :func:`retrieve`; the console's search preview calls :func:`plan`, :func:`run`
and :func:`hint` itself, because it shows the plan (where a pin would go) and words the hint
for its own form.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from accounts.scopes import ScopeDenied, readable_scopes, retrieval_scopes
from contexts.retrieval import RetrievalRequest, RetrievalResult, dense
from contexts.retrieval import retrieve as run_pipeline
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import Refused
from contexts.usecases.org_scope import API_WORDING, Plan, Wording, is_wide, scope_hint, wide_chain
from contexts.usecases.scoping import SCOPE_REFUSED, resolve_chain

WEIGHT_FIELDS = ("w_r", "w_f", "w_c", "w_p")


@dataclasses.dataclass(frozen=True)
class ScopeRef:
    """The scope as the caller named it: public ids or slugs (``repo_id`` may be ``"*"``)."""

    org_id: str
    repo_id: str | None = None
    persona_id: str | None = None
    session_id: str | None = None

    def fields(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Retrieve:
    """One retrieval, validated by the surface that received it (limits are the caller's
    rules: ``contexts.protocol.retrieval`` for agents, the console's search form)."""

    query: str
    scope: ScopeRef
    budget_tokens: int
    k_lexical: int
    k_dense: int
    rerank_top: int
    min_score: float = 0.0
    freshness_halflife_days: float | None = None
    include_superseded: bool = False
    as_of: dt.datetime | None = None
    reranker: str | None = None
    # Compose weights typed by a curator (console); one left None keeps the persona's (or
    # the default). None: no override.
    weights: Mapping[str, float | None] | None = None
    # How current the answer must be (contexts.retrieval.rows.current).
    max_age_days: float | None = None
    verified_only: bool = False
    exclude_states: tuple[str, ...] = ()


def plan(principal: Any, command: Retrieve) -> Plan:
    """The command as a retrieval request over the principal's effective scopes, with what
    the empty answer's hint needs (no further query). Raises :class:`Refused` for a scope the
    principal may not read (or that does not exist: the same refusal)."""
    readable = readable_scopes(principal)  # once per request
    scope = command.scope.fields()
    wide = is_wide(scope)
    found = resolve_chain({**scope, "repo_id": None} if wide else scope, readable)
    org = found["org"]
    persona = found.get("persona")
    chain = [found[kind].scope_id for kind in ("session", "persona", "repo") if kind in found]
    if wide:
        # Every repository it reads and the organization-wide scope if it reads that: taken
        # from the readable set, so "*" can never ask for a scope that would be refused.
        chain += wide_chain(readable, org.pk, org.scope_id)
    # org_id names the namespace; organization-wide knowledge joins the chain when the
    # principal may read it (a token bound to one repository may not). Asked for alone, it
    # must be readable like any other requested scope.
    elif not chain or org.scope_id in readable:
        chain.append(org.scope_id)
    try:
        effective = retrieval_scopes(principal, chain, known=readable)
    except ScopeDenied:
        raise Refused(SCOPE_REFUSED) from None
    request = RetrievalRequest(
        query=command.query, org_id=org.pk, scope_ids=effective, chain=tuple(chain),
        budget_tokens=command.budget_tokens, k_lexical=command.k_lexical,
        k_dense=command.k_dense, rerank_top=command.rerank_top,
        freshness_halflife_days=command.freshness_halflife_days,
        min_score=command.min_score, include_superseded=command.include_superseded,
        as_of=command.as_of, reranker=command.reranker,
        persona_id=persona.pk if persona else None,
        max_age_days=command.max_age_days, verified_only=command.verified_only,
        exclude_states=tuple(command.exclude_states),
    )
    return Plan(_with_weights(request, command.weights), principal, readable, scope,
                org.scope_id)


def _with_weights(request: RetrievalRequest, typed: Mapping[str, float | None] | None
                  ) -> RetrievalRequest:
    """Weights typed by a curator; the ones left blank keep the persona's (or the defaults),
    read by the pipeline with its other inputs."""
    overrides = tuple((name, float(typed[name])) for name in WEIGHT_FIELDS
                      if typed and typed.get(name) is not None)
    return dataclasses.replace(request, weight_overrides=overrides) if overrides else request


def run(principal: Any, planned: Plan, *,
        defer: Callable[[Callable[[], None]], None] | None = None,
        embedding: dense.QueryEmbedding | None = None) -> RetrievalResult:
    """The retrieval pipeline over a plan. A reranker asked for but not configured is
    :class:`InvalidOperation` naming ``reranker``. ``defer``, ``embedding``: as in
    :func:`contexts.retrieval.pipeline.retrieve`."""
    try:
        return run_pipeline(planned.request, principal=principal, embedding=embedding,
                            defer=defer)
    except ValueError as exc:  # e.g. a cross-encoder asked for but not configured
        raise InvalidOperation(str(exc), field="reranker") from exc


def hint(planned: Plan, wording: Wording = API_WORDING, result: RetrievalResult | None = None
         ) -> str | None:
    """For an empty answer: where the caller's readable fragments are (one COUNT, or none when
    this process counted the same at the change-feed head ``result``'s lexical leg read)."""
    head = (result.sources.get("lexical") or {}).get("head") if result is not None else None
    return scope_hint(planned, wording, head)


def retrieve(principal: Any, command: Retrieve, *,
             defer: Callable[[Callable[[], None]], None] | None = None) -> RetrievalResult:
    """An agent's retrieval (REST and MCP): the bundle, with the hint when it is empty.

    Called once the caller is authenticated and the command valid. The query's embedding
    starts first and runs in the query encoder while scopes are resolved; a refused scope only
    wastes that forward pass."""
    embedding = dense.QueryEmbedding(command.query)
    planned = plan(principal, command)
    result = run(principal, planned, defer=defer, embedding=embedding)
    if not result.fragments:  # only an empty answer pays for the hint's one COUNT
        result.hint = hint(planned, result=result)
    return result
