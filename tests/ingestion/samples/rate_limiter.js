// Sliding-window rate limiter used by the webhook dispatcher.
// Windows are kept per key in memory; a Redis-backed store can be swapped in.

import { EventEmitter } from "node:events";

const DEFAULT_WINDOW_MS = 60_000;
const DEFAULT_LIMIT = 120;

export class RateLimitError extends Error {
  constructor(key, retryAfterMs) {
    super(`rate limit exceeded for ${key}; retry after ${retryAfterMs} ms`);
    this.name = "RateLimitError";
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

class MemoryStore {
  constructor() {
    this.hits = new Map();
  }

  record(key, now) {
    const list = this.hits.get(key) ?? [];
    list.push(now);
    this.hits.set(key, list);
    return list;
  }

  prune(key, cutoff) {
    const list = this.hits.get(key);
    if (!list) {
      return [];
    }
    // Timestamps are appended in order, so the expired ones are a prefix.
    let i = 0;
    while (i < list.length && list[i] <= cutoff) {
      i += 1;
    }
    const kept = list.slice(i);
    this.hits.set(key, kept);
    return kept;
  }
}

export class SlidingWindowLimiter extends EventEmitter {
  constructor({ windowMs = DEFAULT_WINDOW_MS, limit = DEFAULT_LIMIT, store, now } = {}) {
    super();
    if (limit < 1) {
      throw new RangeError("limit must be at least 1");
    }
    this.windowMs = windowMs;
    this.limit = limit;
    this.store = store ?? new MemoryStore();
    this.now = now ?? (() => Date.now());
  }

  check(key) {
    const now = this.now();
    const hits = this.store.prune(key, now - this.windowMs);
    if (hits.length >= this.limit) {
      const retryAfterMs = hits[0] + this.windowMs - now;
      this.emit("limited", { key, retryAfterMs });
      return { allowed: false, retryAfterMs };
    }
    this.store.record(key, now);
    return { allowed: true, remaining: this.limit - hits.length - 1 };
  }

  async acquire(key, { maxWaitMs = 5_000 } = {}) {
    let waited = 0;
    for (;;) {
      const result = this.check(key);
      if (result.allowed) {
        return waited;
      }
      if (waited + result.retryAfterMs > maxWaitMs) {
        throw new RateLimitError(key, result.retryAfterMs);
      }
      await sleep(result.retryAfterMs);
      waited += result.retryAfterMs;
    }
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export const limitMiddleware = (limiter, keyFn = (req) => req.ip) => async (req, res, next) => {
  const key = keyFn(req);
  const result = limiter.check(key);
  if (!result.allowed) {
    res.setHeader("Retry-After", Math.ceil(result.retryAfterMs / 1000));
    res.statusCode = 429;
    res.end("Too Many Requests");
    return;
  }
  res.setHeader("X-RateLimit-Remaining", String(result.remaining));
  next();
};

export default SlidingWindowLimiter;
