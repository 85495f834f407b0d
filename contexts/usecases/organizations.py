"""Setting up a team (issue 40, item 2): the instance's organizations, their repositories and
who is in them — for the operator (``manage.py org``, ``repo``, ``member``) and superusers
(the console's Organizations page). Each adapter only parses and renders; the rules are here.

- **Creating an organization is the operator's** (``SYSTEM`` from the command line, or a
  superuser): it comes with its first administrator. A new account is created without a
  password and its set-password link is returned (shown once) and e-mailed, as the Members
  page does (``contexts.usecases.members.create_member``, audited ``member.create``); an
  existing active account is made administrator directly (``member.add``); the organization
  itself is audited ``org.create``. The organization's index directory is made as its row is
  written (``contexts.signals``).
- **A repository** is created by the operator or an administrator of its organization
  (``repository.create``).
- **Adding an existing account** directly, without an invitation, is the operator's only
  (``member.add``, or ``member.role`` when the account is a member already). An
  organization's administrator invites instead and the person accepts
  (``contexts.usecases.invitations``, security issue 37 finding 3): the consent rule is about
  administrators reaching into accounts they do not control. The operator controls every
  account of the instance already (``createsuperuser``, the Django admin), so requiring the
  person's consent would protect nothing, and the first day of a team needs the operator to
  put people in place; every such addition is audited in the organization.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count

from accounts.lookups import find_org
from accounts.models import SLUG_VALIDATOR, Membership, Organization, Repository, Role
from accounts.permissions import SYSTEM, may
from accounts.scopes import readable_scopes
from contexts.services import audit
from contexts.services.errors import InvalidOperation
from contexts.usecases import members
from contexts.usecases.errors import NotVisible, Refused

MAX_NAME = 200


@dataclasses.dataclass(frozen=True)
class CreateOrganization:
    slug: str
    name: str
    admin: str        # the first administrator's username
    email: str = ""   # their address, needed when the account is new


@dataclasses.dataclass(frozen=True)
class CreateRepository:
    org: str          # slug or public id
    slug: str
    name: str = ""    # default: the slug


@dataclasses.dataclass(frozen=True)
class AddMember:
    org: str          # slug or public id
    username: str
    role: str


@dataclasses.dataclass(frozen=True)
class OrganizationCreated:
    org: Organization
    admin: AbstractBaseUser
    created_account: bool
    set_password_path: str = ""  # a new account's link, shown once
    emailed: bool = False


@dataclasses.dataclass(frozen=True)
class OrganizationRow:
    org: Organization
    members: int
    repositories: int
    admins: list[str]


# --- who may --------------------------------------------------------------------------------
def is_operator(principal: Any) -> bool:
    """The product itself (the command line) or an active superuser."""
    return principal is SYSTEM or (getattr(principal, "is_superuser", False)
                                   and getattr(principal, "is_active", False))


def require_operator(principal: Any) -> None:
    if not is_operator(principal):
        raise Refused("only the instance's operator (a superuser) does this")


def organization(principal: Any, ref: str) -> Organization:
    """The organization ``ref`` names (slug or public id) among those the principal reads."""
    ref = ref.strip()
    org = find_org(ref) if ref and "\x00" not in ref else None
    if org is None or not may(principal, "view", org.scope):
        raise NotVisible("organization")
    return org


# --- checking input -------------------------------------------------------------------------
def _slug(value: str, field: str = "slug") -> str:
    value = value.strip()
    try:
        SLUG_VALIDATOR(value)
    except ValidationError as exc:
        raise InvalidOperation(exc.messages[0], field=field) from None
    return value


def _name(value: str, default: str, field: str = "name") -> str:
    value = value.strip() or default
    if len(value) > MAX_NAME or "\x00" in value:
        raise InvalidOperation(f"a name has 1 to {MAX_NAME} characters, no NUL", field=field)
    return value


# --- organizations --------------------------------------------------------------------------
def create_organization(principal: Any, command: CreateOrganization) -> OrganizationCreated:
    """The organization and its first administrator, in one transaction: a refusal (a taken
    slug, a bad username or address) writes nothing."""
    require_operator(principal)
    slug = _slug(command.slug)
    name = _name(command.name, "")
    if not name:
        raise InvalidOperation("give the organization a name", field="name")
    username = command.admin.strip()
    if not username:
        raise InvalidOperation("name the first administrator", field="admin")
    if "\x00" in username:
        raise InvalidOperation("a username holds no NUL", field="admin")
    existing = get_user_model().objects.filter(username=username).first()
    if existing is not None and not existing.is_active:
        raise InvalidOperation(f"{username} is deactivated; an organization needs an active "
                               "administrator", field="admin")
    with transaction.atomic():
        if Organization.objects.filter(slug=slug).exists():
            raise InvalidOperation(f"an organization {slug!r} exists already", field="slug")
        org = Organization.objects.create(slug=slug, name=name)
        audit.record(principal, "org.create", org, org=org,
                     after={"slug": slug, "name": name, "admin": username})
        if existing is None:
            created = _create_admin(principal, org, username, command.email)
            return OrganizationCreated(org, created.membership.user, True,
                                       created.set_password_path, created.emailed)
        _add(principal, org, existing, Role.ADMIN)
    return OrganizationCreated(org, existing, False)


def _create_admin(principal: Any, org: Organization, username: str,
                  email: str) -> members.Created:
    try:
        return members.create_member(principal, members.CreateMember(org, username, email,
                                                                     Role.ADMIN))
    except InvalidOperation as exc:
        # The command's words: the administrator is --admin.
        field = "admin" if exc.field == "username" else exc.field
        raise InvalidOperation(str(exc), field=field) from None


def list_organizations(principal: Any) -> list[OrganizationRow]:
    require_operator(principal)
    orgs = Organization.objects.annotate(
        n_members=Count("memberships", distinct=True),
        n_repositories=Count("repositories", distinct=True)).order_by("slug")
    admins: dict[int, list[str]] = {}
    for org_id, username in (Membership.objects.filter(role=Role.ADMIN)
                             .order_by("user__username")
                             .values_list("org_id", "user__username")):
        admins.setdefault(org_id, []).append(username)
    return [OrganizationRow(org, org.n_members, org.n_repositories, admins.get(org.pk, []))
            for org in orgs]


# --- repositories ---------------------------------------------------------------------------
def create_repository(principal: Any, command: CreateRepository) -> Repository:
    """A repository of the organization: the operator, or an administrator of it."""
    org = organization(principal, command.org)
    if not may(principal, "administer", org.scope):
        raise Refused("only administrators of the organization create its repositories")
    slug = _slug(command.slug)
    name = _name(command.name, slug)
    with transaction.atomic():
        if Repository.objects.filter(org=org, slug=slug).exists():
            raise InvalidOperation(f"{org.slug} has a repository {slug!r} already",
                                   field="slug")
        repository = Repository.objects.create(org=org, slug=slug, name=name)
        audit.record(principal, "repository.create", repository, org=org,
                     after={"slug": slug, "name": name, "public_id": repository.public_id})
    return repository


def list_repositories(principal: Any, org_ref: str) -> list[Repository]:
    org = organization(principal, org_ref)
    found = Repository.objects.filter(org=org)
    if principal is not SYSTEM:
        found = found.filter(scope_id__in=sorted(readable_scopes(principal)))
    return list(found.order_by("slug"))


# --- members --------------------------------------------------------------------------------
def add_member(principal: Any, command: AddMember) -> Membership:
    """Put an existing account in the organization with a role, directly (the operator's
    right; see the module's docstring). A member already: their role becomes ``role``
    (``members.set_role``: the last administrator is kept)."""
    require_operator(principal)
    org = organization(principal, command.org)
    role = members._check_role(command.role)
    username = command.username.strip()
    user = (get_user_model().objects.filter(username=username).first()
            if username and "\x00" not in username else None)
    if user is None:
        raise InvalidOperation(f"no account {username!r}; create it with `org create` (the "
                               "first administrator) or on the Members page", field="username")
    if Membership.objects.filter(org=org, user=user).exists():
        return members.set_role(principal, members.SetRole(org, username, role))
    with transaction.atomic():
        return _add(principal, org, user, role)


def _add(principal: Any, org: Organization, user: AbstractBaseUser, role: str) -> Membership:
    membership, created = Membership.objects.get_or_create(user=user, org=org,
                                                           defaults={"role": role})
    if not created:
        membership.hand_role = role
        membership.save(update_fields=["hand_role"])
    audit.record(principal, "member.add", user, org=org,
                 after={"username": user.get_username(), "role": role, "direct": True})
    return membership


def list_members(principal: Any, org_ref: str) -> list[members.MemberRow]:
    return members.list_members(principal, organization(principal, org_ref))

