//! Generic cell-rate algorithm (GCRA) limiter for the MCP gateway.
//!
//! GCRA keeps a single timestamp per key (the theoretical arrival time), which makes it
//! cheap to store and exact under contention.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotUntil {
    pub key: String,
    pub retry_after: Duration,
}

impl fmt::Display for NotUntil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rate limited: {} may retry after {:?}", self.key, self.retry_after)
    }
}

impl std::error::Error for NotUntil {}

/// Limiter configuration: `burst` requests at once, `rate` per `period` on average.
#[derive(Debug, Clone, Copy)]
pub struct Quota {
    pub burst: u32,
    pub period: Duration,
}

impl Quota {
    pub fn per_second(n: u32) -> Self {
        Quota { burst: n, period: Duration::from_secs(1) / n.max(1) }
    }

    fn tolerance(&self) -> Duration {
        self.period * self.burst.saturating_sub(1)
    }
}

pub struct RateLimiter {
    quota: Quota,
    tat: Mutex<HashMap<String, Instant>>,
}

impl RateLimiter {
    pub fn new(quota: Quota) -> Self {
        RateLimiter { quota, tat: Mutex::new(HashMap::new()) }
    }

    /// Checks and records one request for `key` at `now`.
    pub fn check_at(&self, key: &str, now: Instant) -> Result<(), NotUntil> {
        let mut tat = self.tat.lock().expect("limiter mutex poisoned");
        let arrival = tat.get(key).copied().unwrap_or(now).max(now);
        let allow_at = arrival.checked_sub(self.quota.tolerance()).unwrap_or(now);
        if allow_at > now {
            // Too early: report how long until the request would conform.
            return Err(NotUntil { key: key.to_string(), retry_after: allow_at - now });
        }
        tat.insert(key.to_string(), arrival + self.quota.period);
        Ok(())
    }

    pub fn check(&self, key: &str) -> Result<(), NotUntil> {
        self.check_at(key, Instant::now())
    }

    pub fn forget(&self, key: &str) {
        self.tat.lock().expect("limiter mutex poisoned").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refuse() {
        let limiter = RateLimiter::new(Quota::per_second(2));
        let now = Instant::now();
        assert!(limiter.check_at("a", now).is_ok());
        assert!(limiter.check_at("a", now).is_ok());
        assert!(limiter.check_at("a", now).is_err());
    }

    #[test]
    fn keys_are_independent() {
        let limiter = RateLimiter::new(Quota::per_second(1));
        let now = Instant::now();
        assert!(limiter.check_at("a", now).is_ok());
        assert!(limiter.check_at("b", now).is_ok());
    }
}
