"""The console's login form, with failed attempts limited per client address and username.

Guessing passwords through the form costs one Redis counter per (address, username) and fixed
window, the same atomic counter the API's per-token throttle uses: after
``LOGIN_FAILURE_LIMIT`` failures within ``LOGIN_FAILURE_WINDOW_SECONDS`` the form answers 429 —
even to the right password, so the guessing cannot go on — until the window ends. The address is
:func:`contexts.kernel.client_address.client_address`: the TCP peer, or what a configured proxy
forwarded — never a header a client could set to dodge the limit.
"""

from __future__ import annotations

import hashlib
import math

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.hashers import make_password
from django.contrib.auth.views import LoginView
from django.db.models import Q
from django.http import HttpRequest, HttpResponse

from contexts.kernel.availability import redis_call
from contexts.kernel.client_address import client_address
from contexts.protocol.throttling import AgentRateThrottle


class LoginFailureThrottle(AgentRateThrottle):
    """Counts failed logins of one username from one address (not requests of a principal)."""

    scope = "login"
    rate = "login"  # the limit comes from settings, see parse_rate

    def __init__(self, username: str) -> None:
        self.username = username.strip().casefold()  # "Admin" and "admin" share a bucket
        super().__init__()

    def parse_rate(self, rate: str) -> tuple[int, int]:
        return (getattr(settings, "LOGIN_FAILURE_LIMIT", 10),
                getattr(settings, "LOGIN_FAILURE_WINDOW_SECONDS", 300))

    def get_cache_key(self, request, view) -> str:
        ident = hashlib.sha256(
            f"{client_address(request)}|{self.username}".encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def locked(self, request: HttpRequest) -> bool:
        """Has this (address, username) used up its failures in the current window?"""
        now = self.timer()
        window = int(now // self.duration)
        self.window_ends_at = (window + 1) * self.duration
        bucket = f"{self.get_cache_key(request, None)}:{window}"  # where allow_request counts
        # As for the API: while Redis is unreachable the limit is lifted, not turned into an
        # outage of the login form.
        failures = redis_call(lambda: self.cache.get(bucket, 0), 0, "login throttle")
        return failures >= self.num_requests

    def record_failure(self, request: HttpRequest) -> None:
        self.allow_request(request, None)


# ``/login/?operator`` shows the password form when password login is switched off.
OPERATOR_PARAM = "operator"
PASSWORD_LOGIN_OFF = ("Password login is switched off here: sign in with your identity "
                      "provider. Only the operator's accounts sign in with a password.")


def is_operator_account(username: str) -> bool:
    """Is ``username`` an active staff or superuser account (the break-glass accounts)? The
    same one query whether the account exists or not; ModelBackend's own lookup (exact
    username) decides what the name means."""
    user_model = get_user_model()
    return user_model._default_manager.filter(
        Q(is_staff=True) | Q(is_superuser=True),
        **{user_model.USERNAME_FIELD: username}, is_active=True).exists()


class OperatorOnlyLoginForm(AuthenticationForm):
    """The form while password login is switched off: only an operator account's password is
    checked. Anyone else's — right, wrong, or for no account at all — is refused the same way,
    after the same work: the password hasher runs once over the password typed (as Django's
    ModelBackend does for an unknown user) and the account's own hash is never looked at, so
    neither the answer nor its time tells whether the account exists or the password was
    right. A wrong operator password gets that same refusal."""

    def clean(self) -> dict:
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is None or not password:
            raise self.refusal()
        if not is_operator_account(username):
            make_password(password)  # the hasher's one run, as a check of a real hash costs
            raise self.refusal()
        try:
            return super().clean()  # authenticate(): the operator's own hash, checked once
        except forms.ValidationError:
            raise self.refusal() from None

    def refusal(self) -> forms.ValidationError:
        return forms.ValidationError(PASSWORD_LOGIN_OFF, code="password_login_off")


class ThrottledLoginView(LoginView):
    """The login page: the single-sign-on button when a provider is configured, and the
    password form unless ``CONTEXTS_LOCAL_LOGIN`` switched it off — then only the operator's
    accounts (staff, superusers), which single sign-on never links, sign in with a password,
    through ``/login/?operator`` (their break-glass way in), and every other attempt is
    refused alike (:class:`OperatorOnlyLoginForm`)."""

    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_form_class(self) -> type[AuthenticationForm]:
        return AuthenticationForm if settings.LOCAL_LOGIN_ENABLED else OperatorOnlyLoginForm

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "sso_enabled": settings.OIDC_ENABLED,
                "sso_label": settings.OIDC_BUTTON_LABEL,
                "local_login": (settings.LOCAL_LOGIN_ENABLED
                                or OPERATOR_PARAM in self.request.GET),
                "password_login_off": not settings.LOCAL_LOGIN_ENABLED}

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        self.throttle = LoginFailureThrottle(request.POST.get("username", ""))
        if self.throttle.locked(request):
            wait = math.ceil(self.throttle.wait())
            minutes = max(1, math.ceil(wait / 60))
            message = (f"Too many failed log-in attempts for this account from your address. "
                       f"Try again in {minutes} minute{'s' if minutes > 1 else ''}.")
            response = self.render_to_response(
                self.get_context_data(form=self.get_form(), locked_out=message), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        self.throttle.record_failure(self.request)
        return super().form_invalid(form)
