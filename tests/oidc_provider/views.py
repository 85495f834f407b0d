"""The control API the tests drive the provider with: JSON in and out, behind a shared secret.

Every endpoint is POST with a JSON object and the header ``X-Control-Secret``; a wrong or
missing secret is 403, a malformed body 400.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from oauth2_provider.models import get_application_model

from .models import Profile
from .validator import TAMPER_MODES, set_tamper_mode

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class BadRequest(Exception):
    """The body does not say what the endpoint needs (answered 400 with the message)."""


def control_endpoint(handler: Handler) -> Callable[[HttpRequest], HttpResponse]:
    """The secret check, the JSON parsing and the error mapping all endpoints share."""

    @csrf_exempt
    @require_POST
    @wraps(handler)
    def view(request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Control-Secret", "")
        if not hmac.compare_digest(given.encode(), settings.CONTROL_SECRET.encode()):
            return JsonResponse({"error": "forbidden"}, status=403)
        try:
            payload = json.loads(request.body or b"null")
            if not isinstance(payload, dict):
                raise BadRequest("the body must be a JSON object")
            return JsonResponse(handler(payload))
        except (ValueError, KeyError, TypeError, BadRequest) as error:
            return JsonResponse({"error": f"{type(error).__name__}: {error}"}, status=400)
        except ValidationError as error:
            return JsonResponse({"error": error.messages}, status=400)

    return view


def _strings(payload: dict[str, Any], key: str) -> list[str]:
    value = payload.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadRequest(f"{key} must be a list of strings")
    return value


@control_endpoint
def clients(payload: dict[str, Any]) -> dict[str, Any]:
    """Create or update a confidential authorization-code client signing its ID tokens RS256;
    no consent screen (skip_authorization)."""
    Application = get_application_model()
    client_id = str(payload["client_id"])
    redirect_uris = _strings(payload, "redirect_uris")
    with transaction.atomic():
        application = (Application.objects.filter(client_id=client_id).first()
                       or Application(client_id=client_id))
        application.name = client_id
        application.client_type = Application.CLIENT_CONFIDENTIAL
        application.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
        application.hash_client_secret = True
        application.client_secret = str(payload["client_secret"])
        application.redirect_uris = " ".join(redirect_uris)
        application.skip_authorization = True
        application.algorithm = Application.RS256_ALGORITHM
        application.full_clean()
        application.save()
    return {"client_id": client_id}


@control_endpoint
def users(payload: dict[str, Any]) -> dict[str, Any]:
    """Create or update (by username) a user, their groups, name and email_verified; returns
    the ``sub`` their ID tokens carry."""
    username = str(payload["username"])
    groups = _strings(payload, "groups")
    with transaction.atomic():
        user = User.objects.filter(username=username).first() or User(username=username)
        password = str(payload["password"])
        # Re-hashing an unchanged password would sign the user out of the provider (the
        # session keeps a hash of the password hash): an upsert that only changes groups
        # must not.
        if not user.has_usable_password() or not user.check_password(password):
            user.set_password(password)
        user.email = str(payload.get("email", ""))
        user.is_active = bool(payload.get("active", True))
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups])
        Profile.objects.update_or_create(user=user, defaults={
            "name": str(payload.get("name", "")),
            "email_verified": bool(payload.get("email_verified", True)),
        })
    # DOT's sub (OAuth2Validator.get_claim_dict).
    return {"sub": str(user.pk)}


@control_endpoint
def tamper(payload: dict[str, Any]) -> dict[str, Any]:
    """Spoil the next ID tokens the token endpoint issues, until the mode is "none" again."""
    mode = payload["mode"]
    if mode not in TAMPER_MODES:
        raise BadRequest(f"mode must be one of {', '.join(TAMPER_MODES)}")
    set_tamper_mode(mode)
    return {"mode": mode}


def index(request: HttpRequest) -> HttpResponse:
    """Where the login form lands without a ``next``: proof of being signed in."""
    who = request.user.get_username() if request.user.is_authenticated else "nobody"
    return HttpResponse(f"Test OpenID provider; signed in as {who}.", content_type="text/plain")
