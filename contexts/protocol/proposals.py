"""Proposals as REST (``POST /api/fragments/{id}/propose``, ``POST /api/proposals``,
``GET /api/proposals``, ``GET /api/proposals/{id}``) and MCP (``propose_promotion``,
``propose_fragment``, ``proposal_status``) receive and answer them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from contexts.models import FragmentKind, ProposalState, ProposalTarget
from contexts.protocol.fragments import TargetScopeSerializer
from contexts.protocol.retrieval import scope_ref
from contexts.protocol.validation import StrictSerializer
from contexts.usecases.fragments import MAX_BODY_CHARS
from contexts.usecases.proposals import Promote, ProposeNew


class PromoteSerializer(StrictSerializer):
    target = serializers.ChoiceField(choices=ProposalTarget.values,
                                     default=ProposalTarget.REPOSITORY)


class ProposeNewSerializer(StrictSerializer):
    scope = TargetScopeSerializer()
    body = serializers.CharField(max_length=MAX_BODY_CHARS)
    title = serializers.CharField(max_length=300, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=FragmentKind.values, default=FragmentKind.PROSE)


class ProposalListQuerySerializer(StrictSerializer):
    state = serializers.ChoiceField(choices=ProposalState.values, required=False)


class ProposalSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField(help_text="promote | new")
    target = serializers.CharField(help_text="repository | organization")
    target_scope = serializers.CharField()
    state = serializers.CharField(help_text="open | approved | merged | rejected")
    title = serializers.CharField()
    source_fragment = serializers.CharField(allow_null=True)
    fragment = serializers.CharField(allow_null=True,
                                     help_text="the fragment approved or merged into")
    auto_accepted = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True, help_text="why it was rejected")
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)


class ProposalListSerializer(serializers.Serializer):
    proposals = ProposalSerializer(many=True)


def promote_command(fragment_id: str, data: Mapping[str, Any]) -> Promote:
    return Promote(fragment_id=fragment_id, target=data["target"])


def propose_new_command(data: Mapping[str, Any]) -> ProposeNew:
    return ProposeNew(scope=scope_ref(data["scope"]), body=data["body"],
                      title=data.get("title", ""), kind=data["kind"])
