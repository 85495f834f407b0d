"""Fragments over REST: ``POST /api/fragments`` (an agent's session summary into a session
scope; a curator's repository fragment, with a personal token), ``GET`` and ``PATCH
/api/fragments/{id}`` (a team's scripts: the text, its version, owner, source and evidence;
an edit against the version read), ``POST /api/fragments/{id}/feedback`` (helped / hurt /
cited), and ``GET /api/traces/{id}``."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Scope
from accounts.scopes import readable_scopes
from contexts.api.schema import AUTH, BODY, errors
from contexts.kernel.ids import parse_public_id
from contexts.models import RetrievalTrace
from contexts.protocol.fragments import (
    FeedbackAcceptedSerializer,
    FeedbackSerializer,
    FragmentCreatedSerializer,
    FragmentEditSerializer,
    FragmentInSerializer,
    FragmentRecordSerializer,
    created_payload,
    edit_command,
    feedback_command,
    record_payload,
    write_command,
)
from contexts.protocol.throttling import AgentRateThrottle
from contexts.retrieval import degraded as degraded_legs
from contexts.usecases import fragment_edits, fragments


@extend_schema(summary="Write a fragment (agents: into a session scope; a curator's personal "
                       "token: into a repository or the organization)",
               request=FragmentInSerializer,
               responses={201: FragmentCreatedSerializer, **errors(*BODY, *AUTH, 429)})
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def fragments_view(request: Request) -> Response:
    data = FragmentInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fragment = fragments.write_fragment(request.user, write_command(data.validated_data))
    return Response(created_payload(fragment), status=status.HTTP_201_CREATED)


@extend_schema(methods=["GET"], summary="A fragment: text, version, owner, source, evidence",
               responses={200: FragmentRecordSerializer, **errors(*AUTH, 404, 429)})
@extend_schema(methods=["PATCH"], summary="Edit a fragment's text (curators; 409 with both "
                                          "texts when version is not the current one)",
               request=FragmentEditSerializer,
               responses={200: FragmentRecordSerializer, **errors(*BODY, *AUTH, 404, 409, 429)})
@api_view(["GET", "PATCH"])
@throttle_classes([AgentRateThrottle])
def fragment_view(request: Request, fragment_id: str) -> Response:
    if request.method == "PATCH":
        data = FragmentEditSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fragment_edits.edit_text(request.user, edit_command(fragment_id, data.validated_data))
    return Response(record_payload(fragment_edits.fragment_record(request.user, fragment_id)))


@extend_schema(summary="Tell Contexts whether a fragment helped", request=FeedbackSerializer,
               responses={202: FeedbackAcceptedSerializer,
                          **errors(*BODY, *AUTH, 404, 429)})
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def feedback_view(request: Request, fragment_id: str) -> Response:
    data = FeedbackSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    fragment = fragments.record_feedback(request.user,
                                         feedback_command(fragment_id, data.validated_data))
    return Response({"id": fragment.public_id, "signal": data.validated_data["signal"]},
                    status=status.HTTP_202_ACCEPTED)


def visible_trace(principal, trace_id: str) -> RetrievalTrace:
    """A trace is visible to whoever may read every scope it searched."""
    trace_id = parse_public_id(trace_id, "trace_id")

    trace = RetrievalTrace.objects.filter(public_id=trace_id).first()
    # Missing and unreadable traces answer alike: a 404 tells nothing of existence.
    if trace is None or not set(trace.scope_ids) <= readable_scopes(principal):
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
