//! What a replay cost, and what it yielded per region.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use super::LinkStats;
use crate::index::RegionId;

/// Counters of one replay (one partition, or a whole recovery summed over
/// its partitions), readable at any time.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ReplayStats {
    /// Fetch requests answered (with the one confirming the log's end when
    /// the replay runs to it; the ListOffsets request before it is not
    /// counted here nor in `round_trips`).
    pub fetches: u64,
    /// Fetch requests sent: fetches of partitions led by the same broker,
    /// sent at the same time, share one (with the one confirming the log's
    /// end). Counted over a whole replay, not per partition.
    pub requests: u64,
    /// Round trips on the replay's critical path: fetches sent together
    /// (pipelined, before any of them was answered) share one round trip,
    /// and a fetch sent after a response counts one more than that
    /// response's. With one fetch in flight this equals `fetches`; the time
    /// a replay spends waiting on latency is about `round_trips` × the
    /// round-trip time. Summed over partitions in a recovery's total.
    pub round_trips: u64,
    /// Fetch responses that left a partition asked for out altogether (no
    /// data, no error: a broker that could not read it within the fetch's
    /// wait), each answered by fetching the partition again with a longer
    /// wait (see `walfetch::cluster::Cluster::fetch`). Counted over a whole
    /// replay, like `requests`.
    pub omitted: u64,
    /// The throttle times of the Fetch responses (KIP-219), summed: how
    /// long quota-throttling brokers asked the client to hold back its
    /// next request to them, which it waited out (per broker; fetches to
    /// other brokers go on meanwhile). Counted over a whole replay, like
    /// `requests`.
    pub throttle_time: Duration,
    /// Bytes of Fetch responses on the wire (frames, length prefixes included).
    pub wire_bytes: u64,
    /// Bytes of the `records` fields of those responses.
    pub records_bytes: u64,
    /// Indexed entries yielded.
    pub entries: u64,
    /// Records yielded by the scan past `last_index` (or by a full scan).
    pub tail_records: u64,
    /// Records the scan past `last_index` read that belong to no region
    /// asked for (another region's, none the region rule finds, or a no-op
    /// record, [`crate::index::RegionRule::is_noop`]), and so were not
    /// yielded.
    pub tail_skipped: u64,
    /// Of [`ReplayStats::tail_skipped`], the records in which the region
    /// rule found no region id at all (no-op records aside). Many of them
    /// mean the rule does not read this log's records (the id is written
    /// otherwise, e.g. GreptimeDB's JSON record meta, or elsewhere): their
    /// regions' entries past `last_index` were not yielded.
    pub tail_unassigned: u64,
    /// Encoded bytes of the records yielded (their size inside batches).
    pub yielded_bytes: u64,
    /// Records yielded from batches the broker cut that no checksum covered
    /// (neither their batch's CRC nor a per-record checksum): only under
    /// [`super::CutRecords::Trusted`].
    pub unverified_records: u64,
    /// Indexed offsets that no longer exist (skipped under
    /// [`super::LostPolicy::Skip`]; under [`super::LostPolicy::Error`],
    /// those [`crate::error::Error::LostOffsets`] named).
    pub lost: Vec<i64>,
    /// Ranges of offsets past `last_index` that the scan had still to read
    /// and found gone (retention), skipped under [`super::LostPolicy::Skip`]
    /// (see [`crate::error::Error::LostRange`]).
    pub lost_ranges: Vec<Range<i64>>,
    /// Time from the start of the replay to the first record yielded.
    pub time_to_first: Option<Duration>,
    /// The most bytes held at once: what buffered records keep alive (for
    /// records of a compressed batch, its decompressed records unless they
    /// were copied out) plus what the answers to fetches in flight will
    /// hold (see [`super::ReplayOptions::max_buffered_bytes`]), as of when
    /// fetches were sent and answers taken.
    pub peak_buffered_bytes: u64,
    /// The fewest record bytes any consumer must receive under Kafka's
    /// fetch rules to get what was yielded so far, as far as the index's
    /// hints and the batches seen show the log (see
    /// [`crate::plan::floor_from_layout`]; where part of the log is unknown
    /// it can only be higher than the true floor).
    pub floor_bytes: u64,
    /// What each region got.
    pub regions: BTreeMap<RegionId, RegionStats>,
    /// What each broker's link was learned to cost, by the broker's
    /// address (`host:port`), where the replay learns the link
    /// ([`super::ReplayOptions::learn_link`]); empty otherwise.
    pub links: BTreeMap<String, LinkStats>,
}

impl RegionStats {
    /// Every record of the region yielded: its indexed entries and its
    /// records found past `last_index` (or by a full scan).
    pub fn records(&self) -> u64 {
        self.entries + self.tail_records
    }
}

/// What one region of a replay got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionStats {
    /// Indexed entries yielded.
    pub entries: u64,
    /// Records yielded from the scan past `last_index`.
    pub tail_records: u64,
    /// Encoded bytes of the records yielded.
    pub yielded_bytes: u64,
    /// Indexed offsets that no longer exist.
    pub lost: Vec<i64>,
}

impl ReplayStats {
    /// Every record yielded: the indexed entries ([`Self::entries`]) and
    /// the records of the scan past `last_index` or of a full scan
    /// ([`Self::tail_records`]). What a caller printing each record
    /// printed.
    pub fn records(&self) -> u64 {
        self.entries + self.tail_records
    }

    /// Wire bytes per byte of records yielded: how much more was read than
    /// the regions' own records (`×own`). `None` before anything was
    /// yielded.
    pub fn read_amplification(&self) -> Option<f64> {
        (self.yielded_bytes > 0).then(|| self.wire_bytes as f64 / self.yielded_bytes as f64)
    }

    /// Records bytes received per byte of the floor: 1.0 is the least
    /// Kafka's rules allow. `None` before anything was yielded.
    pub fn floor_amplification(&self) -> Option<f64> {
        (self.floor_bytes > 0).then(|| self.records_bytes as f64 / self.floor_bytes as f64)
    }

    /// Adds `other`'s counters to these, as for replays run one after
    /// another. (A recovery that runs partitions side by side counts its
    /// round trips and peak memory over all of them instead.)
    pub fn add(&mut self, other: &ReplayStats) {
        self.fetches += other.fetches;
        self.requests += other.requests;
        self.omitted += other.omitted;
        self.throttle_time += other.throttle_time;
        self.round_trips += other.round_trips;
        self.wire_bytes += other.wire_bytes;
        self.records_bytes += other.records_bytes;
        self.entries += other.entries;
        self.tail_records += other.tail_records;
        self.tail_skipped += other.tail_skipped;
        self.tail_unassigned += other.tail_unassigned;
        self.yielded_bytes += other.yielded_bytes;
        self.unverified_records += other.unverified_records;
        self.lost.extend_from_slice(&other.lost);
        self.lost_ranges.extend_from_slice(&other.lost_ranges);
        self.time_to_first = match (self.time_to_first, other.time_to_first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.peak_buffered_bytes = self.peak_buffered_bytes.max(other.peak_buffered_bytes);
        self.floor_bytes += other.floor_bytes;
        for (&id, region) in &other.regions {
            let mine = self.regions.entry(id).or_default();
            mine.entries += region.entries;
            mine.tail_records += region.tail_records;
            mine.yielded_bytes += region.yielded_bytes;
            mine.lost.extend_from_slice(&region.lost);
        }
        // Replays one after another learn each link anew: the latest's.
        for (broker, link) in &other.links {
            self.links.insert(broker.clone(), *link);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full scan yields no indexed entry: what it yields counts as
    /// records all the same.
    #[test]
    fn records_count_indexed_entries_and_the_tail() {
        let mut stats = ReplayStats {
            entries: 3,
            tail_records: 4,
            ..ReplayStats::default()
        };
        stats.regions.insert(
            7,
            RegionStats {
                tail_records: 4,
                ..RegionStats::default()
            },
        );
        assert_eq!(stats.records(), 7);
        assert_eq!(stats.regions[&7].records(), 4);
        let mut total = ReplayStats::default();
        total.add(&stats);
        total.add(&stats);
        assert_eq!(total.records(), 14);
        assert_eq!(total.regions[&7].records(), 8);
    }
}
