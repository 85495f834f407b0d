"""What an MCP client learns about ``/mcp`` before it has a token (the MCP authorization rules,
RFC 9728 and RFC 6750): where the protected resource's metadata is, and that metadata.

Contexts issues its agents' tokens itself (the console's Tokens page, ``manage.py create_token``):
it runs no OAuth authorization server, so the metadata names none (``authorization_servers`` is
optional in RFC 9728) and says a token goes in the ``Authorization`` header.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

MCP_PATH = "/mcp"
# RFC 9728 §3.1: the well-known prefix inserted between the host and the resource's path.
METADATA_PATH = "/.well-known/oauth-protected-resource" + MCP_PATH
REALM = "contexts"


def resource_url() -> str:
    """The resource's identifier: the address clients reach ``/mcp`` at (``CONTEXTS_BASE_URL``)."""
    return settings.BASE_URL + MCP_PATH


def metadata_url() -> str:
    return settings.BASE_URL + METADATA_PATH


def challenge(*, invalid_token: bool) -> str:
    """The ``WWW-Authenticate`` value of a 401 from ``/mcp``: the Bearer scheme, the realm and
    where the resource's metadata is; ``error="invalid_token"`` when a token was presented but
    is malformed, unknown, revoked or expired (RFC 6750 §3.1: none when no token came)."""
    parts = [f'realm="{REALM}"', f'resource_metadata="{metadata_url()}"']
    if invalid_token:
        parts += ['error="invalid_token"',
                  'error_description="invalid, expired or revoked token"']
    return "Bearer " + ", ".join(parts)


@require_safe
def protected_resource(request: HttpRequest) -> JsonResponse:
    """``GET /.well-known/oauth-protected-resource/mcp`` (RFC 9728 §3): public, no token."""
    response = JsonResponse({
        "resource": resource_url(),
        "resource_name": "Contexts",
        "bearer_methods_supported": ["header"],
        "resource_documentation": settings.BASE_URL + "/api/docs/",
    })
    response["Cache-Control"] = "public, max-age=3600"
    return response
