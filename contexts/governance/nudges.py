"""Nudges: asking a fragment's owner whether it is still accurate, by email and in the console.

* At most one unanswered (open or escalated) nudge per fragment — a partial unique constraint
  in the database, so re-running a scan (even two at once) never asks twice.
* The owner's email carries one signed link per answer (:func:`answer_links`); the console's
  owner inbox lists :func:`inbox` and calls :func:`answer_nudge`.
* Unanswered after ``GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS`` → escalated to the organization's
  tech leads and admins. A fragment whose owner is missing or deactivated goes to them at once.
* A nudge also closes by itself when its question is settled elsewhere (:func:`reconcile`):
  the fragment was edited, verified, retired or superseded after the nudge was opened.

Answering is authorized by the nudge itself: its addressee, the fragment's owner, the
organization's tech leads/admins and the scope's curators may answer it. The fragment change
that follows (edit, retire, hand over) runs as that person when they may curate the scope, else
as the system on their behalf — the nudge delegated the decision to them — and a
``nudge.answer`` audit event records who decided.

Emails are digests: a scan sends each person one email listing everything it asks them
(:func:`notify`), each fragment with its own signed links.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.template.loader import render_to_string
from django.urls import reverse

from accounts.models import Membership, Organization, Role
from accounts.permissions import OnBehalfOf, may
from contexts.governance import evidence
from contexts.governance.clock import resolve
from contexts.models import Fragment, FragmentStatus, FragmentVersion, Nudge
from contexts.models.governance import NudgeAnswer, NudgeKind, NudgeState
from contexts.services import audit
from contexts.services import fragments as fragment_service
from contexts.services.errors import InvalidOperation

logger = logging.getLogger(__name__)

OPENED, EXISTING, UNROUTABLE = "opened", "existing", "unroutable"
NUDGE_SALT = "contexts.governance.nudge"
LEAD_ROLES = (Role.TECH_LEAD, Role.ADMIN)
# URL slugs of the one-click links ↔ stored answers.
ANSWER_SLUGS = {
    "still-accurate": NudgeAnswer.STILL_ACCURATE,
    "edit": NudgeAnswer.EDITED,
    "retire": NudgeAnswer.RETIRED,
    "hand-over": NudgeAnswer.HANDED_OVER,
}
SLUG_OF = {answer: slug for slug, answer in ANSWER_SLUGS.items()}


class NudgeAlreadyAnswered(InvalidOperation):
    def __init__(self, nudge: Nudge) -> None:
        super().__init__("this nudge has already been answered", field="answer")
        self.nudge = nudge


# --- who ---------------------------------------------------------------------------------------
def tech_leads(org: Organization | int) -> list[AbstractBaseUser]:
    """Active tech leads and admins of the organization, in a stable order."""
    org_id = org if isinstance(org, int) else org.pk
    return list(get_user_model().objects.filter(
        is_active=True, memberships__org_id=org_id, memberships__role__in=LEAD_ROLES,
    ).distinct().order_by("pk"))


def owner_reachable(fragment: Fragment) -> bool:
    return fragment.owner_id is not None and fragment.owner.is_active


def is_lead(user: AbstractBaseUser, org_id: int) -> bool:
    return Membership.objects.filter(user=user, org_id=org_id, role__in=LEAD_ROLES).exists()


def may_answer(user: Any, nudge: Nudge) -> bool:
    """Superusers; the nudge's addressee or the fragment's owner while they may still read the
    fragment (a link outlives a membership); tech leads and curators of the scope."""
    if not isinstance(user, AbstractBaseUser) or not user.is_active:
        return False
    if user.is_superuser:
        return True
    if user.pk in (nudge.owner_id, nudge.fragment.owner_id) and may(
            user, "view", nudge.fragment.scope):
        return True
    # Tech leads answer escalations; curators may settle any question about their scope.
    return is_lead(user, nudge.fragment.org_id) or may(user, "curate", nudge.fragment.scope)


def inbox(user: AbstractBaseUser) -> QuerySet[Nudge]:
    """Unanswered nudges for ``user``: addressed to them, plus the escalated ones of every
    organization they lead (what the console's owner inbox lists)."""
    led = Membership.objects.filter(user=user, role__in=LEAD_ROLES).values("org_id")
    return (Nudge.objects.exclude(state=NudgeState.ANSWERED)
            .filter(Q(owner=user) | Q(state=NudgeState.ESCALATED, fragment__org_id__in=led))
            .select_related("fragment", "owner").order_by("created_at", "pk"))


def unanswered(fragment: Fragment, kind: str = NudgeKind.STALE) -> Nudge | None:
    """The fragment's unanswered nudge of ``kind`` (at most one of each kind is open)."""
    return (Nudge.objects.filter(fragment=fragment, kind=kind)
            .exclude(state=NudgeState.ANSWERED).first())


# --- signed links ------------------------------------------------------------------------------
def signed_token(nudge: Nudge, user: AbstractBaseUser) -> str:
    """A link credential for exactly this nudge and this person (forwarding the email forwards
    the right to answer this one question, nothing more); expires after
    ``GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS``. The token is signed, not encrypted: anyone holding
    the link can read it, so it names the nudge by its public id, never its integer key."""
    return signing.TimestampSigner(salt=NUDGE_SALT).sign_object(
        {"n": nudge.public_id, "u": user.pk})


def read_token(token: str) -> tuple[str | int, int]:
    """(the nudge's public id, user id); raises :class:`django.core.signing.BadSignature` (or
    its subclass ``SignatureExpired``) for a forged, altered or expired token. A link mailed
    before nudges had public ids names its nudge by key: it stays good until it expires."""
    max_age = dt.timedelta(days=settings.GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS)
    data = signing.TimestampSigner(salt=NUDGE_SALT).unsign_object(token, max_age=max_age)
    if not isinstance(data, dict) or not {"n", "u"} <= set(data):
        raise signing.BadSignature("malformed nudge token")
    nudge = data["n"]
    if not isinstance(nudge, (str, int)) or isinstance(nudge, bool):
        raise signing.BadSignature("malformed nudge token")
    return nudge, int(data["u"])


def by_token_id(nudge: str | int) -> Q:
    """The filter finding the nudge a link names (:func:`read_token`)."""
    return Q(public_id=nudge) if isinstance(nudge, str) else Q(pk=nudge)


def answer_links(nudge: Nudge, user: AbstractBaseUser) -> dict[str, str]:
    token = signed_token(nudge, user)
    return {slug: settings.BASE_URL + reverse("governance:nudge-answer", args=[token, slug])
            for slug in ANSWER_SLUGS}


# --- email ---------------------------------------------------------------------------------------
def send_nudge_email(items: list[Nudge], user: AbstractBaseUser, *, escalated: bool = False,
                     handed_over_by: Any = None) -> bool:
    """One email to ``user`` about ``items`` (a digest when a scan finds several of their
    fragments — nobody wants fifty emails), each with its own signed links. A mail failure is
    logged, never raised: the nudges are already in the inbox."""
    if not items:
        return False
    if not user.email:
        logger.warning("%d nudges: %s has no email address", len(items), user.get_username())
        return False
    entries = [{"nudge": nudge, "fragment": nudge.fragment, "owner": nudge.fragment.owner,
                "links": {slug.replace("-", "_"): url
                          for slug, url in answer_links(nudge, user).items()}}
               for nudge in items]
    context = {"entries": entries, "user": user, "escalated": escalated,
               "handed_over_by": handed_over_by, "org": items[0].fragment.org,
               "base_url": settings.BASE_URL,
               "max_age_days": settings.GOVERNANCE_NUDGE_LINK_MAX_AGE_DAYS}
    if len(items) == 1:
        title = (items[0].fragment.title or items[0].fragment.public_id)[:60]
        subject = (f"[Contexts] Unanswered: is “{title}” still accurate?" if escalated
                   else f"[Contexts] Is “{title}” still accurate?")
    else:
        subject = (f"[Contexts] {len(items)} unanswered questions about stale fragments"
                   if escalated else f"[Contexts] {len(items)} of your fragments may be stale")
    try:
        send_mail(subject, render_to_string("governance/email/nudge.txt", context),
                  settings.DEFAULT_FROM_EMAIL, [user.email])
    except Exception:  # noqa: BLE001 - see docstring
        logger.exception("could not email %d nudges to %s", len(items), user.get_username())
        return False
    return True


def notify(opened: Iterable[Nudge] = (), escalated: Iterable[Nudge] = ()) -> int:
    """Email owners about their open nudges and tech leads about escalated ones, one email per
    person and kind; returns emails sent."""
    per_owner: dict[int, tuple[AbstractBaseUser, list[Nudge]]] = {}
    for nudge in opened:
        per_owner.setdefault(nudge.owner_id, (nudge.owner, []))[1].append(nudge)
    per_lead: dict[int, tuple[AbstractBaseUser, list[Nudge]]] = {}
    leads_of: dict[int, list[AbstractBaseUser]] = {}
    for nudge in escalated:
        org_id = nudge.fragment.org_id
        if org_id not in leads_of:
            leads_of[org_id] = tech_leads(org_id)
        for lead in leads_of[org_id]:
            per_lead.setdefault(lead.pk, (lead, []))[1].append(nudge)
    sent = sum(send_nudge_email(items, user) for user, items in per_owner.values())
    sent += sum(send_nudge_email(items, user, escalated=True)
                for user, items in per_lead.values())
    return sent


# --- opening and escalating --------------------------------------------------------------------
def open_nudge(fragment: Fragment, reasons: list[dict], *, now: dt.datetime | None = None,
               kind: str = NudgeKind.STALE, detail: dict | None = None
               ) -> tuple[str, Nudge | None]:
    """Make sure the ``fragment`` has an unanswered nudge of ``kind`` (a stale one by
    default), without emailing; ``detail`` is what its owner needs to answer it.

    Returns ``(OPENED, nudge)`` for a new one (open, or escalated at once when the owner is
    missing or deactivated), ``(EXISTING, nudge)`` — escalated now if its owner has since been
    deactivated — or ``(UNROUTABLE, None)`` when there is nobody to ask.
    """
    now = resolve(now)
    existing = unanswered(fragment, kind)
    if existing is not None:
        if existing.reasons != reasons or (detail is not None and existing.detail != detail):
            # Keep the question current (what the inbox shows); no second email.
            existing.reasons = reasons
            existing.detail = existing.detail if detail is None else detail
            Nudge.objects.filter(pk=existing.pk).update(reasons=reasons,
                                                        detail=existing.detail)
        if existing.state == NudgeState.OPEN and not owner_reachable(fragment):
            escalate(existing, now=now, why="the owner's account is deactivated",
                     send=False)
        return EXISTING, existing
    direct = owner_reachable(fragment)
    leads = [] if direct else tech_leads(fragment.org_id)
    addressee = fragment.owner if fragment.owner_id else (leads[0] if leads else None)
    if addressee is None or (not direct and not leads):
        logger.warning("stale fragment %s: no active owner and no tech lead to ask",
                       fragment.public_id)
        return UNROUTABLE, None
    try:
        with transaction.atomic():
            nudge = Nudge.objects.create(
                fragment=fragment, owner=addressee, reasons=reasons, created_at=now,
                kind=kind, detail=detail or {},
                state=NudgeState.OPEN if direct else NudgeState.ESCALATED,
                escalated_at=None if direct else now)
    except IntegrityError:
        # A concurrent scan opened it first (one_open_nudge_per_fragment_kind).
        return EXISTING, unanswered(fragment, kind)
    return OPENED, nudge


def ensure_nudge(fragment: Fragment, reasons: list[dict], *, now: dt.datetime | None = None,
                 kind: str = NudgeKind.STALE, detail: dict | None = None) -> str:
    """:func:`open_nudge` and email whoever must answer a new or newly escalated nudge."""
    was = unanswered(fragment, kind)
    outcome, nudge = open_nudge(fragment, reasons, now=now, kind=kind, detail=detail)
    if nudge is not None:
        newly_escalated = nudge.state == NudgeState.ESCALATED and (
            outcome == OPENED or (was is not None and was.state == NudgeState.OPEN))
        if newly_escalated:
            notify(escalated=[nudge])
        elif outcome == OPENED:
            notify(opened=[nudge])
    return outcome


def escalate(nudge: Nudge, *, now: dt.datetime | None = None, why: str = "",
             send: bool = True) -> bool:
    """Open → escalated (once: the conditional update makes concurrent runs harmless)."""
    now = resolve(now)
    changed = Nudge.objects.filter(pk=nudge.pk, state=NudgeState.OPEN).update(
        state=NudgeState.ESCALATED, escalated_at=now)
    if not changed:
        return False
    nudge.state, nudge.escalated_at = NudgeState.ESCALATED, now
    logger.info("nudge %s escalated%s", nudge.pk, f": {why}" if why else "")
    if send:
        notify(escalated=[nudge])
    return True


def escalate_owned_by(owner: AbstractBaseUser, why: str) -> list[Nudge]:
    """Escalate the open nudges of a person who can no longer be asked (their account is
    deactivated, by an administrator or because the identity provider let them go): theirs and
    those of the fragments they own. Not e-mailed here: the caller notifies once committed."""
    pending = (Nudge.objects.filter(state=NudgeState.OPEN)
               .filter(Q(owner=owner) | Q(fragment__owner=owner))
               .select_related("fragment__org", "owner").order_by("pk"))
    return [nudge for nudge in pending if escalate(nudge, why=why, send=False)]


def escalate_overdue(*, org: Organization | None = None, now: dt.datetime | None = None,
                     send: bool = True) -> list[Nudge]:
    """Escalate nudges open for ``GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS``; returns them."""
    now = resolve(now)
    cutoff = now - dt.timedelta(days=settings.GOVERNANCE_NUDGE_ESCALATE_AFTER_DAYS)
    overdue = Nudge.objects.filter(state=NudgeState.OPEN, created_at__lte=cutoff)
    if org is not None:
        overdue = overdue.filter(fragment__org=org)
    escalated = [nudge for nudge in overdue.select_related("fragment__org", "owner")
                 .order_by("pk") if escalate(nudge, now=now, why="unanswered", send=False)]
    if send:
        notify(escalated=escalated)
    return escalated


def reconcile(*, org: Organization | None = None, fragment_ids: Iterable[int] | None = None,
              now: dt.datetime | None = None) -> int:
    """Close unanswered nudges whose question was settled elsewhere: the fragment left
    retrieval (retired/superseded → "retired"), was edited ("edited") or verified ("still
    accurate") after the nudge was opened. A source conflict is settled only by its answer
    (which moves the merge base) or by the fragment leaving retrieval: an edit or a
    verification leaves the base where it was, so the question stands. Returns how many
    were closed."""
    now = resolve(now)
    pending = Nudge.objects.exclude(state=NudgeState.ANSWERED).select_related("fragment")
    if org is not None:
        pending = pending.filter(fragment__org=org)
    if fragment_ids is not None:
        pending = pending.filter(fragment_id__in=list(fragment_ids))
    closed = 0
    for nudge in pending:
        fragment = nudge.fragment
        answer, at, by = None, now, None
        if fragment.status != FragmentStatus.ACTIVE:
            answer, at = NudgeAnswer.RETIRED, fragment.valid_to or now
        elif nudge.kind == NudgeKind.SOURCE_CONFLICT:
            pass
        elif fragment.last_edited_at > nudge.created_at:
            answer, at = NudgeAnswer.EDITED, fragment.last_edited_at
            by = (FragmentVersion.objects.filter(fragment=fragment, number=fragment.version)
                  .values_list("editor_id", flat=True).first())
        elif fragment.verified_at and fragment.verified_at > nudge.created_at:
            answer, at = NudgeAnswer.STILL_ACCURATE, fragment.verified_at
        if answer is not None:
            closed += Nudge.objects.filter(pk=nudge.pk).exclude(
                state=NudgeState.ANSWERED).update(state=NudgeState.ANSWERED, answer=answer,
                                                  answered_at=at, answered_by_id=by)
    return closed


# --- answering ---------------------------------------------------------------------------------
def answer_nudge(user: AbstractBaseUser, nudge: Nudge, answer: str, new_owner=None, *,
                 body: str | None = None, title: str | None = None,
                 based_on_version: int | None = None, now: dt.datetime | None = None) -> Nudge:
    """Apply an answer (a :class:`NudgeAnswer` value or its URL slug) to ``nudge``.

    * still accurate → ``fragment.verified_at = now``;
    * edited → with ``body``: a new version now; without: the nudge stays unanswered until an
      edit lands (closed by :func:`reconcile`) — unless the fragment was already edited since
      the nudge was opened (the console edits first, then calls this), which closes it now;
    * retired → :func:`~contexts.services.fragments.retire_fragment`;
    * handed over → :func:`~contexts.services.fragments.reassign_owner` to ``new_owner`` (an
      active member of the organization), who gets an open nudge of their own (and an email).

    Raises :class:`PermissionDenied`, :class:`NudgeAlreadyAnswered` or
    :class:`~contexts.services.errors.InvalidOperation` (naming the field).
    """
    now = resolve(now)
    answer = ANSWER_SLUGS.get(answer, answer)
    if answer not in ANSWER_SLUGS.values():
        # (A source conflict's own answers go through usecases.source_conflicts.)
        raise InvalidOperation(f"unknown answer {answer!r}", field="answer")
    handed_to: Nudge | None = None
    with transaction.atomic():
        nudge = Nudge.objects.select_for_update(of=("self",)).select_related(
            "fragment", "fragment__owner", "fragment__scope").get(pk=nudge.pk)
        fragment = nudge.fragment
        if nudge.state == NudgeState.ANSWERED:
            raise NudgeAlreadyAnswered(nudge)
        if not may_answer(user, nudge):
            raise PermissionDenied("only the owner or a tech lead may answer this nudge")
        if nudge.kind == NudgeKind.SOURCE_CONFLICT and answer in (
                NudgeAnswer.STILL_ACCURATE, NudgeAnswer.EDITED):
            # Either would close it with the merge base unmoved: the next sync would ask again.
            raise InvalidOperation("answer a source conflict with keep mine, take upstream or "
                                   "edit the merge", field="answer")
        # An owner who is not a curator answers by the owner's right: recorded as themselves.
        principal = user if may(user, "curate", fragment.scope) else OnBehalfOf(user)
        if answer == NudgeAnswer.STILL_ACCURATE:
            # Verified as it stands: what it rests on is re-resolved, current again.
            fragment_service.verify_fragment(principal, fragment, now=now,
                                             note={"nudge": nudge.public_id},
                                             evidence=evidence.resnapshot(fragment))
        elif answer == NudgeAnswer.EDITED:
            if body is not None:
                fragment_service.edit_fragment(
                    principal, fragment,
                    based_on_version=fragment.version if based_on_version is None
                    else based_on_version,
                    body=body, title=title, reason="answered a staleness nudge")
            elif fragment.last_edited_at <= nudge.created_at:
                return nudge  # closes when the edit lands
        elif answer == NudgeAnswer.RETIRED:
            if fragment.status == FragmentStatus.ACTIVE:
                fragment_service.retire_fragment(
                    principal, fragment, reason="owner answered a staleness nudge: retire")
        elif answer == NudgeAnswer.HANDED_OVER:
            new_owner = _check_new_owner(new_owner, fragment)
            fragment_service.reassign_owner(principal, fragment, new_owner)
        nudge.state, nudge.answer = NudgeState.ANSWERED, answer
        nudge.answered_by, nudge.answered_at = user, now
        nudge.save(update_fields=["state", "answer", "answered_by", "answered_at"])
        audit.record(user, "nudge.answer", fragment, after={
            "nudge": nudge.public_id, "answer": answer, "reasons": nudge.reasons,
            "new_owner": new_owner.get_username() if new_owner is not None else None})
        if answer == NudgeAnswer.HANDED_OVER:
            handed_to = Nudge.objects.create(
                fragment=fragment, owner=new_owner, created_at=now, kind=nudge.kind,
                detail=nudge.detail,  # the same question (a source conflict's three texts)
                reasons=[*nudge.reasons, {"code": "handed_over", "detail": (
                    f"handed over to you by {user.get_username()}")}])
    if handed_to is not None:
        send_nudge_email([handed_to], handed_to.owner, handed_over_by=user)
    return nudge


def _check_new_owner(new_owner: Any, fragment: Fragment) -> AbstractBaseUser:
    if new_owner is None:
        raise InvalidOperation("name the new owner", field="new_owner")
    if not new_owner.is_active:
        raise InvalidOperation("the new owner's account is deactivated", field="new_owner")
    if not Membership.objects.filter(user=new_owner, org_id=fragment.org_id).exists():
        raise InvalidOperation("the new owner is not a member of the organization",
                               field="new_owner")
    if new_owner.pk == fragment.owner_id:
        raise InvalidOperation("that is already the owner", field="new_owner")
    return new_owner


def candidates_for_handover(fragment: Fragment) -> QuerySet:
    """Active members of the fragment's organization other than its owner (for the form)."""
    return (get_user_model().objects.filter(is_active=True, memberships__org_id=fragment.org_id)
            .exclude(pk=fragment.owner_id).distinct().order_by("username"))


def follow_fragment_changes(sender: Any, fragment_ids: list[int], **kwargs: Any) -> None:
    """An edit, retirement or supersession made anywhere settles the fragment's open nudge.

    A receiver of ``fragments_changed``, connected in ``ContextsConfig.ready()`` (not when
    this module happens to be imported)."""
    try:
        reconcile(fragment_ids=fragment_ids)
    except Exception:  # noqa: BLE001 - the change is committed; the next scan reconciles too
        logger.exception("could not reconcile nudges of %d fragments", len(fragment_ids))
