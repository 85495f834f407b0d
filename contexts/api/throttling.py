"""Per-principal throttling: generous defaults for agent fleets, configurable."""

from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken


class AgentRateThrottle(SimpleRateThrottle):
    """One bucket per token (or per user for console sessions), rate ``agent`` in settings."""

    scope = "agent"

    def get_cache_key(self, request, view) -> str | None:
        principal = request.user
        if isinstance(principal, ApiToken):
            ident = f"token:{principal.pk}"
        elif getattr(principal, "pk", None):
            ident = f"user:{principal.pk}"
        else:
            ident = self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}
