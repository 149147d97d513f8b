//! The soak's configuration and its report: faults fired, rounds run, violations found.

use super::common::*;

/// What the soak runs.
#[derive(Debug, Clone, Copy)]
pub struct SoakConfig {
    /// Seeds every random choice.
    pub seed: u64,
    /// Stop once at least this many faults fired.
    pub faults: u64,
    /// Entries per partition of each world.
    pub entries_per_partition: usize,
}

impl Default for SoakConfig {
    fn default() -> Self {
        Self {
            seed: 0x50a6,
            faults: 300,
            entries_per_partition: 240,
        }
    }
}

/// What the soak saw; [`SoakReport::to_json`] prints it.
#[derive(Debug, Default)]
pub struct SoakReport {
    /// The seed.
    pub seed: u64,
    /// Rounds run.
    pub rounds: u64,
    /// Faults that fired, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Faults queued that never fired (the round ended first), by kind.
    pub unfired: BTreeMap<String, u64>,
    /// Recoveries run, by shape.
    pub replays: BTreeMap<String, u64>,
    /// Entries checked against what was written.
    pub entries_checked: u64,
    /// Recoveries and writes that ended in an error, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Entries produced by the writers, acknowledged and failed.
    pub produced_acked: u64,
    /// Entries whose append failed.
    pub produced_failed: u64,
    /// Of those, entries found in the log all the same (the broker appended
    /// them, the answer was lost: their errors say they may be written).
    pub produced_failed_but_written: u64,
    /// Recoveries under `LostPolicy::Skip` that ended well after skipping
    /// entries retention removed (listed in their stats).
    pub ended_well_skipping_lost: u64,
    /// Omitted partitions the recoveries counted.
    pub omitted: u64,
    /// The highest `peak_buffered_bytes` a recovery reported.
    pub peak_buffered_bytes: u64,
    /// The highest ratio of `peak_buffered_bytes` to the recovery's cap.
    pub peak_buffered_over_cap: f64,
    /// The largest growth of the peak resident set over a round's start.
    pub peak_rss_growth_bytes: u64,
    /// Invariant violations (the soak fails if any).
    pub violations: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

impl SoakReport {
    /// Faults that fired, all kinds.
    pub fn faults_fired(&self) -> u64 {
        self.faults.values().sum()
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "seed": self.seed,
            "rounds": self.rounds,
            "faults_fired": self.faults_fired(),
            "faults_by_kind": self.faults,
            "faults_queued_unfired": self.unfired,
            "replays": self.replays.values().sum::<u64>(),
            "replays_by_shape": self.replays,
            "entries_checked": self.entries_checked,
            "errors_by_kind": self.errors,
            "ended_well_skipping_lost": self.ended_well_skipping_lost,
            "produced_acked": self.produced_acked,
            "produced_failed": self.produced_failed,
            "produced_failed_but_written": self.produced_failed_but_written,
            "omitted_partitions_counted": self.omitted,
            "peak_buffered_bytes": self.peak_buffered_bytes,
            "peak_buffered_over_cap": (self.peak_buffered_over_cap * 1000.0).round() / 1000.0,
            "peak_rss_growth_bytes": self.peak_rss_growth_bytes,
            "violations": self.violations,
            "elapsed_s": (self.elapsed.as_secs_f64() * 10.0).round() / 10.0,
        })
    }

    pub(crate) fn count(map: &mut BTreeMap<String, u64>, key: impl Into<String>, n: u64) {
        *map.entry(key.into()).or_default() += n;
    }
}
