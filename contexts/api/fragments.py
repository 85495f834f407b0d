"""Agents' writes: ``POST /api/fragments`` (e.g. a session summary into a session scope),
``POST /api/fragments/{id}/feedback`` (helped / hurt / cited), and ``GET /api/traces/{id}``."""

from __future__ import annotations

import time

from django.conf import settings
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Scope
from accounts.permissions import may
from accounts.scopes import readable_scopes
from contexts.api import after_response
from contexts.api.schema import AUTH, BODY, errors
from contexts.api.scoping import refuse, resolve_in_org, resolve_org
from contexts.api.throttling import AgentRateThrottle
from contexts.api.validation import StrictSerializer
from contexts.ids import parse_public_id
from contexts.models import Fragment, FragmentKind, RetrievalTrace
from contexts.retrieval import degraded as degraded_legs
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment

MAX_BODY_CHARS = 50_000


class TargetScopeSerializer(StrictSerializer):
    org_id = serializers.CharField(max_length=64)
    repo_id = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                    allow_null=True)
    persona_id = serializers.CharField(max_length=64, required=False, allow_blank=True,
                                       allow_null=True)
    session_id = serializers.CharField(max_length=120, required=False, allow_blank=True,
                                       allow_null=True)


class FragmentInSerializer(StrictSerializer):
    scope = TargetScopeSerializer()
    body = serializers.CharField(max_length=MAX_BODY_CHARS)
    title = serializers.CharField(max_length=300, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=FragmentKind.values,
                                   default=FragmentKind.SESSION_SUMMARY)
    heading_path = serializers.ListField(child=serializers.CharField(max_length=300),
                                         required=False, max_length=20)


class FragmentCreatedSerializer(serializers.Serializer):
    id = serializers.CharField()
    version = serializers.IntegerField()
    scope = serializers.CharField()
    kind = serializers.CharField()


def target_scope(principal, scope: dict):
    """The most specific scope named (session > persona > repo > org)."""
    org = resolve_org(principal, scope["org_id"])
    for kind, key in (("session", "session_id"), ("persona", "persona_id"),
                      ("repo", "repo_id")):
        obj = resolve_in_org(org, kind, scope.get(key))
        if obj is not None:
            return obj.scope
    return org.scope


def write_fragment(principal, data: dict) -> Fragment:
    scope = target_scope(principal, data["scope"])
    action = "contribute" if scope.kind == "session" else "curate"
    if not may(principal, action, scope):
        if may(principal, "view", scope):
            raise PermissionDenied(f"you may not write fragments into this {scope.kind}; "
                                   "agents write into sessions")
        raise refuse()
    try:
        return create_fragment(principal, scope, body=data["body"],
                               title=data.get("title", ""), kind=data["kind"],
                               heading_path=data.get("heading_path") or [],
                               reason="written through the API")
    except InvalidOperation as exc:
        raise ValidationError({exc.field or "body": [str(exc)]}) from exc


@extend_schema(summary="Write a fragment (agents: into a session scope)",
               request=FragmentInSerializer,
               responses={201: FragmentCreatedSerializer, **errors(*BODY, *AUTH, 429)})
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def fragments_view(request: Request) -> Response:
    data = FragmentInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fragment = write_fragment(request.user, data.validated_data)
    return Response({"id": fragment.public_id, "version": fragment.version,
                     "scope": fragment.scope.public_id, "kind": fragment.kind},
                    status=status.HTTP_201_CREATED)


class FeedbackSerializer(StrictSerializer):
    signal = serializers.ChoiceField(choices=["helped", "hurt", "cited"])
    trace_id = serializers.CharField(max_length=40, required=False, allow_blank=True)


class FeedbackAcceptedSerializer(serializers.Serializer):
    id = serializers.CharField()
    signal = serializers.CharField()


def visible_fragment(principal, public_id: str) -> Fragment:
    # From a URL the converter has checked it; from an MCP tool argument this is the check.
    public_id = parse_public_id(public_id, "fragment_id")
    fragment = Fragment.objects.filter(public_id=public_id).first()
    if fragment is None or not set(fragment.scope_ids) & readable_scopes(principal):
        raise Http404
    return fragment


def record_feedback(principal, public_id: str, signal: str) -> Fragment:
    from contexts.tasks import record_feedback as task

    fragment = visible_fragment(principal, public_id)
    task.delay(fragment.pk, signal)
    return fragment


@extend_schema(summary="Tell Contexts whether a fragment helped", request=FeedbackSerializer,
               responses={202: FeedbackAcceptedSerializer,
                          **errors(*BODY, *AUTH, 404, 429)})
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def feedback_view(request: Request, fragment_id: str) -> Response:
    data = FeedbackSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fragment = record_feedback(request.user, fragment_id, data.validated_data["signal"])
    return Response({"id": fragment.public_id, "signal": data.validated_data["signal"]},
                    status=status.HTTP_202_ACCEPTED)


def visible_trace(principal, trace_id: str) -> RetrievalTrace:
    """A trace is visible to whoever may read every scope it searched."""
    trace_id = parse_public_id(trace_id, "trace_id")

    def find() -> RetrievalTrace | None:
        trace = RetrievalTrace.objects.filter(public_id=trace_id).first()
        return trace if trace and set(trace.scope_ids) <= readable_scopes(principal) else None

    trace = find()
    if trace is None and settings.DEFERRED_WRITES == "next-request":
        # A retrieval's answer is sent before its trace row is written: queued in this
        # process, or written by another within IDLE_SECONDS (contexts/api/after_response.py).
        # Missing and unreadable traces wait alike, so the timing tells nothing of existence.
        after_response.drain()
        trace = find()
        if trace is None:
            time.sleep(after_response.READ_WAIT_SECONDS)
            trace = find()
    if trace is None:
        raise Http404
    return trace


class TraceSerializer(serializers.Serializer):
    """What ``trace_view`` answers (the stored JSON columns are described, not constrained)."""

    id = serializers.CharField()
    query = serializers.CharField()
    created_at = serializers.DateTimeField()
    principal = serializers.CharField(allow_null=True, help_text="token id or username")
    scopes = serializers.ListField(child=serializers.CharField())
    parameters = serializers.JSONField()
    reranker = serializers.CharField()
    candidates = serializers.JSONField(help_text="every candidate's per-stage scores")
    returned = serializers.JSONField()
    versions = serializers.JSONField()
    timings_ms = serializers.JSONField()
    degraded = serializers.DictField(child=serializers.CharField(),
                                     help_text="leg → why it did not run")


@extend_schema(summary="A stored retrieval trace",
               responses={200: TraceSerializer, **errors(*AUTH, 404)})
@api_view(["GET"])
def trace_view(request: Request, trace_id: str) -> Response:
    trace = visible_trace(request.user, trace_id)
    return Response({
        "id": trace.public_id, "query": trace.query, "created_at": trace.created_at,
        "principal": (trace.token.public_id if trace.token_id else
                      trace.user.get_username() if trace.user_id else None),
        "scopes": sorted(Scope.objects.filter(id__in=trace.scope_ids)
                         .values_list("public_id", flat=True)),
        "parameters": trace.parameters,
        "reranker": trace.reranker, "candidates": trace.candidates,
        "returned": trace.returned, "versions": trace.versions,
        "timings_ms": trace.timings_ms, "degraded": degraded_legs.public(trace.degraded),
    })
