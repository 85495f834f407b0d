"""Accounts that come from the company's identity provider (issue 26, ADR 0019): who a signed-in
person is, which roles their groups give them, and what happens when the provider lets them go.

**Who.** An account is found by the provider's issuer and subject (:class:`ExternalIdentity`),
never by e-mail alone. A first sign-in is linked to an existing local account only when the
account's owner verified that address (``accounts.emails``: the e-mailed set-password link, an
earlier provider's word, the operator) and the provider says the e-mail is verified too;
an owner-verified match with an unverified claim is refused, so nobody takes over an account by
typing someone else's address at a provider. An account whose address was only typed by an
administrator is never linked (security issue 37): the sign-in makes a new account from the
standard claims (no password: it signs in through the provider only), and an operator merges
the two if they are one person's.

**Roles.** The group mapping (``OIDC_GROUP_MAPPING``) is applied on every sign-in and every
periodic check. Organization roles go to :attr:`Membership.mapped_role`, beside the role given
by hand (``hand_role``), so a mapping change never removes a hand-granted role. Repository roles
go through a django-guardian group per (repository, role), ``sso:<repository>:<role>``, which
the account joins or leaves; permission checks already read group grants. Every change is an
audit event of the organization (``sso.role``).

**Deprovisioning.** When the provider refuses the person (at sign-in, or when the periodic check
presents their refresh token), or lists them in no mapped group any more, their mapped roles
go. If no hand-granted role is left, the account is deactivated, exactly as an administrator's
"deactivate" does: its sessions end (a deactivated account is signed out at its next request),
and the open nudges of its fragments are escalated to the organization's tech leads. Its agent
tokens stay until an administrator revokes them (the members page does it in one action).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from guardian.models import UserObjectPermission
from guardian.shortcuts import assign_perm

from accounts import emails
from accounts.models import (
    ROLE_ACTIONS,
    ExternalIdentity,
    Membership,
    Organization,
    Repository,
    higher_role,
)
from accounts.permissions import SYSTEM
from contexts.governance import nudges
from contexts.models import Nudge
from contexts.services import audit
from contexts.sso import oidc
from contexts.sso.oidc import Grant, SignInFailed

logger = logging.getLogger(__name__)

GROUP_PREFIX = "sso:"
_USERNAME_UNSAFE = re.compile(r"[^\w.@+-]")


# --- signing in --------------------------------------------------------------------------------
def sign_in(issuer: str, claims: dict, refresh_token: str | None) -> AbstractBaseUser:
    """The account for these validated ID-token claims, created, linked or updated, with the
    mapping applied. Raises :class:`SignInFailed` (with the reason shown to the person); what
    a refusal records (its audit event, roles taken away) is kept."""
    refused: SignInFailed | None = None
    for attempt in (1, 2):
        try:
            with transaction.atomic():
                try:
                    user = _sign_in(issuer, claims, refresh_token)
                except SignInFailed as exc:
                    refused = exc
            break
        except IntegrityError:
            # Two first sign-ins of one person at once (two tabs): the other made the
            # identity (or the username) first; the second attempt finds it.
            if attempt == 2:
                raise
    if refused is not None:
        raise refused
    return user


def _sign_in(issuer: str, claims: dict, refresh_token: str | None) -> AbstractBaseUser:
    subject = str(claims["sub"])
    email = str(claims.get("email") or "").strip()
    verified = claims.get("email_verified") is True
    if settings.OIDC_ALLOWED_DOMAINS and not (email and verified and oidc.email_allowed(email)):
        _failed(issuer, subject, email, "e-mail domain not allowed")
        raise SignInFailed("Your account's e-mail address is not in a domain allowed to sign "
                           "in here.")
    groups = oidc.groups_of(claims)
    identity = (ExternalIdentity.objects.select_for_update().select_related("user")
                .filter(issuer=issuer, subject=subject).first())
    if identity is None:
        user = _account_for(issuer, subject, email, verified, claims, groups)
        identity = ExternalIdentity(issuer=issuer, subject=subject, user=user)
    user = identity.user
    if not user.is_active and (identity.pk is None or identity.deprovisioned_at is None):
        _failed(issuer, subject, email, "account deactivated by an administrator")
        raise SignInFailed("This account has been deactivated by an administrator.")
    _update_profile(user, email, claims)
    if verified and email and not emails.is_verified(user) and not (user.is_staff
                                                                     or user.is_superuser):
        # The provider vouches for the address it sent: the person reads that mailbox.
        emails.mark_verified(user, emails.BY_PROVIDER)
    now = timezone.now()
    identity.email, identity.email_verified, identity.groups = email, verified, groups
    identity.last_login_at = identity.checked_at = now
    if refresh_token:
        identity.sealed_refresh_token = oidc.seal(refresh_token)
    identity.save()
    orgs = _orgs_of(user)  # before the mapping changes them: where to file the events
    if not apply_mapping(user, groups) and not _hand_roles(user):
        # Nothing maps and nothing was given by hand: the account has no business here.
        if identity.deprovisioned_at is None:
            deprovision(identity, "lists the person in no mapped group", orgs=orgs)
        _failed(issuer, subject, email, "in no mapped group")
        raise SignInFailed("Your account is not in any group that has access here. Ask your "
                           "administrator to add you to one.")
    if not user.is_active:  # deprovisioned earlier; the provider lists them again
        user.is_active = True
        user.save(update_fields=["is_active"])
    if identity.deprovisioned_at is not None:
        identity.deprovisioned_at = None
        identity.save(update_fields=["deprovisioned_at"])
    for org in _orgs_of(user):
        audit.record(user, "sso.login", user, org=org,
                     after={"username": user.get_username(), "issuer": issuer,
                            "groups": groups})
    return user


def _account_for(issuer: str, subject: str, email: str, verified: bool, claims: dict,
                 groups: list[str]) -> AbstractBaseUser:
    """The local account a first sign-in is linked to, or a new one (only when a mapped group
    gives it somewhere to be).

    Linked only to an account whose owner verified this address (``accounts.emails``): an
    address an administrator typed into an account claims nothing, or any organization's
    administrator could create an account with someone's address and receive that person's
    roles at their first sign-in (security issue 37). Such accounts are passed over, and the
    sign-in makes a new account; an operator merges the two if they are one person's."""
    users = get_user_model().objects
    if email:
        matches = list(users.filter(email__iexact=email).order_by("pk")[:20])
        if any(match.is_superuser or match.is_staff for match in matches):
            # The operator's accounts stay local: a provider account must not become
            # the superuser because an address matches.
            _failed(issuer, subject, email, "e-mail matches a staff or superuser account")
            raise SignInFailed("This e-mail address belongs to an operator account, "
                               "which signs in with its password only.")
        owned = [match for match in matches if emails.is_verified(match)]
        if owned:
            if not verified:
                _failed(issuer, subject, email, "unverified e-mail matches a local account")
                raise SignInFailed("An account with this e-mail address already exists, and "
                                   "your identity provider has not verified the address, so "
                                   "it cannot be linked. Ask your administrator.")
            if len(owned) > 1:
                _failed(issuer, subject, email, "several accounts have this e-mail")
                raise SignInFailed("Several accounts have this e-mail address; ask your "
                                   "administrator to link yours.")
            if ExternalIdentity.objects.filter(user=owned[0], issuer=issuer).exists():
                _failed(issuer, subject, email, "account linked to another subject")
                raise SignInFailed("This e-mail address belongs to an account linked to "
                                   "another identity at your provider.")
            return owned[0]
    if not any(_exists(grant) for grant in oidc.grants_for(groups)):
        _failed(issuer, subject, email, "in no mapped group")
        raise SignInFailed("Your account is not in any group that has access here. Ask your "
                           "administrator to add you to one.")
    user = users.create_user(username=_free_username(claims, email, subject), email=email,
                             password=None)
    return user


def _exists(grant: Grant) -> bool:
    """Does the organization (and repository) a grant names exist?"""
    if grant.repo is None:
        return Organization.objects.filter(slug=grant.org).exists()
    return Repository.objects.filter(org__slug=grant.org, slug=grant.repo).exists()


def _free_username(claims: dict, email: str, subject: str) -> str:
    base = str(claims.get("preferred_username") or email.split("@")[0] or subject)
    base = _USERNAME_UNSAFE.sub("-", base)[:140] or "user"
    users = get_user_model().objects
    candidate, n = base, 1
    while users.filter(username__iexact=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _update_profile(user: AbstractBaseUser, email: str, claims: dict) -> None:
    first = str(claims.get("given_name") or "")[:150]
    last = str(claims.get("family_name") or "")[:150]
    if not (first or last) and claims.get("name"):
        first, _, last = str(claims["name"]).partition(" ")
    changed = {"email": email or user.email, "first_name": first[:150] or user.first_name,
               "last_name": last[:150] or user.last_name}
    if any(getattr(user, key) != value for key, value in changed.items()):
        for key, value in changed.items():
            setattr(user, key, value)
        user.save(update_fields=list(changed))


def _failed(issuer: str, subject: str, email: str, why: str) -> None:
    record_failed_login(why, {"issuer": issuer, "subject": subject, "email": email})


def record_failed_login(why: str, detail: dict | None = None) -> None:
    """A refused sign-in, as an audit event of every organization the mapping names (the
    person is not known, or not trusted, so there is no organization of theirs to file it
    under)."""
    slugs = {grant.org for grants in oidc.group_mapping().values() for grant in grants}
    after = {"why": why, **(detail or {})}
    for org in Organization.objects.filter(slug__in=slugs):
        audit.record(SYSTEM, "sso.login_failed", org, org=org, after=after)
    logger.warning("single sign-on refused: %s %s", why, detail or "")


# --- roles from groups ---------------------------------------------------------------------------
def apply_mapping(user: AbstractBaseUser, groups: list[str]) -> list[Grant]:
    """Make the account's mapped roles those ``groups`` give now; returns the grants that
    apply (those naming an organization or repository that exists)."""
    wanted_org: dict[int, str] = {}
    wanted_repo: dict[tuple[int, str], Repository] = {}
    orgs = {org.slug: org for org in Organization.objects.filter(
        slug__in={grant.org for grant in oidc.grants_for(groups)})}
    applied = []
    for grant in oidc.grants_for(groups):
        org = orgs.get(grant.org)
        if org is None:
            logger.warning("group mapping names organization %r, which does not exist",
                           grant.org)
            continue
        if grant.repo is None:
            wanted_org[org.pk] = _higher(wanted_org.get(org.pk), grant.role)
        else:
            repository = Repository.objects.filter(org=org, slug=grant.repo).first()
            if repository is None:
                logger.warning("group mapping names repository %s/%s, which does not exist",
                               grant.org, grant.repo)
                continue
            wanted_repo[(repository.pk, grant.role)] = repository
        applied.append(grant)
    _sync_org_roles(user, wanted_org)
    _sync_repository_roles(user, wanted_repo)
    return applied


def _higher(a: str | None, b: str) -> str:
    return higher_role(a, b) or b


def _sync_org_roles(user: AbstractBaseUser, wanted: dict[int, str]) -> None:
    current = {m.org_id: m for m in Membership.objects.select_for_update().filter(user=user)}
    for org_id in set(wanted) | {pk for pk, m in current.items() if m.mapped_role}:
        membership = current.get(org_id)
        before = membership.mapped_role if membership else None
        after = wanted.get(org_id)
        if before == after:
            continue
        if membership is None:
            membership = Membership(user=user, org_id=org_id, mapped_role=after, role=after)
            membership.save()
        elif after is None and membership.hand_role is None:
            membership.delete()
        else:
            membership.mapped_role = after
            membership.save(update_fields=["mapped_role"])
        audit.record(SYSTEM, "sso.role", user, org=Organization.objects.get(pk=org_id),
                     before={"username": user.get_username(), "mapped_role": before},
                     after={"username": user.get_username(), "mapped_role": after})


def _sync_repository_roles(user: AbstractBaseUser,
                           wanted: dict[tuple[int, str], Repository]) -> None:
    names = {_group_name(repository, role): (repository, role)
             for (_, role), repository in wanted.items()}
    held = set(user.groups.filter(name__startswith=GROUP_PREFIX).values_list("name", flat=True))
    for name in sorted(names.keys() - held):
        repository, role = names[name]
        user.groups.add(_repository_group(name, repository, role))
        _audit_repository(user, repository, None, role)
    for name in sorted(held - names.keys()):
        user.groups.remove(Group.objects.get(name=name))
        repository, role = _parse_group(name)
        if repository is not None:
            _audit_repository(user, repository, role, None)


def _group_name(repository: Repository, role: str) -> str:
    return f"{GROUP_PREFIX}{repository.public_id}:{role}"


def _parse_group(name: str) -> tuple[Repository | None, str]:
    public_id, _, role = name[len(GROUP_PREFIX):].rpartition(":")
    return Repository.objects.filter(public_id=public_id).first(), role


def _repository_group(name: str, repository: Repository, role: str) -> Group:
    group, created = Group.objects.get_or_create(name=name)
    if created:
        for action in {"view"} | set(ROLE_ACTIONS[role]):
            assign_perm(f"accounts.{action}_repository", group, repository)
    return group


def _audit_repository(user: AbstractBaseUser, repository: Repository, before: str | None,
                      after: str | None) -> None:
    audit.record(SYSTEM, "sso.repository_role", user, org=repository.org,
                 before={"username": user.get_username(), "repository": repository.slug,
                         "mapped_role": before},
                 after={"username": user.get_username(), "repository": repository.slug,
                        "mapped_role": after})


def mapped_repository_roles(user: AbstractBaseUser) -> dict[int, str]:
    """repository pk → the role the mapping gives there (for the members page)."""
    roles: dict[int, str] = {}
    for name in user.groups.filter(name__startswith=GROUP_PREFIX).values_list("name",
                                                                                flat=True):
        repository, role = _parse_group(name)
        if repository is not None:
            roles[repository.pk] = _higher(roles.get(repository.pk), role)
    return roles


def _hand_roles(user: AbstractBaseUser) -> bool:
    """Does the account hold a role given by hand (organization, or a guardian grant of its
    own on any object)?"""
    return (Membership.objects.filter(user=user, hand_role__isnull=False).exists()
            or UserObjectPermission.objects.filter(user=user).exists())


def _orgs_of(user: AbstractBaseUser) -> list[Organization]:
    org_ids = set(Membership.objects.filter(user=user).values_list("org_id", flat=True))
    org_ids |= set(Repository.objects.filter(pk__in=mapped_repository_roles(user))
                   .values_list("org_id", flat=True))
    return list(Organization.objects.filter(pk__in=org_ids).order_by("pk"))


# --- letting go ---------------------------------------------------------------------------
def deprovision(identity: ExternalIdentity, why: str,
                orgs: list[Organization] | None = None) -> list[Nudge]:
    """The provider has let the person go: mapped roles removed; without a hand-granted role
    the account is deactivated and the open nudges of its fragments escalate to the tech
    leads. Returns the escalated nudges (e-mailed once the transaction commits)."""
    user = identity.user
    with transaction.atomic():
        orgs = _orgs_of(user) if orgs is None else orgs
        apply_mapping(user, [])
        identity.deprovisioned_at = timezone.now()
        identity.sealed_refresh_token = ""
        identity.save(update_fields=["deprovisioned_at", "sealed_refresh_token"])
        escalated: list[Nudge] = []
        deactivated = False
        if user.is_active and not _hand_roles(user) and not user.is_superuser:
            user.is_active = False
            user.save(update_fields=["is_active"])
            deactivated = True
            escalated = nudges.escalate_owned_by(user, "the owner left the identity provider")
        for org in orgs:
            audit.record(SYSTEM, "sso.deprovision", user, org=org,
                         before={"username": user.get_username(), "active": True},
                         after={"username": user.get_username(), "why": why,
                                "deactivated": deactivated,
                                "nudges_escalated": [n.pk for n in escalated]})
        if escalated:
            transaction.on_commit(lambda: nudges.notify(escalated=escalated))
    logger.info("deprovisioned %s (%s): %s", user.get_username(), identity, why)
    return escalated


def recheck_due(now=None, *, limit: int = 500) -> dict[str, int]:
    """Ask the provider about every person due — checked longer ago than
    ``OIDC_RECHECK_SECONDS`` less one beat tick, so no removal waits longer than the interval —
    with their refresh token, then userinfo. Refused → deprovisioned; otherwise the mapping is
    applied to their current groups. A provider that does not answer changes nothing."""
    now = now or timezone.now()
    # One beat tick early: asked at the last tick inside their interval, never after it.
    cutoff = now - timezone.timedelta(
        seconds=settings.OIDC_RECHECK_SECONDS - settings.OIDC_RECHECK_TICK_SECONDS)
    due = (ExternalIdentity.objects.select_related("user")
           .filter(deprovisioned_at__isnull=True).exclude(sealed_refresh_token="")
           .filter(Q(checked_at__isnull=True) | Q(checked_at__lte=cutoff))
           .order_by("checked_at")[:limit])
    counts = {"checked": 0, "deprovisioned": 0, "unavailable": 0}
    for identity in due:
        try:
            claims, sealed = oidc.refresh(identity.sealed_refresh_token)
        except oidc.ProviderUnavailable as exc:
            logger.warning("identity provider unavailable for %s: %s", identity, exc)
            counts["unavailable"] += 1
            continue
        except oidc.TokenUnreadable:
            logger.warning("the refresh token of %s does not open (SECRET_KEY changed?): "
                           "checked at the next sign-in instead", identity)
            identity.sealed_refresh_token = ""
            identity.save(update_fields=["sealed_refresh_token"])
            counts["unavailable"] += 1
            continue
        counts["checked"] += 1
        if claims is None or str(claims.get("sub", identity.subject)) != identity.subject:
            deprovision(identity, "the provider refused the refresh token")
            counts["deprovisioned"] += 1
            continue
        groups = oidc.groups_of(claims) if oidc.states_groups(claims) else identity.groups
        with transaction.atomic():
            identity.groups, identity.checked_at = groups, now
            identity.sealed_refresh_token = sealed
            identity.save(update_fields=["groups", "checked_at", "sealed_refresh_token"])
            orgs = _orgs_of(identity.user)
            if not apply_mapping(identity.user, groups) and not _hand_roles(identity.user):
                deprovision(identity, "lists the person in no mapped group", orgs=orgs)
                counts["deprovisioned"] += 1
    return counts


def identities_of(users: Iterable[AbstractBaseUser]) -> dict[int, ExternalIdentity]:
    """user pk → their identity at the provider (for the members page)."""
    return {identity.user_id: identity for identity in
            ExternalIdentity.objects.filter(user__in=list(users)).order_by("created_at")}

