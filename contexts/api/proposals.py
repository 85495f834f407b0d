"""Agents' proposals (docs/api.md "Proposals"): propose promoting a session fragment
(``POST /api/fragments/{id}/propose``), propose a new repository fragment
(``POST /api/proposals``), and read one's own proposals and their outcome
(``GET /api/proposals``, ``GET /api/proposals/{id}``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.request import Request
from rest_framework.response import Response

from contexts.api.schema import AUTH, BODY, errors
from contexts.protocol.proposals import (
    PromoteSerializer,
    ProposalListQuerySerializer,
    ProposalListSerializer,
    ProposalSerializer,
    ProposeNewSerializer,
    promote_command,
    propose_new_command,
)
from contexts.protocol.throttling import AgentRateThrottle
from contexts.usecases import proposals

LIST_LIMIT = 100


@extend_schema(summary="Propose promoting a session fragment to its repository or "
                       "organization", request=PromoteSerializer,
               responses={201: ProposalSerializer, **errors(*BODY, *AUTH, 404, 429)})
@api_view(["POST"])
@throttle_classes([AgentRateThrottle])
def propose_view(request: Request, fragment_id: str) -> Response:
    data = PromoteSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    proposal = proposals.propose_promotion(request.user,
                                           promote_command(fragment_id, data.validated_data))
    return Response(proposals.outcome(proposal), status=status.HTTP_201_CREATED)


@extend_schema(methods=["POST"], summary="Propose a new repository fragment "
               "(tokens that allow proposals)", request=ProposeNewSerializer,
               responses={201: ProposalSerializer, **errors(*BODY, *AUTH, 429)})
# Named: drf-spectacular would derive "proposals_retrieve" for both GET operations (a check
# --deploy warning, which production treats as an error).
@extend_schema(methods=["GET"], operation_id="proposals_list",
               summary="Your proposals, newest first (at most 100)",
               parameters=[ProposalListQuerySerializer],
               responses={200: ProposalListSerializer, **errors(400, *AUTH, 429)})
@api_view(["GET", "POST"])
@throttle_classes([AgentRateThrottle])
def proposals_view(request: Request) -> Response:
    if request.method == "POST":
        data = ProposeNewSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        proposal = proposals.propose_new(request.user, propose_new_command(data.validated_data))
        return Response(proposals.outcome(proposal), status=status.HTTP_201_CREATED)
    query = ProposalListQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    found = proposals.own_proposals(request.user)
    if query.validated_data.get("state"):
        found = found.filter(state=query.validated_data["state"])
    return Response({"proposals": [proposals.outcome(p) for p in found[:LIST_LIMIT]]})


@extend_schema(summary="One of your proposals and its outcome",
               responses={200: ProposalSerializer, **errors(*AUTH, 404, 429)})
@api_view(["GET"])
@throttle_classes([AgentRateThrottle])
def proposal_view(request: Request, proposal_id: str) -> Response:
    return Response(proposals.outcome(proposals.own_proposal(request.user, proposal_id)))
