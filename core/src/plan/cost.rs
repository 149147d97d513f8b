//! The cost model the planner trades bytes against round trips with.

use std::time::Duration;

/// The default cost model's round trip: a loopback one.
pub(crate) const LOOPBACK_ROUND_TRIP: Duration = Duration::from_micros(150);

/// How expensive a round trip is compared with moving bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Time a fetch costs beyond its bytes: the round trip and the broker's
    /// per-request work.
    pub round_trip: Duration,
    /// Bytes per second the connection delivers.
    pub bytes_per_second: f64,
    /// Fetches in flight at once; they share a round trip, so an extra
    /// fetch costs `round_trip / in_flight`. A recovery sets it to its
    /// [`crate::replay::ReplayOptions::max_in_flight`] (one in-flight
    /// setting), and to 1 once it has learned the link, whose per-fetch
    /// cost already includes what pipelining hides.
    pub in_flight: usize,
}

impl Default for CostModel {
    /// Loopback defaults: a 150 µs round trip, 1.5 GB/s, 4 in flight — a
    /// merge gap of about 56 KB. Measured on loopback with
    /// `walfetch::calibrate::measure_link` (the replay bench prints it every
    /// run, through its byte-counting proxy, on a 2-core machine): the
    /// in-process Kafka-rules broker answers in about 80 µs at about
    /// 1 GB/s, Tansu 0.6 in about 1.4 ms at 0.7–0.8 GB/s; the default sits
    /// between the two. Elsewhere, measure with `walfetch calibrate`.
    fn default() -> Self {
        Self {
            round_trip: LOOPBACK_ROUND_TRIP,
            bytes_per_second: 1.5e9,
            in_flight: 4,
        }
    }
}

impl CostModel {
    /// Bytes worth reading to save one fetch: two runs merge into one fetch
    /// when the bytes between them are fewer.
    pub fn merge_gap_bytes(&self) -> u64 {
        let per_fetch = self.round_trip.as_secs_f64() / self.in_flight.max(1) as f64;
        (per_fetch * self.bytes_per_second).max(0.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_grows_with_round_trip_and_shrinks_with_pipelining() {
        let base = CostModel::default();
        assert!((56_000..=56_250).contains(&base.merge_gap_bytes()));
        let slow = CostModel {
            round_trip: Duration::from_millis(2),
            ..base
        };
        assert!(slow.merge_gap_bytes() > base.merge_gap_bytes());
        let serial = CostModel {
            in_flight: 1,
            ..base
        };
        assert!(
            serial
                .merge_gap_bytes()
                .abs_diff(4 * base.merge_gap_bytes())
                <= 4
        );
    }
}
