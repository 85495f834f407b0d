"""Adding an existing account to an organization: an invitation its owner accepts (security
issue 37, finding 3).

An organization administrator names an account by username or e-mail address. Nobody becomes
a member without their consent, and the administrator learns nothing about accounts outside
their organizations:

- **The answer reads the same** whether an account matched or not (or is deactivated): an
  invitation row is always written, naming the account when one matched and nobody otherwise,
  and the administrator's pages show only what they typed, its role and its state. Only "is
  already a member here" is said, which the members page shows anyway.
- **An e-mail address reaches only an account whose owner verified it**
  (``accounts.emails``): one typed into a new account by some administrator claims nothing, so
  it cannot divert an invitation meant for the person who reads that mailbox.
- **The person answers in the console** (their home page lists pending invitations). Accepting
  makes the membership with the invited role, as a role given by hand; declining closes it.
- **Audit** (in the inviting organization): ``member.invite`` (what the administrator typed,
  never the account it matched), ``member.accept`` (the person and their role: they joined),
  ``member.decline`` and ``member.withdraw`` (the invitation only). A decline is recorded
  without the person as its actor, so the organization's events and exports do not name an
  account that never joined.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts import emails
from accounts.models import (
    Invitation,
    InvitationState,
    Membership,
    Organization,
    Role,
    higher_role,
)
from accounts.permissions import SYSTEM, principal_user
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import NotVisible
from contexts.usecases.members import _check_role, require_admin

MAX_IDENTIFIER = 254
SENT = ("An invitation was sent to “{identifier}” if such an account exists; they become a "
        "member when they accept it.")


@dataclasses.dataclass(frozen=True)
class Invite:
    org: Organization
    identifier: str  # a username, or an e-mail address its owner verified
    role: str = Role.VIEWER


# --- the administrator's side ---------------------------------------------------------------
def invite(principal: Any, command: Invite) -> Invitation:
    """Invite the account ``identifier`` names. The returned invitation is shown only as what
    was typed; whether it names an account is never said."""
    require_admin(principal, command.org)
    role = _check_role(command.role)
    identifier = command.identifier.strip()
    if not identifier:
        raise InvalidOperation("name a username or an e-mail address", field="identifier")
    if len(identifier) > MAX_IDENTIFIER or "\x00" in identifier:
        raise InvalidOperation(f"at most {MAX_IDENTIFIER} characters, no NUL",
                               field="identifier")
    if Membership.objects.filter(Q(user__username=identifier)
                                 | Q(user__email__iexact=identifier),
                                 org=command.org).exists():
        # Within the administrator's own organization: the members page shows it anyway.
        raise InvalidOperation(f"{identifier} is already a member", field="identifier")
    with transaction.atomic():
        invitation = Invitation.objects.create(
            org=command.org, user=_account_named(identifier), identifier=identifier,
            role=role, invited_by=principal_user(principal))
        audit.record(principal, "member.invite", invitation, org=command.org,
                     after={"invitation": invitation.public_id, "identifier": identifier,
                            "role": role})
    return invitation


def _account_named(identifier: str) -> AbstractBaseUser | None:
    """The account a username names, or the one account whose owner verified this e-mail
    address; None otherwise (no account, or several: nobody is guessed at)."""
    users = get_user_model().objects
    user = users.filter(username=identifier).first()
    if user is not None or "@" not in identifier:
        return user
    owned = [candidate for candidate in users.filter(email__iexact=identifier)[:20]
             if emails.is_verified(candidate)]
    return owned[0] if len(owned) == 1 else None


def pending_of_org(principal: Any, org: Organization) -> list[Invitation]:
    """The organization's invitations not yet answered or answered with no (for its members
    page): each shows what the administrator typed, never the account it names."""
    require_admin(principal, org)
    return list(Invitation.objects.filter(
        org=org, state__in=[InvitationState.PENDING, InvitationState.DECLINED])
        .select_related("invited_by").order_by("-created_at", "-pk")[:200])


def withdraw(principal: Any, org: Organization, public_id: str) -> Invitation:
    require_admin(principal, org)
    with transaction.atomic():
        invitation = (Invitation.objects.select_for_update()
                      .filter(org=org, public_id=public_id,
                              state=InvitationState.PENDING).first())
        if invitation is None:
            raise NotVisible("invitation")
        _close(invitation, InvitationState.WITHDRAWN)
        audit.record(principal, "member.withdraw", invitation, org=org,
                     after={"invitation": invitation.public_id,
                            "identifier": invitation.identifier})
    return invitation


# --- the invited person's side --------------------------------------------------------------
def pending_for(user: AbstractBaseUser) -> list[Invitation]:
    """The invitations waiting for ``user``'s answer, newest first."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return []
    return list(Invitation.objects.filter(user=user, state=InvitationState.PENDING)
                .select_related("org", "invited_by").order_by("-created_at", "-pk"))


def accept(user: AbstractBaseUser, public_id: str) -> Membership:
    """Join the organization with the invited role (a role given by hand). Already a member
    there (the group mapping made one meanwhile): the hand role becomes the higher of the two.
    Every other pending invitation of the person to that organization closes with it."""
    with transaction.atomic():
        invitation = _own_pending(user, public_id)
        membership = (Membership.objects.select_for_update()
                      .filter(user=user, org=invitation.org).first())
        if membership is None:
            membership = Membership.objects.create(user=user, org=invitation.org,
                                                   role=invitation.role)
        else:
            membership.hand_role = higher_role(membership.hand_role, invitation.role)
            membership.save(update_fields=["hand_role"])
        for other in Invitation.objects.select_for_update().filter(
                user=user, org=invitation.org, state=InvitationState.PENDING):
            _close(other, InvitationState.ACCEPTED)
        audit.record(user, "member.accept", invitation, org=invitation.org,
                     after={"invitation": invitation.public_id,
                            "username": user.get_username(), "role": membership.role})
    return membership


def decline(user: AbstractBaseUser, public_id: str) -> Invitation:
    with transaction.atomic():
        invitation = _own_pending(user, public_id)
        _close(invitation, InvitationState.DECLINED)
        # Not the person as actor: the organization's events and export then name nobody
        # who never joined it.
        audit.record(SYSTEM, "member.decline", invitation, org=invitation.org,
                     after={"invitation": invitation.public_id,
                            "identifier": invitation.identifier})
    return invitation


def _own_pending(user: AbstractBaseUser, public_id: str) -> Invitation:
    invitation = (Invitation.objects.select_for_update().select_related("org")
                  .filter(public_id=public_id, user=user, state=InvitationState.PENDING)
                  .first()) if user.is_active else None
    if invitation is None:
        raise NotVisible("invitation")
    return invitation


def _close(invitation: Invitation, state: str) -> None:
    invitation.state, invitation.answered_at = state, timezone.now()
    invitation.save(update_fields=["state", "answered_at"])
