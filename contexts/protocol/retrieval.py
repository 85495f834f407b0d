"""The retrieval request and response as agents send and receive them, over REST
(``POST /api/contexts/retrieve``) and MCP (the ``retrieve`` tool): one rule set, one shape."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from contexts.kernel.ids import PUBLIC_ID, SLUG
from contexts.models import FragmentOrigin, FragmentSourceState
from contexts.protocol.validation import StrictSerializer
from contexts.retrieval import RetrievalResult
from contexts.retrieval.types import ComposedFragment
from contexts.services.evidence import STATES as EVIDENCE_STATES
from contexts.services.evidence import summary as evidence_summary
from contexts.usecases.org_scope import ALL_REPOSITORIES
from contexts.usecases.retrieval import Retrieve, ScopeRef

LIMITS = settings.RETRIEVAL
# What ``exclude_states`` may name: a fragment's source state (how it stands against the file
# that brought it) and its evidence state (what its text cites).
CURRENCY_STATES = (*FragmentSourceState.values, *EVIDENCE_STATES)


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
    # How current the answer must be (docs/api.md, "How current an answer is").
    max_age_days = serializers.FloatField(
        required=False, allow_null=True, min_value=0.0, max_value=36500, validators=[finite],
        help_text="leave out fragments neither edited nor verified within this many days "
                  "(age: since the later of the last edit and the last verification)")
    verified_only = serializers.BooleanField(
        default=False, help_text="only fragments someone verified (verified_at set)")
    exclude_states = serializers.ListField(
        child=serializers.ChoiceField(choices=CURRENCY_STATES), required=False,
        max_length=len(CURRENCY_STATES),
        help_text="leave out fragments whose source.state or evidence.state is one of these")


class SourceSerializer(serializers.Serializer):
    kind = serializers.CharField(
        help_text="where the fragment came from: a file (`file`), a git source's file (`git`), "
                  "a file of an uploaded archive (`archive`) — then path, repository, anchor, "
                  "lines, commit, state and url say where — or, for a fragment no file brought, "
                  "where it was written: `console` (by a person, in the console or a member's "
                  "script), `session` (in an agent's session: session_id) or `proposal` (an "
                  "approved proposal: proposal_id) — then written_by and written_at say who "
                  "and when")
    path = serializers.CharField(allow_null=True, required=False)
    repository = serializers.CharField(allow_null=True, required=False)
    anchor = serializers.CharField(allow_null=True, required=False)
    lines = serializers.ListField(child=serializers.IntegerField(allow_null=True),
                                  required=False)
    commit = serializers.CharField(
        allow_null=True, required=False,
        help_text="for a file of a git source (docs/sources.md): the commit its text was read "
                  "at; null otherwise")
    state = serializers.ChoiceField(
        choices=FragmentSourceState.values, allow_null=True,
        help_text="how the fragment stands against this file: in_sync, merged (a person's "
                  "edit merged with upstream), conflict (the person's text is served, the "
                  "owner asked) or gone (the source text was deleted); null for none")
    url = serializers.CharField(
        allow_null=True, required=False,
        help_text="a permalink to those lines at that commit, when the source has a web URL "
                  "template; null otherwise")
    written_by = serializers.CharField(
        allow_null=True, required=False,
        help_text="console, session, proposal: the username of who wrote its first version "
                  "(for a proposal, who approved it); null for an agent's token or the system")
    written_at = serializers.DateTimeField(
        allow_null=True, required=False,
        help_text="console, session, proposal: when its first version was written")
    session_id = serializers.CharField(required=False,
                                       help_text="session: the session's id (sess_…)")
    proposal_id = serializers.CharField(required=False,
                                        help_text="proposal: the approved proposal's id")


class EvidenceSummarySerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=EVIDENCE_STATES, allow_null=True,
        help_text="what the fragment's text cites: current, changed (since it was verified) "
                  "or missing; null when it cites nothing")
    refs = serializers.IntegerField(help_text="what it rests on: cited references and sources")
    changed = serializers.IntegerField(help_text="cited references changed or missing")


class FragmentOutSerializer(serializers.Serializer):
    id = serializers.CharField()
    doc_id = serializers.CharField(
        help_text="the document it is part of: path#anchor for a file's fragment; the "
                  "fragment's own id for one no file brought")
    version = serializers.IntegerField()
    score = serializers.FloatField()
    tokens = serializers.IntegerField()
    source = SourceSerializer(help_text="never null: source.kind says where it came from")
    updated_at = serializers.DateTimeField()
    verified_at = serializers.DateTimeField(allow_null=True,
                                            help_text="when someone last verified it")
    evidence = EvidenceSummarySerializer()
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


def source_payload(item: ComposedFragment) -> dict[str, Any]:
    """Where a returned fragment came from (docs/api.md, "Where a fragment came from"): its first
    file's citation, or where it was written; never null."""
    fragment = item.fragment
    state = fragment.source_state or None
    first = item.sources[0] if item.sources else None
    if first is not None:
        return {"kind": first.kind, "path": first.path, "repository": first.repository,
                "anchor": first.anchor, "lines": [first.start_line, first.end_line],
                "commit": first.commit, "state": state, "url": first.url}
    written = item.written
    if written is None:  # its file's lines are gone (source.state "gone"): a file, unnamed now
        return {"kind": FragmentOrigin.FILE.value, "path": None, "repository": None,
                "anchor": None, "lines": [None, None], "commit": None, "state": state,
                "url": None}
    payload = {"kind": written.kind, "state": state, "written_by": written.written_by,
               "written_at": written.written_at}
    if written.session_id is not None:
        payload["session_id"] = written.session_id
    if written.proposal_id is not None:
        payload["proposal_id"] = written.proposal_id
    return payload


def fragment_payload(item: ComposedFragment) -> dict:
    fragment = item.fragment
    first = item.sources[0] if item.sources else None
    return {
        "id": fragment.public_id,
        "doc_id": f"{first.path}#{first.anchor}" if first else fragment.public_id,
        "version": fragment.version,
        "score": round(item.candidate.final, 4),
        "tokens": item.tokens,
        "source": source_payload(item),
        "updated_at": max(t for t in (fragment.last_edited_at, fragment.verified_at) if t),
        "verified_at": fragment.verified_at,
        "evidence": evidence_summary(fragment.evidence_state, cited=item.cited[0],
                                     changed=item.cited[1], sources=len(item.sources)),
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


def scope_ref(scope: Mapping[str, Any]) -> ScopeRef:
    """Validated scope fields (absent ones are None)."""
    return ScopeRef(org_id=scope["org_id"], repo_id=scope.get("repo_id"),
                    persona_id=scope.get("persona_id"), session_id=scope.get("session_id"))


def retrieve_command(data: Mapping[str, Any]) -> Retrieve:
    """Validated :class:`RetrieveRequestSerializer` data as the use case's command."""
    return Retrieve(
        query=data["query"], scope=scope_ref(data["scope"]),
        budget_tokens=data["budget_tokens"], k_lexical=data["k_lexical"],
        k_dense=data["k_dense"], rerank_top=data["rerank_top"], min_score=data["min_score"],
        freshness_halflife_days=data.get("freshness_halflife_days"),
        include_superseded=data["include_superseded"], as_of=data.get("as_of"),
        reranker=data.get("reranker"), max_age_days=data.get("max_age_days"),
        verified_only=data["verified_only"],
        exclude_states=tuple(dict.fromkeys(data.get("exclude_states") or ())))
