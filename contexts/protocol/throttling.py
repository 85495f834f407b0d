"""Per-principal throttling: generous defaults for agent fleets, configurable.

DRF's ``SimpleRateThrottle`` keeps every request's timestamp of the window in one cache entry
and rewrites it with a read-modify-write: at thousands of requests a minute that is a large
value moved twice per request, and concurrent requests lose each other's updates. Here each
window is one atomic Redis counter (``SET NX`` + ``INCR``, one round trip): constant cost,
nothing lost. A fixed window lets a token spend up to twice its rate across a window
boundary, which is the usual trade for that.
"""

from __future__ import annotations

from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken
from contexts.kernel.availability import cache_redis, redis_call
from contexts.kernel.client_address import client_address


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

    def get_ident(self, request) -> str:
        # DRF's own reads X-Forwarded-For from anyone (NUM_PROXIES unset): a client could pick
        # its bucket. The one decision of the client address instead (finding 7).
        return client_address(request)

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        self.window_ends_at = (window + 1) * self.duration
        bucket = f"{key}:{window}"
        # Without Redis the request goes through: retrieval must not depend on Redis, and a
        # limit nobody can count is better lifted for a while than turned into an outage.
        return redis_call(lambda: self._count(bucket), 0, "throttle") <= self.num_requests

    def _count(self, bucket: str) -> int:
        # One round trip: open the window's counter if it is new, then count this request.
        # The entry outlives its window a little so a slow INCR never recreates it.
        key = self.cache.make_and_validate_key(bucket)  # where the cache API finds it too
        pipe = cache_redis().pipeline(transaction=False)
        pipe.set(key, 0, ex=self.duration + 5, nx=True)
        pipe.incr(key)
        return pipe.execute()[1]

    def wait(self) -> float:
        return max(0.0, self.window_ends_at - self.timer())
