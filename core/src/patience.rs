//! How long a fetch may wait at the broker after answers that held nothing
//! although there was something to read: the partition left out of the
//! response (`walfetch`'s `Cluster::fetch`), or no records below the
//! readable end (a replay, `walfetch`'s scan, the WAL writer looking for a
//! batch in the log). Some brokers answer so a fetch that may not wait
//! long enough to read their storage (Kafka, when a read from tiered
//! storage outlasts `remote.fetch.max.wait.ms`): each such answer in a row
//! lets the next fetch wait twice as long, up to a cap. Pure: the callers
//! count the answers and give up after a number of their own.

use std::time::Duration;

/// The wait to allow after `answers` answers in a row that held nothing
/// (none: no wait): `first`, doubled after each further one, up to `cap`.
pub fn growing_wait(answers: u32, first: Duration, cap: Duration) -> Duration {
    if answers == 0 {
        return Duration::ZERO;
    }
    let doublings = (answers - 1).min(16);
    first.saturating_mul(1u32 << doublings).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_wait_first_then_doubling_up_to_the_cap() {
        let (first, cap) = (Duration::from_millis(10), Duration::from_millis(500));
        let waits: Vec<u128> = (0..9)
            .map(|n| growing_wait(n, first, cap).as_millis())
            .collect();
        assert_eq!(waits, [0, 10, 20, 40, 80, 160, 320, 500, 500]);
        assert_eq!(growing_wait(u32::MAX, first, cap), cap);
        assert_eq!(
            growing_wait(40, Duration::MAX, Duration::MAX),
            Duration::MAX
        );
    }
}
