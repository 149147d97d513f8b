//! What a replay cost.

use std::time::Duration;

/// Counters of one replay, readable at any time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayStats {
    /// Fetch requests answered (with the one confirming the log's end when
    /// the replay runs to it; the ListOffsets request before it is not
    /// counted here nor in `round_trips`).
    pub fetches: u64,
    /// Round trips on the replay's critical path: fetches sent together
    /// (pipelined, before any of them was answered) share one round trip,
    /// and a fetch sent after a response counts one more than that
    /// response's. With one fetch in flight this equals `fetches`; the time
    /// a replay spends waiting on latency is about `round_trips` × the
    /// round-trip time.
    pub round_trips: u64,
    /// Bytes of Fetch responses on the wire (frames, length prefixes included).
    pub wire_bytes: u64,
    /// Bytes of the `records` fields of those responses.
    pub records_bytes: u64,
    /// Indexed entries yielded.
    pub entries: u64,
    /// Records yielded by the scan past `last_index`.
    pub tail_records: u64,
    /// Encoded bytes of the records yielded (their size inside batches).
    pub yielded_bytes: u64,
    /// Indexed offsets that no longer exist (skipped under
    /// [`super::LostPolicy::Skip`]).
    pub lost: Vec<i64>,
    /// Time from the start of the replay to the first record yielded.
    pub time_to_first: Option<Duration>,
    /// The most bytes held at once: buffered records plus the byte limits
    /// of fetches in flight.
    pub peak_buffered_bytes: u64,
    /// The fewest record bytes any consumer must receive under Kafka's
    /// fetch rules to get what was yielded so far, as far as the batches
    /// seen show the log (see [`crate::plan::floor_from_layout`]).
    pub floor_bytes: u64,
}

impl ReplayStats {
    /// Wire bytes per byte of records yielded: how much more was read than
    /// the region's own records. `None` before anything was yielded.
    pub fn read_amplification(&self) -> Option<f64> {
        (self.yielded_bytes > 0).then(|| self.wire_bytes as f64 / self.yielded_bytes as f64)
    }

    /// Records bytes received per byte of the floor: 1.0 is the least
    /// Kafka's rules allow. `None` before anything was yielded.
    pub fn floor_amplification(&self) -> Option<f64> {
        (self.floor_bytes > 0).then(|| self.records_bytes as f64 / self.floor_bytes as f64)
    }
}
