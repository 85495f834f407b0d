"""Single sign-on use cases (issue 26): completing a sign-in the provider vouched for, and an
administrator's one action against a departed person's agent tokens.

The protocol (redirect, callback, ID-token validation) is ``contexts.sso.oidc``; who the
person is and which roles their groups give is ``contexts.governance.identity``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, Organization
from accounts.tokens import revoke_token
from contexts.governance import identity
from contexts.services import audit
from contexts.sso import oidc
from contexts.usecases.errors import NotVisible
from contexts.usecases.members import require_admin


def complete_sign_in(claims: dict, token: dict) -> AbstractBaseUser:
    """The account for a validated callback (``oidc.complete``); raises
    ``oidc.SignInFailed``."""
    return identity.sign_in(oidc.issuer(), claims, token.get("refresh_token"))


def record_refused(reason: str, detail: str) -> None:
    """A callback refused before anyone was known (state, nonce, signature, audience, expiry)."""
    identity.record_failed_login(reason, {"detail": detail[:500]})


def tokens_minted_by(principal: Any, org: Organization, username: str) -> list[ApiToken]:
    """The organization's live agent tokens that ``username`` minted (an administrator's
    view)."""
    require_admin(principal, org)
    return list(ApiToken.objects.filter(org=org, created_by__username=username,
                                        revoked_at__isnull=True).order_by("created_at"))


def revoke_tokens_minted_by(principal: Any, org: Organization, username: str) -> int:
    """Revoke every live token of the organization that ``username`` minted; returns how many.
    For a person who left: their tokens keep working until revoked, since agents depend on
    them and an administrator decides."""
    tokens = tokens_minted_by(principal, org, username)
    if not tokens and not org.memberships.filter(user__username=username).exists():
        raise NotVisible("member")
    with transaction.atomic():
        for token in tokens:
            revoke_token(token, actor=principal)
        audit.record(principal, "member.tokens_revoked", org, org=org,
                     after={"username": username, "tokens": [t.public_id for t in tokens],
                            "at": timezone.now().isoformat()})
    return len(tokens)
