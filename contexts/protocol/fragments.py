"""An agent's fragment write and feedback as REST (``POST /api/fragments``,
``…/{id}/feedback``) and MCP (``write_session_fragment``, ``feedback``) receive them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from contexts.models import Fragment, FragmentKind
from contexts.protocol.retrieval import scope_ref
from contexts.protocol.validation import StrictSerializer
from contexts.usecases.fragments import MAX_BODY_CHARS, SIGNALS, Feedback, WriteFragment


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


class FeedbackSerializer(StrictSerializer):
    signal = serializers.ChoiceField(choices=list(SIGNALS))
    trace_id = serializers.CharField(max_length=40, required=False, allow_blank=True)


class FeedbackAcceptedSerializer(serializers.Serializer):
    id = serializers.CharField()
    signal = serializers.CharField()


def write_command(data: Mapping[str, Any]) -> WriteFragment:
    """Validated :class:`FragmentInSerializer` data as the use case's command."""
    return WriteFragment(scope=scope_ref(data["scope"]), body=data["body"],
                         title=data.get("title", ""), kind=data["kind"],
                         heading_path=tuple(data.get("heading_path") or ()))


def feedback_command(fragment_id: str, data: Mapping[str, Any]) -> Feedback:
    return Feedback(fragment_id=fragment_id, signal=data["signal"])


def created_payload(fragment: Fragment) -> dict[str, Any]:
    return {"id": fragment.public_id, "version": fragment.version,
            "scope": fragment.scope.public_id, "kind": fragment.kind}
