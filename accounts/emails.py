"""Whose e-mail address is whose (security issue 37): an address an account's owner proved
theirs, as opposed to one an administrator typed.

Single sign-on links a first sign-in to an existing account only through a verified address,
and an administrator's invitation by e-mail reaches only an account whose owner verified it:
anybody may type anybody's address into a new account, so a typed address claims nothing.

The owner proves the address by setting their password through the link e-mailed to it: the
link carries a signed proof (:func:`proof_for`) of the account and the address it was sent to,
which the link shown to the administrator does not carry — an administrator who sets the
password through their copy proves nothing about the mailbox.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.utils import timezone

from accounts.models import VerifiedEmail

BY_LINK = "set-password link e-mailed to it"
BY_PROVIDER = "identity provider"
BY_OPERATOR = "operator"
_SALT = "contexts.accounts.email-proof"


def is_verified(user: AbstractBaseUser) -> bool:
    """Has the owner of ``user`` proved its present address theirs?"""
    email = (user.email or "").strip().lower()
    return bool(email) and VerifiedEmail.objects.filter(user=user, email__iexact=email).exists()


def mark_verified(user: AbstractBaseUser, how: str) -> None:
    """Record the account's present address as proved by its owner (``how`` says by what)."""
    if not user.email:
        return
    VerifiedEmail.objects.update_or_create(
        user=user, defaults={"email": user.email, "how": how, "verified_at": timezone.now()})


def proof_for(user: AbstractBaseUser) -> str:
    """A signed statement "this link was e-mailed to this account's present address", for the
    set-password link that goes to the mailbox (never for the one shown on a page)."""
    return signing.dumps({"user": user.pk, "email": user.email.lower()}, salt=_SALT,
                         compress=True)


def proof_holds(user: AbstractBaseUser, proof: str | None) -> bool:
    """Does ``proof`` come from a link e-mailed to this account at its present address, within
    the set-password link's lifetime?"""
    if not proof:
        return False
    try:
        value = signing.loads(proof, salt=_SALT, max_age=settings.PASSWORD_RESET_TIMEOUT)
    except signing.BadSignature:  # also SignatureExpired
        return False
    return (isinstance(value, dict) and value.get("user") == user.pk
            and bool(user.email) and value.get("email") == user.email.lower())
