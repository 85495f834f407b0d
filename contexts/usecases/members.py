"""Members of an organization and their roles, for its administrators (the console's Members
page): create an account, set a role for the organization or for one repository, deactivate
and reactivate an account. An existing account is invited, not added: its owner accepts
(``contexts.usecases.invitations``).

One rule decides what a role allows: ``accounts.models.ROLE_ACTIONS``. An organization role is
a :class:`~accounts.models.Membership`; a repository role is the set of django-guardian object
permissions ``accounts.<action>_repository`` for the role's actions (plus ``view``), which
``accounts.permissions.may`` already walks up the scope tree. A repository role can only add
to what the organization role gives (``may`` grants what either allows).

Deactivating a member deactivates their account (``is_active``), the state governance already
treats as "the owner cannot be asked": their open nudges are escalated to the organization's
tech leads at once (``contexts.governance.nudges.escalate``), and every later one goes straight
to them. An organization administrator may deactivate only an account whose every organization
they administer; the last active administrator cannot be removed, demoted or deactivated.

A new account gets no password: the administrator is shown a set-password link once, and
another is e-mailed to the address they typed; either works once and expires after
``PASSWORD_RESET_TIMEOUT``. The address is the administrator's word, not the person's: it is
unverified (``accounts.emails``) until the person sets their password through the e-mailed
link, whose signed proof the administrator's copy lacks. Single sign-on links to an account
only through a verified address, so typing someone's address here claims nothing of theirs.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import assign_perm, get_perms, remove_perm

from accounts import emails
from accounts.models import (
    ROLE_ACTIONS,
    ApiToken,
    ExternalIdentity,
    Membership,
    Organization,
    Persona,
    Repository,
    Role,
    Session,
    higher_role,
)
from accounts.permissions import may
from contexts.governance import identity, nudges
from contexts.models import AuditEvent, Nudge
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases.errors import NotVisible, Refused

logger = logging.getLogger(__name__)

ROLE_ORDER = (Role.VIEWER, Role.CURATOR, Role.TECH_LEAD, Role.ADMIN)
# The guardian permissions of a repository role: "view" (what accounts.scopes reads) and the
# role's actions (what accounts.permissions.may asks).
REPO_ACTIONS = ("view", "curate", "pin", "administer")
NO_ROLE = ""


@dataclasses.dataclass(frozen=True)
class CreateMember:
    org: Organization
    username: str
    email: str
    role: str = Role.VIEWER


@dataclasses.dataclass(frozen=True)
class SetRole:
    org: Organization
    username: str
    role: str


@dataclasses.dataclass(frozen=True)
class SetRepositoryRole:
    org: Organization
    username: str
    repository: Repository
    role: str  # a Role value, or NO_ROLE to take the repository role away


@dataclasses.dataclass(frozen=True)
class Created:
    membership: Membership
    set_password_path: str  # shown once; the person sets their own password there
    emailed: bool


@dataclasses.dataclass
class MemberRow:
    membership: Membership
    repository_roles: dict[int, str]  # repository pk → role given on it by hand
    # Single sign-on: the roles the group mapping gives on repositories, the person's identity
    # at the provider (None for a local account), and their live agent tokens here.
    mapped_repository_roles: dict[int, str] = dataclasses.field(default_factory=dict)
    identity: ExternalIdentity | None = None
    live_tokens: int = 0

    @property
    def user(self):
        return self.membership.user


# --- who may --------------------------------------------------------------------------------
def require_admin(principal: Any, org: Organization) -> None:
    """404 for a principal who does not read the organization, 403 for one who may not
    administer it."""
    if not may(principal, "view", org.scope):
        raise NotVisible("organization")
    if not may(principal, "administer", org.scope):
        raise Refused("only administrators of the organization manage its members")


def _check_role(role: str, field: str = "role") -> str:
    if role not in Role.values:
        raise InvalidOperation(f"unknown role {role!r}", field=field)
    return role


def _membership(org: Organization, username: str) -> Membership:
    if "\x00" in username:  # no account has one (PostgreSQL text cannot hold it)
        raise NotVisible("member")
    membership = (Membership.objects.select_related("user")
                  .filter(org=org, user__username=username).first())
    if membership is None:
        raise NotVisible("member")
    return membership


def active_admins(org: Organization | int) -> int:
    return Membership.objects.filter(org=org, role=Role.ADMIN, user__is_active=True).count()


def _lock_admins(*orgs: Organization | int) -> None:
    """Two administrators demoting or deactivating each other at once cannot leave an
    organization without one: the admin memberships of every organization concerned are
    locked first, in one statement and one order (no deadlock between two such requests)."""
    list(Membership.objects.select_for_update().filter(org__in=orgs, role=Role.ADMIN)
         .order_by("pk").values_list("pk", flat=True))


def _is_last_admin(membership: Membership) -> bool:
    return (membership.role == Role.ADMIN and membership.user.is_active
            and active_admins(membership.org) <= 1)


# --- reading --------------------------------------------------------------------------------
ACCESS_EVENT_PREFIXES = ("sso.", "member.", "token.")


def access_events(principal: Any, org: Organization, limit: int = 50) -> list[AuditEvent]:
    """The organization's latest sign-ins (and refused ones), role changes — by hand and by
    the group mapping — deprovisionings and token revocations, newest first."""
    require_admin(principal, org)
    wanted = Q()
    for prefix in ACCESS_EVENT_PREFIXES:
        wanted |= Q(action__startswith=prefix)
    return list(AuditEvent.objects.filter(wanted, org=org).select_related("actor")
                .order_by("-created_at", "-pk")[:limit])


def list_members(principal: Any, org: Organization) -> list[MemberRow]:
    require_admin(principal, org)
    memberships = list(Membership.objects.filter(org=org).select_related("user")
                       .order_by("user__username"))
    repositories = {str(repo.pk): repo for repo in Repository.objects.filter(org=org)}
    by_pk = {repo.pk for repo in repositories.values()}
    # Every member's grants on the organization's repositories in one query.
    held: dict[tuple[int, int], set[str]] = defaultdict(set)
    grants = UserObjectPermission.objects.filter(
        content_type=ContentType.objects.get_for_model(Repository),
        object_pk__in=list(repositories), user__in=[m.user_id for m in memberships],
    ).values_list("user_id", "object_pk", "permission__codename")
    for user_id, object_pk, codename in grants:
        held[(user_id, repositories[object_pk].pk)].add(codename.rsplit("_", 1)[0])
    users = [m.user for m in memberships]
    identities = identity.identities_of(users)
    tokens = dict(ApiToken.objects.filter(org=org, revoked_at__isnull=True,
                                          created_by__in=users)
                  .values("created_by").annotate(n=Count("pk")).values_list("created_by", "n"))
    return [MemberRow(m, {repo_pk: role for (user_id, repo_pk), actions in held.items()
                          if user_id == m.user_id and (role := _role_of(actions))},
                      {pk: role for pk, role in identity.mapped_repository_roles(m.user).items()
                       if pk in by_pk},
                      identities.get(m.user_id), tokens.get(m.user_id, 0))
            for m in memberships]


def repository_role(user: AbstractBaseUser, repository: Repository) -> str:
    """The highest role whose actions the user holds on the repository itself (guardian
    grants, not what the organization role gives), or NO_ROLE."""
    return _role_of({perm.rsplit("_", 1)[0] for perm in get_perms(user, repository)})


def _role_of(held: set[str]) -> str:
    if "view" not in held:
        return NO_ROLE
    best = NO_ROLE
    for role in ROLE_ORDER:
        if ROLE_ACTIONS[role] - {"view"} <= held:
            best = role
    return best


# --- new accounts ---------------------------------------------------------------------------
def create_member(principal: Any, command: CreateMember) -> Created:
    """A new account (without a password) and its membership; the person sets a password
    through the returned link (shown to the administrator once), or through the e-mailed one,
    which also verifies the address. The address may be one another account has: it is
    unverified here, so it neither blocks nor takes that person's single sign-on."""
    require_admin(principal, command.org)
    role = _check_role(command.role)
    username, email = command.username.strip(), command.email.strip()
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise InvalidOperation(exc.messages[0], field="username") from None
    if not username or len(username) > 150:
        raise InvalidOperation("a username has 1 to 150 characters", field="username")
    try:
        validate_email(email)
    except ValidationError:
        raise InvalidOperation("enter a valid e-mail address", field="email") from None
    users = get_user_model().objects
    if users.filter(username__iexact=username).exists():
        raise InvalidOperation("this username is taken; choose another, or invite the "
                               "existing account",
                               field="username")
    with transaction.atomic():
        user = users.create_user(username=username, email=email, password=None)
        membership = Membership.objects.create(user=user, org=command.org, role=role)
        audit.record(principal, "member.create", user, org=command.org,
                     after={"username": username, "email": email, "role": role})
    path = set_password_path(user)
    return Created(membership, path, _email_link(user, command.org, path))


# The e-mailed set-password link's query parameter: the signed proof that it went to the
# account's address (accounts.emails.proof_for); the console's set-password view reads it.
EMAIL_PROOF_PARAM = "proof"


def set_password_path(user: AbstractBaseUser) -> str:
    return reverse("console:password-set", kwargs={
        "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
        "token": default_token_generator.make_token(user)})


def _email_link(user: AbstractBaseUser, org: Organization, path: str) -> bool:
    try:
        send_mail(f"[Contexts] You were added to {org.name}",
                  f"Set your password to sign in to Contexts as {user.get_username()}:\n\n"
                  f"{settings.BASE_URL}{path}?{EMAIL_PROOF_PARAM}={emails.proof_for(user)}"
                  f"\n\nThe link works once and expires in "
                  f"{settings.PASSWORD_RESET_TIMEOUT // 86400} days.\n",
                  settings.DEFAULT_FROM_EMAIL, [user.email])
    except Exception:  # noqa: BLE001 - the administrator still has the link to pass on
        logger.exception("could not e-mail the set-password link to %s", user.get_username())
        return False
    return True


# --- roles ----------------------------------------------------------------------------------
def set_role(principal: Any, command: SetRole) -> Membership:
    require_admin(principal, command.org)
    role = _check_role(command.role)
    with transaction.atomic():
        _lock_admins(command.org)
        membership = _membership(command.org, command.username)
        # The role given by hand; one the single-sign-on mapping gave stays beside it.
        before = membership.hand_role
        if before == role:
            return membership
        if (higher_role(role, membership.mapped_role) != Role.ADMIN
                and _is_last_admin(membership)):
            raise InvalidOperation("the organization needs at least one active administrator",
                                   field="role")
        membership.hand_role = role
        membership.save(update_fields=["hand_role"])
        audit.record(principal, "member.role", membership.user, org=command.org,
                     before={"username": command.username, "role": before},
                     after={"username": command.username, "role": role})
    return membership


def set_repository_role(principal: Any, command: SetRepositoryRole) -> str:
    """Give a member a role on one repository (guardian grants), or take it away."""
    require_admin(principal, command.org)
    repository = command.repository
    if repository.org_id != command.org.pk:
        raise NotVisible("repository")
    role = command.role if command.role == NO_ROLE else _check_role(command.role)
    membership = _membership(command.org, command.username)
    user = membership.user
    wanted = set() if role == NO_ROLE else ({"view"} | set(ROLE_ACTIONS[role]))
    with transaction.atomic():
        before = repository_role(user, repository)
        for action in REPO_ACTIONS:
            perm = f"accounts.{action}_repository"
            if action in wanted:
                assign_perm(perm, user, repository)
            else:
                remove_perm(perm, user, repository)
        audit.record(principal, "member.repository_role", user, org=command.org,
                     before={"username": command.username, "repository": repository.slug,
                             "role": before},
                     after={"username": command.username, "repository": repository.slug,
                            "role": role})
    return role


# --- deactivating ---------------------------------------------------------------------------
def _orgs_of(user: AbstractBaseUser) -> set[int]:
    """Every organization the account reaches: its memberships, and its guardian grants (its
    own or its groups') on an organization or on anything in one — a guest of one repository
    belongs there as much as a member does (``accounts.scopes`` reads both)."""
    org_ids = set(Membership.objects.filter(user=user).values_list("org_id", flat=True))
    for model in (Organization, Repository, Persona, Session):
        content_type = ContentType.objects.get_for_model(model)
        granted = {int(pk) for pk in UserObjectPermission.objects.filter(
            user=user, content_type=content_type).values_list("object_pk", flat=True)}
        granted |= {int(pk) for pk in GroupObjectPermission.objects.filter(
            group__user=user, content_type=content_type).values_list("object_pk", flat=True)}
        org_field = "pk" if model is Organization else "org_id"
        org_ids.update(model.objects.filter(pk__in=granted).values_list(org_field, flat=True))
    return org_ids


def _may_switch_account(principal: Any, org: Organization, membership: Membership) -> None:
    user = membership.user
    if getattr(principal, "pk", None) == user.pk:
        raise InvalidOperation("you cannot deactivate your own account; ask another "
                               "administrator", field="username")
    # A staff account works the admin site, every organization's: the operator's, as a
    # superuser is.
    if (user.is_superuser or user.is_staff) and not getattr(principal, "is_superuser", False):
        raise Refused("only a superuser may deactivate a superuser or a staff account")
    others = Organization.objects.filter(pk__in=_orgs_of(user)).exclude(pk=org.pk)
    if any(not may(principal, "administer", other.scope) for other in others):
        raise Refused(f"{user.get_username()} also belongs to an organization you do not "
                      "administer; ask a superuser to deactivate the account")


def deactivate_member(principal: Any, org: Organization, username: str) -> list[Nudge]:
    """Deactivate the member's account; their open nudges go to the tech leads (escalated and
    e-mailed as governance does). Returns the escalated nudges."""
    require_admin(principal, org)
    with transaction.atomic():
        membership = _membership(org, username)
        # The account leaves every organization it administers, not only this one.
        administered = set(Membership.objects.filter(user=membership.user, role=Role.ADMIN)
                           .values_list("org_id", flat=True))
        _lock_admins(org.pk, *administered)
        _may_switch_account(principal, org, membership)
        user = membership.user
        if not user.is_active:
            return []
        if _is_last_admin(membership):
            raise InvalidOperation("the organization needs at least one active administrator",
                                   field="username")
        if any(active_admins(org_id) <= 1 for org_id in administered):
            raise InvalidOperation(f"{username} is the last active administrator of another "
                                   "organization; make someone else its administrator first",
                                   field="username")
        user.is_active = False
        user.save(update_fields=["is_active"])
        escalated = nudges.escalate_owned_by(user, "the owner's account is deactivated")
        audit.record(principal, "member.deactivate", user, org=org,
                     before={"username": username, "active": True},
                     after={"username": username, "active": False,
                            "nudges_escalated": [n.public_id for n in escalated]})
    if escalated:
        nudges.notify(escalated=escalated)
    return escalated


def reactivate_member(principal: Any, org: Organization, username: str) -> Membership:
    require_admin(principal, org)
    with transaction.atomic():
        membership = _membership(org, username)
        _may_switch_account(principal, org, membership)
        user = membership.user
        if not user.is_active:
            user.is_active = True
            user.save(update_fields=["is_active"])
            audit.record(principal, "member.reactivate", user, org=org,
                         before={"username": username, "active": False},
                         after={"username": username, "active": True})
    return membership
