"""The console's login form, with failed attempts limited per client address and username.

Guessing passwords through the form costs one Redis counter per (address, username) and fixed
window, the same atomic counter the API's per-token throttle uses: after
``LOGIN_FAILURE_LIMIT`` failures within ``LOGIN_FAILURE_WINDOW_SECONDS`` the form answers 429 —
even to the right password, so the guessing cannot go on — until the window ends. The address is
:func:`contexts.client_address.client_address`: the TCP peer, or what a configured proxy
forwarded — never a header a client could set to dodge the limit.
"""

from __future__ import annotations

import hashlib
import math

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden

from contexts.availability import redis_call
from contexts.client_address import client_address
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


class ThrottledLoginView(LoginView):
    """The login page: the single-sign-on button when a provider is configured, and the
    password form unless ``CONTEXTS_LOCAL_LOGIN`` switched it off — then only the operator's
    accounts (staff, superusers) sign in with a password, through ``/login/?operator``, and
    anyone else's correct password is refused (403)."""

    template_name = "console/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "sso_enabled": settings.OIDC_ENABLED,
                "sso_label": settings.OIDC_BUTTON_LABEL,
                "local_login": (settings.LOCAL_LOGIN_ENABLED
                                or OPERATOR_PARAM in self.request.GET)}

    def form_valid(self, form) -> HttpResponse:
        user = form.get_user()
        if not settings.LOCAL_LOGIN_ENABLED and not (user.is_staff or user.is_superuser):
            # Switched off for everyone but the operator's accounts (staff, superusers), which
            # single sign-on never links: they keep their break-glass way in.
            return HttpResponseForbidden("password login is switched off; sign in through "
                                         "your identity provider")
        return super().form_valid(form)

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
