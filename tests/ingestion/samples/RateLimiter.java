package io.contexts.ratelimit;

import java.time.Clock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Fixed-window rate limiter keyed by API token.
 *
 * <p>Windows are aligned to the clock so every node of the cluster agrees on window edges.
 */
public final class RateLimiter {

    /** Thrown when a caller exceeds its quota for the current window. */
    public static final class QuotaExceededException extends RuntimeException {
        private final Duration retryAfter;

        public QuotaExceededException(String key, Duration retryAfter) {
            super("quota exceeded for " + key + ", retry after " + retryAfter);
            this.retryAfter = retryAfter;
        }

        public Duration getRetryAfter() {
            return retryAfter;
        }
    }

    private static final class Window {
        long start;
        int count;

        Window(long start) {
            this.start = start;
        }
    }

    private final int limit;
    private final Duration window;
    private final Clock clock;
    private final Map<String, Window> windows = new ConcurrentHashMap<>();
    private final ReentrantLock lock = new ReentrantLock();

    public RateLimiter(int limit, Duration window, Clock clock) {
        if (limit < 1) {
            throw new IllegalArgumentException("limit must be at least 1");
        }
        if (window.isZero() || window.isNegative()) {
            throw new IllegalArgumentException("window must be positive");
        }
        this.limit = limit;
        this.window = window;
        this.clock = clock;
    }

    private long windowStart(long nowMillis) {
        long size = window.toMillis();
        return nowMillis - (nowMillis % size);
    }

    /**
     * Counts one request for {@code key}.
     *
     * @throws QuotaExceededException when the window is already full
     */
    public int acquire(String key) {
        long now = clock.millis();
        long start = windowStart(now);
        lock.lock();
        try {
            Window current = windows.computeIfAbsent(key, k -> new Window(start));
            if (current.start != start) {
                // A new window began since the last request: forget the old count.
                current.start = start;
                current.count = 0;
            }
            if (current.count >= limit) {
                Duration retryAfter = Duration.ofMillis(start + window.toMillis() - now);
                throw new QuotaExceededException(key, retryAfter);
            }
            current.count += 1;
            return limit - current.count;
        } finally {
            lock.unlock();
        }
    }

    public boolean tryAcquire(String key) {
        try {
            acquire(key);
            return true;
        } catch (QuotaExceededException e) {
            return false;
        }
    }

    public int remaining(String key) {
        Window current = windows.get(key);
        if (current == null || current.start != windowStart(clock.millis())) {
            return limit;
        }
        return Math.max(0, limit - current.count);
    }

    public void reset() {
        windows.clear();
    }
}
