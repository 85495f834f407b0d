"""Agents' proposals and their review (issue 23, item 5; docs/adr/0017).

An agent proposes

- to **promote** a session fragment it reads to the session's repository or to the
  organization (``POST /api/fragments/{id}/propose``, MCP ``propose_promotion``), or
- a **new** repository fragment directly (``POST /api/proposals``, MCP ``propose_fragment``),
  when its token allows proposals (``ApiToken.may_propose``).

Nothing proposed is retrievable outside its session until approved: the proposal keeps the text
(screened for secrets as every write is), not a fragment. A tech lead or administrator of the
target scope (``pin`` there: an organization role, or a role on that repository) approves it
(optionally editing title and body), rejects it with a reason, or merges it into an existing
fragment (a new version of that fragment through the door's ``edit_fragment``). Approval
creates the fragment at the target scope through the one door (``create_fragment``: secret
screening, version, audit event, change feed), owned by the approving reviewer. Where the
target scope's policy is ``auto-accept`` and the token is trusted (``ApiToken.auto_accept``),
the proposal is approved at once by the product (``SYSTEM``), the fragment owned by the token's
creator, audited as ``proposal.auto_accept``.

Every decision is audited (``proposal.create``, ``proposal.approve``, ``proposal.merge``,
``proposal.reject``, ``proposal.auto_accept``). The proposing token reads its own proposals
and their outcome; anyone else gets a 404.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from accounts.models import (
    ApiToken,
    Organization,
    ProposalPolicy,
    Repository,
    Scope,
    ScopeKind,
    Session,
)
from accounts.permissions import SYSTEM, may, principal_user
from accounts.scopes import Readable, readable_scopes
from contexts.kernel.ids import InvalidField, parse_public_id
from contexts.models import (
    FragmentKind,
    FragmentStatus,
    Proposal,
    ProposalKind,
    ProposalState,
    ProposalTarget,
)
from contexts.models.secrets import SecretAction, SecretOrigin
from contexts.services import audit, secrets
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment, edit_fragment
from contexts.usecases.errors import NotVisible, Refused
from contexts.usecases.fragments import MAX_BODY_CHARS, visible_fragment
from contexts.usecases.retrieval import ScopeRef
from contexts.usecases.scoping import refuse, resolve_in_org, resolve_org

TARGETS = tuple(ProposalTarget.values)
MAX_REASON_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class Promote:
    fragment_id: str  # a public id, as the caller sent it
    target: str       # "repository" or "organization"


@dataclasses.dataclass(frozen=True)
class ProposeNew:
    scope: ScopeRef   # org_id and repo_id
    body: str
    title: str = ""
    kind: str = FragmentKind.PROSE


def snapshot(proposal: Proposal) -> dict:
    return {"kind": proposal.kind, "target": proposal.target,
            "target_scope": proposal.target_scope.public_id, "state": proposal.state,
            "title": proposal.title,
            "source_fragment": (proposal.source_fragment.public_id
                                if proposal.source_fragment_id else None),
            "result_fragment": (proposal.result_fragment.public_id
                                if proposal.result_fragment_id else None),
            "auto_accepted": proposal.auto_accepted, "reason": proposal.reason}


def _screened(principal: Any, org_id: int, body: str, title: str) -> tuple[str, str]:
    """The text to keep, with secrets redacted (or refused, recorded) as the door does."""
    try:
        screened = secrets.screen_write(body=body, title=title, org_id=org_id,
                                        origin=SecretOrigin.WRITE)
    except secrets.SecretRefused as refused:
        secrets.record_refusal(principal, refused)
        raise
    if screened.findings:
        secrets.record(principal, screened.findings, org=org_id, origin=SecretOrigin.WRITE,
                       action=SecretAction.REDACTED)
    return screened.body, screened.title


def _policy(proposal: Proposal) -> str:
    if proposal.target_scope.kind == ScopeKind.REPO:
        return Repository.objects.filter(scope_id=proposal.target_scope_id).values_list(
            "proposal_policy", flat=True).first() or ProposalPolicy.REVIEW
    return Organization.objects.filter(pk=proposal.org_id).values_list(
        "proposal_policy", flat=True).first() or ProposalPolicy.REVIEW


def _create(principal: Any, **fields: Any) -> Proposal:
    token = principal if isinstance(principal, ApiToken) else None
    with transaction.atomic():
        if token is not None:
            # Counted under the token's row lock, so concurrent proposals cannot pass together.
            ApiToken.objects.select_for_update().filter(pk=token.pk).first()
            limit = settings.CONTEXTS_PROPOSALS_PER_TOKEN
            if Proposal.objects.filter(proposed_by=token,
                                       state=ProposalState.OPEN).count() >= limit:
                raise InvalidOperation(
                    f"this token already has {limit} proposals waiting for review, the most it "
                    "may have (CONTEXTS_PROPOSALS_PER_TOKEN)", field="proposal")
        proposal = Proposal.objects.create(
            proposed_by=token, proposed_by_user=principal_user(principal), **fields)
        audit.record(principal, "proposal.create", proposal, after=snapshot(proposal))
        if (token is not None and token.auto_accept
                and _policy(proposal) == ProposalPolicy.AUTO_ACCEPT):
            _approve(SYSTEM, proposal, owner=token.created_by, action="proposal.auto_accept",
                     actor=token)
    return proposal


def propose_promotion(principal: Any, command: Promote) -> Proposal:
    """Propose that a session fragment the principal reads become a repository or
    organization fragment."""
    fragment = visible_fragment(principal, command.fragment_id)
    if command.target not in TARGETS:
        raise InvalidOperation(f"target must be one of {', '.join(TARGETS)}", field="target")
    if fragment.scope.kind != ScopeKind.SESSION:
        raise InvalidOperation("only a session fragment can be proposed for promotion",
                               field="fragment_id")
    if fragment.status != FragmentStatus.ACTIVE:
        raise InvalidOperation(f"the fragment is {fragment.status}", field="fragment_id")
    if not isinstance(principal, ApiToken) and not may(principal, "contribute",
                                                       fragment.scope):
        raise Refused("you may not propose this fragment")
    session = Session.objects.select_related("repository__scope", "org__scope").get(
        org_id=fragment.org_id, scope_id=fragment.scope_id)
    if command.target == ProposalTarget.REPOSITORY:
        if session.repository is None:
            raise InvalidOperation("this session belongs to no repository", field="target")
        target_scope = session.repository.scope
    else:
        target_scope = session.org.scope
    if Proposal.objects.filter(org_id=fragment.org_id, source_fragment=fragment,
                               target_scope=target_scope, state=ProposalState.OPEN).exists():
        raise InvalidOperation("this fragment is already proposed there", field="fragment_id")
    return _create(principal, org_id=fragment.org_id, kind=ProposalKind.PROMOTE,
                   target=command.target, target_scope=target_scope,
                   source_fragment=fragment, title=fragment.title, body=fragment.body,
                   fragment_kind=fragment.kind)


def propose_new(principal: Any, command: ProposeNew) -> Proposal:
    """Propose a new repository fragment: only a token that allows proposals."""
    org = resolve_org(principal, command.scope.org_id)
    if not command.scope.repo_id:
        raise InvalidOperation("name the repository (repo_id)", field="scope.repo_id")
    repository = resolve_in_org(org, "repo", command.scope.repo_id)
    if not may(principal, "view", repository.scope):
        raise refuse()
    if not (isinstance(principal, ApiToken) and principal.may_propose):
        raise Refused("this token may not propose fragments (ask an administrator to allow "
                      "proposals)")
    if not command.body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    if len(command.body) > MAX_BODY_CHARS:
        raise InvalidOperation(f"at most {MAX_BODY_CHARS} characters", field="body")
    if command.kind not in FragmentKind.values:
        raise InvalidOperation(f"unknown kind {command.kind!r}", field="kind")
    body, title = _screened(principal, org.pk, command.body, command.title)
    return _create(principal, org_id=org.pk, kind=ProposalKind.NEW,
                   target=ProposalTarget.REPOSITORY, target_scope=repository.scope,
                   title=title[:300], body=body, fragment_kind=command.kind)


# --- the proposer's view ------------------------------------------------------------------------
def own_proposals(principal: Any) -> QuerySet[Proposal]:
    """The proposals the principal made (a token: its own; a person: theirs)."""
    if isinstance(principal, ApiToken):
        found = Proposal.objects.filter(org_id=principal.org_id, proposed_by=principal)
    elif principal_user(principal) is not None:
        found = Proposal.objects.filter(proposed_by_user=principal_user(principal),
                                        proposed_by__isnull=True)
    else:
        found = Proposal.objects.none()
    return found.select_related("target_scope", "source_fragment", "result_fragment")


def own_proposal(principal: Any, public_id: str) -> Proposal:
    public_id = parse_public_id(public_id, "proposal_id")
    proposal = own_proposals(principal).filter(public_id=public_id).first()
    if proposal is None:
        raise NotVisible("proposal")
    return proposal


# --- review -------------------------------------------------------------------------------------
def may_review(principal: Any, proposal: Proposal, *, known: Readable | None = None) -> bool:
    return may(principal, "pin", proposal.target_scope, known=known)


# ``known``, below: the principal's readable scopes when the caller has read them already (a
# console page asks these for its navigation on every request).
def reviews_in(principal: Any, org: Organization, *, known: Readable | None = None) -> bool:
    """Whether the principal reviews proposals in the organization at all: ``pin`` on it (an
    organization tech lead or administrator), or on one of its repositories — a tech lead of
    that repository only (a guardian grant), who reviews the proposals targeting it and no
    others (:func:`may_review` decides per proposal)."""
    readable = known if known is not None else readable_scopes(principal)
    if may(principal, "pin", org.scope, known=readable):
        return True
    repositories = (Repository.objects.filter(org=org, scope_id__in=sorted(readable))
                    .select_related("scope"))
    return any(may(principal, "pin", repository.scope, known=readable)
               for repository in repositories)


def review_queue(principal: Any, org: Organization, state: str = ProposalState.OPEN, *,
                 known: Readable | None = None) -> list[Proposal]:
    """The organization's proposals whose target scope the principal reviews."""
    readable = known if known is not None else readable_scopes(principal)
    found = (Proposal.objects.filter(org_id=org.pk, target_scope_id__in=sorted(readable))
             .select_related("target_scope", "source_fragment__scope", "result_fragment",
                             "proposed_by", "decided_by"))
    if state:
        found = found.filter(state=state)
    return [p for p in found.order_by("-created_at", "-id")
            if may_review(principal, p, known=readable)]


def open_count(principal: Any, org: Organization, *, known: Readable | None = None) -> int:
    """How many of :func:`review_queue`'s open proposals there are (the navigation's badge, on
    every console page): counted per target scope, without reading the proposals themselves."""
    readable = known if known is not None else readable_scopes(principal)
    per_scope = dict(Proposal.objects.filter(org_id=org.pk, state=ProposalState.OPEN,
                                             target_scope_id__in=sorted(readable))
                     .values_list("target_scope_id").annotate(n=Count("id")))
    if not per_scope:
        return 0
    scopes = Scope.objects.in_bulk(list(per_scope))
    return sum(n for scope_id, n in per_scope.items()
               if may(principal, "pin", scopes[scope_id], known=readable))


def reviewable(principal: Any, org: Organization, public_id: str) -> Proposal:
    """A proposal of ``org`` the principal reads (else :class:`NotVisible`) and reviews (else
    :class:`Refused`)."""
    public_id = parse_public_id(public_id, "proposal_id")
    proposal = (Proposal.objects.filter(org_id=org.pk, public_id=public_id)
                .select_related("target_scope", "source_fragment", "org").first())
    if proposal is None or not may(principal, "view", proposal.target_scope):
        raise NotVisible("proposal")
    if not may_review(principal, proposal):
        raise Refused("only tech leads and administrators review proposals")
    return proposal


def _locked_open(proposal: Proposal) -> Proposal:
    current = (Proposal.objects.select_for_update(of=("self",))
               .select_related("target_scope", "source_fragment", "result_fragment")
               .get(pk=proposal.pk))
    if current.state != ProposalState.OPEN:
        raise InvalidOperation(f"this proposal is already {current.state}", field="proposal")
    return current


def _decide(proposal: Proposal, decider: Any, state: str, **fields: Any) -> None:
    proposal.state = state
    proposal.decided_by = principal_user(decider)
    proposal.decided_at = timezone.now()
    for key, value in fields.items():
        setattr(proposal, key, value)
    proposal.save()


def _approve(principal: Any, proposal: Proposal, *, title: str | None = None,
             body: str | None = None, owner=None, action: str = "proposal.approve",
             actor: Any = None) -> Proposal:
    current = _locked_open(proposal)
    before = snapshot(current)
    fragment = create_fragment(
        principal, current.target_scope,
        body=current.body if body is None else body,
        title=current.title if title is None else title,
        kind=current.fragment_kind, owner=owner,
        reason=f"approved proposal {current.public_id}")
    _decide(current, principal, ProposalState.APPROVED, result_fragment=fragment,
            auto_accepted=action == "proposal.auto_accept")
    audit.record(actor or principal, action, current, before=before, after=snapshot(current))
    proposal.__dict__.update(current.__dict__)
    return current


def approve(principal: Any, proposal: Proposal, *, title: str | None = None,
            body: str | None = None) -> Proposal:
    """Create the fragment at the target scope (the reviewer's edit of title and body, if
    given), owned by the reviewer."""
    if not may_review(principal, proposal):
        raise Refused("only tech leads and administrators review proposals")
    if body is not None and not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    with transaction.atomic():
        return _approve(principal, proposal, title=title, body=body)


def reject(principal: Any, proposal: Proposal, reason: str) -> Proposal:
    if not may_review(principal, proposal):
        raise Refused("only tech leads and administrators review proposals")
    reason = reason.strip()
    if not reason:
        raise InvalidOperation("say why it is rejected", field="reason")
    with transaction.atomic():
        current = _locked_open(proposal)
        before = snapshot(current)
        _decide(current, principal, ProposalState.REJECTED, reason=reason[:MAX_REASON_CHARS])
        audit.record(principal, "proposal.reject", current, before=before,
                     after=snapshot(current))
    return current


def merge(principal: Any, proposal: Proposal, into: str, *, body: str,
          title: str | None = None) -> Proposal:
    """Merge the proposal into an existing active fragment of the target scope the reviewer
    curates: that fragment gets a new version with ``body`` (the reviewer's merged text)."""
    if not may_review(principal, proposal):
        raise Refused("only tech leads and administrators review proposals")
    try:
        target = visible_fragment(principal, into)
    except (NotVisible, InvalidField):
        raise InvalidOperation("no such fragment", field="into") from None
    if target.org_id != proposal.org_id or target.status != FragmentStatus.ACTIVE:
        raise InvalidOperation("merge into an active fragment of this organization",
                               field="into")
    if target.scope_id != proposal.target_scope_id:
        raise InvalidOperation("merge into a fragment of the proposal's target scope",
                               field="into")
    if not body.strip():
        raise InvalidOperation("body must not be empty", field="body")
    with transaction.atomic():
        current = _locked_open(proposal)
        before = snapshot(current)
        fragment = edit_fragment(principal, target, based_on_version=target.version,
                                 body=body, title=title,
                                 reason=f"merged proposal {current.public_id}")
        _decide(current, principal, ProposalState.MERGED, result_fragment=fragment)
        audit.record(principal, "proposal.merge", current, before=before,
                     after=snapshot(current))
    return current


def outcome(proposal: Proposal) -> dict[str, Any]:
    """What the proposer sees (REST and MCP)."""
    return {
        "id": proposal.public_id, "kind": proposal.kind, "target": proposal.target,
        "target_scope": proposal.target_scope.public_id, "state": proposal.state,
        "title": proposal.title,
        "source_fragment": (proposal.source_fragment.public_id
                            if proposal.source_fragment_id else None),
        "fragment": (proposal.result_fragment.public_id
                     if proposal.result_fragment_id else None),
        "auto_accepted": proposal.auto_accepted,
        "reason": proposal.reason or None,
        "created_at": proposal.created_at, "decided_at": proposal.decided_at,
    }


# --- policy -------------------------------------------------------------------------------------
def policies(principal: Any, org: Organization) -> list[tuple[Any, bool]]:
    """The organization and its repositories the principal reads, each with whether the
    principal may set its proposal policy (``administer`` there)."""
    readable = readable_scopes(principal)
    objects = [org, *Repository.objects.filter(org=org, scope_id__in=sorted(readable))
               .select_related("scope").order_by("slug")]
    return [(obj, may(principal, "administer", obj.scope)) for obj in objects]


def set_policy(principal: Any, org: Organization, scope_id: str, policy: str
               ) -> Organization | Repository:
    """Set the proposal policy of the organization or one of its repositories (named by its
    scope's public id): ``administer`` there; audited as ``proposal.policy``."""
    if policy not in ProposalPolicy.values:
        raise InvalidOperation(f"policy must be one of {', '.join(ProposalPolicy.values)}",
                               field="policy")
    scope_id = parse_public_id(scope_id, "scope_id")
    if scope_id == org.scope.public_id:
        obj: Organization | Repository = org
    else:
        obj = Repository.objects.filter(org=org, scope__public_id=scope_id).select_related(
            "scope").first()
        if obj is None or not may(principal, "view", obj.scope):
            raise NotVisible("scope")
    if not may(principal, "administer", obj.scope):
        raise Refused("only administrators set the proposal policy")
    with transaction.atomic():
        before = obj.proposal_policy
        type(obj).objects.filter(pk=obj.pk).update(proposal_policy=policy)
        obj.proposal_policy = policy
        if before != policy:
            audit.record(principal, "proposal.policy", obj, org=org,
                         before={"proposal_policy": before}, after={"proposal_policy": policy})
    return obj

