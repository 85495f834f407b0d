"""Token-bucket rate limiting for outbound API calls.

The limiter is shared by every worker thread in a process, so all state changes happen
under one lock; the clock is injectable so tests never sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_RATE = 10.0
DEFAULT_BURST = 20
MAX_WAIT_SECONDS = 30.0


class RateLimitExceeded(Exception):
    """Raised when a caller would have to wait longer than it is willing to."""

    def __init__(self, key: str, retry_after: float) -> None:
        super().__init__(f"rate limit exceeded for {key!r}, retry after {retry_after:.2f}s")
        self.key = key
        self.retry_after = retry_after


@dataclass
class Bucket:
    """One token bucket: ``tokens`` refill at ``rate`` per second up to ``capacity``."""

    rate: float
    capacity: int
    tokens: float = 0.0
    updated_at: float = field(default=0.0)

    def refill(self, now: float) -> None:
        # Refill lazily on access instead of with a timer thread: cheaper and exact.
        elapsed = max(0.0, now - self.updated_at)
        self.tokens = min(float(self.capacity), self.tokens + elapsed * self.rate)
        self.updated_at = now

    def wait_time(self, cost: float) -> float:
        missing = cost - self.tokens
        if missing <= 0:
            return 0.0
        return missing / self.rate


class RateLimiter:
    """A keyed token-bucket limiter (one bucket per API key or per host)."""

    def __init__(
        self,
        rate: float = DEFAULT_RATE,
        burst: int = DEFAULT_BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def _bucket(self, key: str, now: float) -> Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            # A new key starts full so the first burst is not throttled.
            bucket = Bucket(self.rate, self.burst, float(self.burst), now)
            self._buckets[key] = bucket
        return bucket

    def try_acquire(self, key: str, cost: float = 1.0) -> bool:
        """Take ``cost`` tokens if they are available right now; never blocks."""
        with self._lock:
            now = self._clock()
            bucket = self._bucket(key, now)
            bucket.refill(now)
            if bucket.tokens >= cost:
                bucket.tokens -= cost
                return True
            return False

    def acquire(self, key: str, cost: float = 1.0, max_wait: float = MAX_WAIT_SECONDS) -> float:
        """Block until ``cost`` tokens are available; return how long we waited."""
        if cost > self.burst:
            raise ValueError(f"cost {cost} exceeds burst {self.burst}")
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                bucket = self._bucket(key, now)
                bucket.refill(now)
                delay = bucket.wait_time(cost)
                if delay == 0.0:
                    bucket.tokens -= cost
                    return waited
            if waited + delay > max_wait:
                raise RateLimitExceeded(key, delay)
            # Sleep outside the lock so other keys keep flowing.
            self._sleep(delay)
            waited += delay

    def reset(self, key: str | None = None) -> None:
        with self._lock:
            if key is None:
                self._buckets.clear()
            else:
                self._buckets.pop(key, None)

    def snapshot(self) -> dict[str, float]:
        """Tokens currently available per key, for the metrics endpoint."""
        with self._lock:
            now = self._clock()
            result = {}
            for key, bucket in self._buckets.items():
                bucket.refill(now)
                result[key] = round(bucket.tokens, 3)
            return result


Decorator = Callable[[Callable[..., object]], Callable[..., object]]


def limited(limiter: RateLimiter, key: str) -> Decorator:
    """Decorator: acquire one token from ``limiter`` before each call."""

    def decorate(func: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            limiter.acquire(key)
            return func(*args, **kwargs)

        wrapper.__name__ = getattr(func, "__name__", "wrapper")
        wrapper.__doc__ = func.__doc__
        return wrapper

    return decorate
