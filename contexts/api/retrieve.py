"""``POST /api/contexts/retrieve`` — the agents' endpoint."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.scopes import ScopeDenied, readable_scopes, retrieval_scopes
from contexts.api.after_response import drain_for_request, run_after_response
from contexts.api.early import started_embedding
from contexts.api.org_scope import ALL_REPOSITORIES, Plan, is_wide, scope_hint, wide_chain
from contexts.api.schema import AUTH, BODY, errors
from contexts.api.scoping import SCOPE_REFUSED, resolve_chain
from contexts.api.throttling import AgentRateThrottle
from contexts.api.validation import StrictSerializer
from contexts.ids import PUBLIC_ID, SLUG
from contexts.retrieval import RetrievalRequest, RetrievalResult, dense, retrieve
from contexts.retrieval.types import ComposedFragment

LIMITS = settings.RETRIEVAL


def finite(value: float) -> None:
    if not math.isfinite(value):
        raise ValidationError("must be a finite number")


_REPOSITORY_REF = re.compile(f"{PUBLIC_ID}|{SLUG}|{re.escape(ALL_REPOSITORIES)}")


def repository_ref(value: str) -> None:
    # A value that can name nothing ("**", "web/*") is the caller's mistake: a 400 naming the
    # field, not the 403 of a repository that might exist.
    if _REPOSITORY_REF.fullmatch(value) is None:
        raise ValidationError('must be a repository id or slug, or "*" for every repository '
                              "you can read")


class ScopeSerializer(StrictSerializer):
    org_id = serializers.CharField(max_length=64, help_text="public id or slug")
    repo_id = serializers.CharField(
        max_length=64, required=False, allow_blank=True, allow_null=True,
        validators=[repository_ref],
        help_text='public id or slug; "*": the organization-wide fragments plus every '
                  "repository of the organization the caller may read; absent: the "
                  "organization-wide fragments only")
    persona_id = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                       allow_null=True)
    session_id = serializers.CharField(max_length=120, required=False, allow_blank=True,
                                       allow_null=True, help_text="public id or external id")


class RetrieveRequestSerializer(StrictSerializer):
    query = serializers.CharField(max_length=LIMITS["max_query_chars"], trim_whitespace=True)
    scope = ScopeSerializer()
    budget_tokens = serializers.IntegerField(default=3200, min_value=1,
                                             max_value=LIMITS["max_budget_tokens"])
    k_lexical = serializers.IntegerField(default=100, min_value=0, max_value=LIMITS["max_k"])
    k_dense = serializers.IntegerField(default=100, min_value=0, max_value=LIMITS["max_k"])
    rerank_top = serializers.IntegerField(default=50, min_value=0, max_value=LIMITS["max_k"])
    freshness_halflife_days = serializers.FloatField(required=False, allow_null=True,
                                                     min_value=0.01, max_value=36500,
                                                     validators=[finite])
    min_score = serializers.FloatField(default=0.0, min_value=0.0, max_value=1.0,
                                       validators=[finite])
    include_superseded = serializers.BooleanField(default=False)
    as_of = serializers.DateTimeField(required=False, allow_null=True)
    reranker = serializers.ChoiceField(choices=["none", "cross-encoder"], required=False)


class SourceSerializer(serializers.Serializer):
    path = serializers.CharField()
    repository = serializers.CharField(allow_null=True)
    anchor = serializers.CharField()
    lines = serializers.ListField(child=serializers.IntegerField(allow_null=True))


class FragmentOutSerializer(serializers.Serializer):
    id = serializers.CharField()
    doc_id = serializers.CharField(allow_null=True)
    version = serializers.IntegerField()
    score = serializers.FloatField()
    tokens = serializers.IntegerField()
    source = SourceSerializer(allow_null=True)
    updated_at = serializers.DateTimeField()
    kind = serializers.CharField()
    pinned = serializers.BooleanField()
    negative = serializers.BooleanField()
    heading_path = serializers.ListField(child=serializers.CharField())
    symbol = serializers.CharField(
        allow_blank=True,
        help_text="qualified name of the definition the fragment holds or is cut from "
                  "(`QuerySet.bulk_create`, also for part 3 of a long method); empty for prose")
    text = serializers.CharField()


class RetrieveResponseSerializer(serializers.Serializer):
    fragments = FragmentOutSerializer(many=True)
    trace_id = serializers.CharField()
    reranker = serializers.CharField()
    tokens_used = serializers.IntegerField()
    degraded = serializers.DictField(
        child=serializers.CharField(),
        help_text="leg → a stable code saying why it did not run (`lexical_index_unavailable`: "
                  "the answer came from the dense leg alone); empty when every leg ran")
    hint = serializers.CharField(
        allow_null=True,
        help_text="set only when no fragment came back while the caller reads fragments "
                  "elsewhere in the organization: how many, and how to widen the scope (e.g. "
                  '`"repo_id": "*"`); counts only what the caller may read; null otherwise')


def fragment_payload(item: ComposedFragment) -> dict:
    fragment = item.fragment
    first = item.sources[0] if item.sources else None
    source = None
    if first is not None:
        source = {"path": first.path, "repository": first.repository, "anchor": first.anchor,
                  "lines": [first.start_line, first.end_line]}
    return {
        "id": fragment.public_id,
        "doc_id": f"{first.path}#{first.anchor}" if first else None,
        "version": fragment.version,
        "score": round(item.candidate.final, 4),
        "tokens": item.tokens,
        "source": source,
        "updated_at": max(t for t in (fragment.last_edited_at, fragment.verified_at) if t),
        "kind": fragment.kind,
        "pinned": item.candidate.pinned,
        "negative": fragment.negative,
        "heading_path": list(fragment.heading_path),
        "symbol": fragment.symbol,
        "text": item.text,
    }


def response_payload(result: RetrievalResult) -> dict:
    return {
        "fragments": [fragment_payload(item) for item in result.fragments],
        "trace_id": result.trace_id,
        "reranker": result.reranker,
        "tokens_used": sum(item.tokens for item in result.fragments),
        "degraded": result.degraded,
        "hint": result.hint,
    }


def build_request(principal, data: dict) -> RetrievalRequest:
    """Validated API input → a retrieval request over the principal's effective scopes."""
    return plan_request(principal, data).request


def plan_request(principal, data: dict) -> Plan:
    """:func:`build_request`, with what the empty answer's hint needs (no further query)."""
    readable = readable_scopes(principal)  # once per request
    scope = data["scope"]
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
        raise PermissionDenied(SCOPE_REFUSED) from None
    request = RetrievalRequest(
        query=data["query"], org_id=org.pk, scope_ids=effective, chain=tuple(chain),
        budget_tokens=data["budget_tokens"], k_lexical=data["k_lexical"],
        k_dense=data["k_dense"], rerank_top=data["rerank_top"],
        freshness_halflife_days=data.get("freshness_halflife_days"),
        min_score=data["min_score"], include_superseded=data["include_superseded"],
        as_of=data.get("as_of"), reranker=data.get("reranker"),
        persona_id=persona.pk if persona else None,
    )
    return Plan(request, principal, readable, scope, org.scope_id)


def retrieve_for(principal, data: dict,
                 defer: Callable[[Callable[[], None]], None] | None = None,
                 embedding: dense.QueryEmbedding | None = None,
                 meanwhile: Callable[[], None] | None = None) -> RetrievalResult:
    """Validated API input → the bundle (REST and MCP). The query's embedding starts first
    (or earlier: ``embedding``) and runs in the query encoder while scopes are resolved; a
    refused scope only wastes that forward pass. ``defer``, ``meanwhile``: as in
    ``retrieve``."""
    if embedding is None or embedding.query != data["query"]:
        embedding = dense.QueryEmbedding(data["query"])
    plan = plan_request(principal, data)
    try:
        result = retrieve(plan.request, principal=principal, embedding=embedding, defer=defer,
                          meanwhile=meanwhile)
    except ValueError as exc:  # e.g. a cross-encoder asked for but not configured
        raise ValidationError({"reranker": [str(exc)]}) from exc
    if not result.fragments:  # only an empty answer pays for the hint's one COUNT
        result.hint = scope_hint(plan)
    return result


@extend_schema(
    summary="Retrieve a cited, scope-safe context bundle within a token budget",
    request=RetrieveRequestSerializer,
    responses={200: RetrieveResponseSerializer, **errors(*BODY, *AUTH, 429)},
    examples=[OpenApiExample("rate limiter", request_only=True, value={
        "query": "why does the rate limiter drop requests on burst?",
        "scope": {"org_id": "demo", "repo_id": "contexts"}, "budget_tokens": 3200})],
)
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def retrieve_view(request: Request) -> Response:
    data = RetrieveRequestSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    # Started by the middleware (a credential seen authenticating), or by retrieve_for once
    # the body is valid: an invalid body costs no forward pass of the view's own.
    embedding = started_embedding(request._request)
    writes: list[Callable[[], None]] = []
    result = retrieve_for(request.user, data.validated_data, defer=writes.append,
                          embedding=embedding, meanwhile=drain_for_request)
    response = Response(response_payload(result))
    # The trace row, the use counters and the metrics are written once the answer is out.
    run_after_response(response, writes)
    return response
