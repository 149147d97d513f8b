//! Retry timing: exponential backoff with jitter under an overall deadline.
//!
//! The delay before retry `n` (1-based) is `initial * multiplier^(n-1)`,
//! capped at `max_backoff`, then scaled by a random factor in
//! `[1 - jitter, 1]` so that clients that failed together do not retry in
//! lockstep. The policy is pure: the random factor is an argument, so tests
//! check the arithmetic without a random source.
//!
//! # References
//! - KIP-580 (exponential backoff with jitter for client retries); the
//!   Kafka clients' `retry.backoff.ms`, `retry.backoff.max.ms` and
//!   `default.api.timeout.ms` play the roles of the fields here.

use std::time::Duration;

/// How a cluster operation retries retriable failures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Delay before the first retry; also the least time between two
    /// Metadata reads of a topic made because operations found no usable
    /// leader for it (Kafka clients' `retry.backoff.ms`; see
    /// [`super::Cluster::leader`]).
    pub initial_backoff: Duration,
    /// Largest delay between two attempts.
    pub max_backoff: Duration,
    /// Factor between consecutive delays (at least 1).
    pub multiplier: f64,
    /// Fraction of each delay that is random, in `[0, 1]`: 0.5 draws each
    /// delay uniformly from its upper half.
    pub jitter: f64,
    /// Overall time for an operation, all attempts and delays included.
    /// The WAL writer gives a batch it has sent this plus the time one
    /// answer may take ([`super::ClusterConfig::produce_answer_timeout`]),
    /// so that a batch whose answer timed out is sent again.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            multiplier: 2.0,
            jitter: 0.5,
            deadline: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry `retry` (1 for the first retry), given a
    /// uniform random `unit` in `[0, 1]`.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial_backoff.as_secs_f64() * self.multiplier.max(1.0).powi(exponent);
        let capped = base.min(self.max_backoff.as_secs_f64());
        let jitter = self.jitter.clamp(0.0, 1.0);
        let factor = 1.0 - jitter * (1.0 - unit.clamp(0.0, 1.0));
        Duration::try_from_secs_f64(capped * factor).unwrap_or(self.max_backoff)
    }

    /// [`RetryPolicy::backoff`] with a fresh random draw.
    pub fn random_backoff(&self, retry: u32) -> Duration {
        self.backoff(retry, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 1.0), Duration::from_millis(50));
        assert_eq!(p.backoff(2, 1.0), Duration::from_millis(100));
        assert_eq!(p.backoff(3, 1.0), Duration::from_millis(200));
        assert_eq!(p.backoff(10, 1.0), Duration::from_secs(2));
        assert_eq!(p.backoff(u32::MAX, 1.0), Duration::from_secs(2));
    }

    #[test]
    fn jitter_scales_into_the_upper_part() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(2, 0.0), Duration::from_millis(50));
        assert_eq!(p.backoff(2, 0.5), Duration::from_millis(75));
        let none = RetryPolicy { jitter: 0.0, ..p };
        assert_eq!(none.backoff(2, 0.0), Duration::from_millis(100));
        for _ in 0..100 {
            let d = p.random_backoff(3);
            assert!(
                d >= Duration::from_millis(100) && d <= Duration::from_millis(200),
                "{d:?}"
            );
        }
    }

    #[test]
    fn odd_settings_do_not_panic() {
        let p = RetryPolicy {
            multiplier: f64::NAN,
            jitter: f64::INFINITY,
            initial_backoff: Duration::MAX,
            ..RetryPolicy::default()
        };
        let _ = p.backoff(5, f64::NAN);
        let _ = p.random_backoff(1);
    }
}
