/**
 * Leaky-bucket limiter for the agent retrieval endpoint.
 * Each persona gets its own bucket so one noisy agent cannot starve the rest.
 */

import type { Clock } from "./clock";

export interface LimiterOptions {
  capacity: number;
  leakPerSecond: number;
  clock?: Clock;
}

export type Decision =
  | { allowed: true; level: number }
  | { allowed: false; retryAfterSeconds: number };

export enum LimitScope {
  Organization = "organization",
  Repository = "repository",
  Persona = "persona",
}

interface BucketState {
  level: number;
  lastLeak: number;
}

const systemClock: Clock = { now: () => Date.now() / 1000 };

export class LeakyBucketLimiter {
  private readonly buckets = new Map<string, BucketState>();
  private readonly clock: Clock;

  constructor(private readonly options: LimiterOptions) {
    if (options.capacity <= 0) {
      throw new Error("capacity must be positive");
    }
    this.clock = options.clock ?? systemClock;
  }

  private leak(state: BucketState, now: number): void {
    // Leak lazily on access; the bucket never goes below empty.
    const leaked = (now - state.lastLeak) * this.options.leakPerSecond;
    state.level = Math.max(0, state.level - leaked);
    state.lastLeak = now;
  }

  decide(scope: LimitScope, key: string, cost = 1): Decision {
    const id = `${scope}:${key}`;
    const now = this.clock.now();
    let state = this.buckets.get(id);
    if (state === undefined) {
      state = { level: 0, lastLeak: now };
      this.buckets.set(id, state);
    }
    this.leak(state, now);
    if (state.level + cost > this.options.capacity) {
      const overflow = state.level + cost - this.options.capacity;
      return { allowed: false, retryAfterSeconds: overflow / this.options.leakPerSecond };
    }
    state.level += cost;
    return { allowed: true, level: state.level };
  }

  levels(): Record<string, number> {
    const now = this.clock.now();
    const out: Record<string, number> = {};
    for (const [id, state] of this.buckets) {
      this.leak(state, now);
      out[id] = Number(state.level.toFixed(3));
    }
    return out;
  }
}

export function retryAfterHeader(decision: Decision): Record<string, string> {
  if (decision.allowed) {
    return {};
  }
  return { "Retry-After": String(Math.ceil(decision.retryAfterSeconds)) };
}

export const describeDecision = (decision: Decision): string =>
  decision.allowed ? `allowed (level ${decision.level})` : `limited for ${decision.retryAfterSeconds}s`;
