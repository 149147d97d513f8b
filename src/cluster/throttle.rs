//! Quota throttling: a broker that throttles a client answers at once with
//! `throttle_time_ms` set and expects no further request from the client
//! before that time has passed (KIP-219; it mutes the connection
//! meanwhile). walfetch honours it per broker: a throttled answer from a
//! broker holds back every later request to that broker, on any pooled
//! connection, until the time has passed; other brokers are not affected.
//!
//! # References
//! - KIP-219 (throttle time returned at once, the client backs off).
//! - KIP-13 (quotas and `throttle_time_ms`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// When each broker accepts requests again.
#[derive(Debug, Default)]
pub(crate) struct Throttles {
    until: Mutex<HashMap<String, Instant>>,
}

impl Throttles {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Instant>> {
        self.until.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that `broker` answered with `throttle_time_ms` (≤ 0: not
    /// throttled) just now.
    pub(crate) fn record(&self, broker: &str, throttle_time_ms: i32) {
        let Ok(ms) = u64::try_from(throttle_time_ms) else {
            return;
        };
        if ms == 0 {
            return;
        }
        let Some(until) = Instant::now().checked_add(Duration::from_millis(ms)) else {
            return;
        };
        tracing::debug!(%broker, throttle_time_ms, "broker throttles this client");
        let mut map = self.lock();
        let entry = map.entry(broker.to_owned()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// When `broker` accepts requests again, if it does not now.
    pub(crate) fn until(&self, broker: &str) -> Option<Instant> {
        self.lock()
            .get(broker)
            .copied()
            .filter(|&until| until > Instant::now())
    }

    /// Waits until `broker` accepts requests again; how long it waited.
    pub(crate) async fn wait(&self, broker: &str) -> Duration {
        let until = {
            let mut map = self.lock();
            match map.get(broker) {
                Some(&until) if until > Instant::now() => until,
                Some(_) => {
                    map.remove(broker);
                    return Duration::ZERO;
                }
                None => return Duration::ZERO,
            }
        };
        let started = Instant::now();
        tokio::time::sleep_until(until).await;
        started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_throttle_holds_back_its_broker_only_until_it_ends() {
        let t = Throttles::default();
        t.record("a:1", 300);
        t.record("a:1", 100); // a shorter one does not shorten it
        t.record("b:1", 0);
        t.record("b:1", -5);
        let started = Instant::now();
        assert_eq!(t.wait("b:1").await, Duration::ZERO);
        assert_eq!(t.wait("c:1").await, Duration::ZERO);
        assert_eq!(started.elapsed(), Duration::ZERO);
        assert_eq!(t.until("a:1"), Some(started + Duration::from_millis(300)));
        assert_eq!(t.until("b:1"), None);
        assert_eq!(t.wait("a:1").await, Duration::from_millis(300));
        assert_eq!(t.wait("a:1").await, Duration::ZERO);
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        assert_eq!(t.until("a:1"), None);
    }
}
