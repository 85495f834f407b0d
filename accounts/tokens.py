"""Agent tokens: minted once (``ctx_<prefix>_<secret>``), stored as a hash, looked up by prefix."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.dispatch import Signal
from django.utils import timezone

from accounts.models import (
    PUBLIC_ID_ALPHABET,
    TOKEN_PREFIX,
    ApiToken,
    Membership,
    Organization,
    Scope,
)
from accounts.sql import model_columns, prepared_cursor

LAST_USED_RESOLUTION = dt.timedelta(minutes=1)


def hash_token_secret(secret: str) -> str:
    """How an agent token's secret is stored: its SHA-256. Tokens are 32 random bytes, so a
    fast hash is enough (there is no dictionary to guess from), and it keeps authentication
    off the hot path's budget."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _random(length: int) -> str:
    return "".join(secrets.choice(PUBLIC_ID_ALPHABET) for _ in range(length))


@transaction.atomic
def create_token(org: Organization, name: str, scopes: Iterable[Scope], *, created_by=None,
                 expires_in_days: int | None = None, may_propose: bool = False,
                 auto_accept: bool = False) -> tuple[ApiToken, str]:
    """Create a token bound to ``scopes`` (all in ``org``); returns it and the raw secret.
    ``may_propose``: it may propose new repository fragments; ``auto_accept``: it is trusted
    where a scope's proposal policy is auto-accept (docs/adr/0017)."""
    scopes = list(scopes)
    if not scopes:
        raise ValueError("a token needs at least one scope")
    if any(scope.org_id != org.id for scope in scopes):
        raise ValueError("every scope of a token must belong to its organization")
    prefix, secret = _random(10), _random(40)
    expires_at = (
        timezone.now() + dt.timedelta(days=expires_in_days) if expires_in_days else None
    )
    token = ApiToken.objects.create(
        name=name, org=org, prefix=prefix, secret_hash=hash_token_secret(secret),
        created_by=created_by, expires_at=expires_at, may_propose=may_propose,
        auto_accept=auto_accept,
    )
    token.scopes.set(scopes)
    _audit(created_by, "token.create", token, after={
        "name": name, "scopes": sorted(s.public_id for s in scopes),
        "expires_at": expires_at.isoformat() if expires_at else None,
        "may_propose": may_propose, "auto_accept": auto_accept})
    return token, f"{TOKEN_PREFIX}_{prefix}_{secret}"


# Sent in the transaction of every token change (``token.create``, ``token.revoke``) with the
# actor, the action, the token and the change. The audit trail lives in the contexts app, a
# layer above this one: it records the event (receiver connected in ContextsConfig.ready), so
# accounts never imports contexts.
token_changed = Signal()


def _audit(actor, action: str, token: ApiToken, **change) -> None:
    token_changed.send(sender=ApiToken, actor=actor, action=action, token=token, change=change)


_TOKEN_FIELDS, _TOKEN_COLUMNS = model_columns(ApiToken, "t")
_ORG_FIELDS, _ORG_COLUMNS = model_columns(Organization, "o")
# Every API request runs this: one plain statement (the ORM's select_related + ArrayAgg took
# ~2 ms a request to build and group), with the bound scope ids — accounts.scopes reads them
# from ``granted_scope_ids`` instead of querying again.
_TOKEN_SQL = f"""
    SELECT {_TOKEN_COLUMNS}, {_ORG_COLUMNS},
           ARRAY(SELECT s.scope_id FROM {ApiToken.scopes.through._meta.db_table} s
                 WHERE s.apitoken_id = t.id ORDER BY s.scope_id)
    FROM {ApiToken._meta.db_table} t
    JOIN {Organization._meta.db_table} o ON o.id = t.org_id
    WHERE t.prefix = %s
"""


def _by_prefix(prefix: str) -> ApiToken | None:
    with prepared_cursor() as cursor:
        cursor.execute(_TOKEN_SQL, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(_TOKEN_FIELDS)
    token = ApiToken.from_db(connection.alias, _TOKEN_FIELDS, row[:split])
    token.org = Organization.from_db(connection.alias, _ORG_FIELDS,
                                     row[split:split + len(_ORG_FIELDS)])
    token.granted_scope_ids = list(row[-1])
    return token


def verify_token(raw: str) -> ApiToken | None:
    """The active token for ``raw``, or None; records ``last_used_at`` at most once a minute."""
    parts = ApiToken.split(raw)
    if parts is None:
        return None
    prefix, secret = parts
    token = _by_prefix(prefix)
    if token is None or not hmac.compare_digest(token.secret_hash, hash_token_secret(secret)):
        return None
    if not token.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


class PersonalTokenRefused(ValueError):
    """A personal token for somebody who is not an active member of the organization."""


@transaction.atomic
def create_personal_token(org: Organization, user, name: str, *, created_by=None,
                          expires_in_days: int | None = None) -> tuple[ApiToken, str]:
    """A token that acts as ``user`` — with their roles, in ``org`` only, for as long as they
    are an active member there (``accounts.authentication``) — for a team's scripts. Bound to
    the organization's scope for the record; what it may do is what the member may do."""
    if not user.is_active or not Membership.objects.filter(user=user, org=org).exists():
        raise PersonalTokenRefused("a personal token is for an active member of the "
                                   "organization")
    if not name.strip():
        raise PersonalTokenRefused("a token needs a name")
    token, raw = create_token(org, name.strip(), [org.scope], created_by=created_by,
                              expires_in_days=expires_in_days)
    ApiToken.objects.filter(pk=token.pk).update(user=user)
    token.user = user
    _audit(created_by, "token.personal", token, after={"name": token.name,
                                                      "acts_as": user.get_username()})
    return token, raw


def personal_principal(token: ApiToken):
    """The member a personal token acts as — confined to the token's organization
    (``accounts.scopes.acting_org_id``) — or None when they are no longer an active member
    there (the token then authenticates nobody)."""
    user = (get_user_model().objects.filter(pk=token.user_id, is_active=True,
                                            memberships__org_id=token.org_id).first())
    if user is not None:
        user.personal_token = token
    return user


def revoke_token(token: ApiToken, *, actor=None) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        _audit(actor, "token.revoke", token)
