//! The invariants checked after a round: entries exact or a prefix, errors the faults explain, memory within the cap.

use super::common::*;
use super::recovery_round::*;
use super::report::*;
use super::world::*;

/// Kind of a replay or write error, for the counts.
pub(crate) fn error_kind(error: &Error) -> String {
    match error {
        Error::Client(c) => format!("client.{}", client_kind(c)),
        Error::Decode { .. } => "decode".into(),
        Error::LostOffsets { .. } => "lost_offsets".into(),
        Error::LostRange { .. } => "lost_range".into(),
        Error::Stalled { .. } => "stalled".into(),
        Error::WriterClosed { .. } => "writer_closed".into(),
        Error::Index(_) => "index".into(),
        Error::MaybeWritten { source, .. } => format!("maybe_written.{}", client_kind(source)),
        Error::WrittenOffsetUnknown { source, .. } => {
            format!("written_offset_unknown.{}", client_kind(source))
        }
        other => format!("other({other})"),
    }
}

pub(crate) fn client_kind(error: &ClientError) -> String {
    match error {
        ClientError::Connection(c) => {
            let debug = format!("{c:?}");
            let variant = debug
                .split(|c: char| !c.is_alphanumeric())
                .next()
                .unwrap_or("unknown");
            format!("connection.{variant}")
        }
        ClientError::Kafka { code, .. } => format!("kafka.{code:?}"),
        ClientError::RetriesExhausted { last: Some(l), .. } => {
            format!("retries_exhausted.{}", client_kind(l))
        }
        ClientError::RetriesExhausted { last: None, .. } => "retries_exhausted.deadline".into(),
        ClientError::PartitionOmitted { .. } => "partition_omitted".into(),
        ClientError::MissingInResponse { .. } => "missing_in_response".into(),
        ClientError::NoLeader { .. } => "no_leader".into(),
        ClientError::NoBrokerAnswered { last, .. } => {
            format!("no_broker_answered.{}", client_kind(last))
        }
        other => format!("other({other})"),
    }
}

/// The peak resident set (`VmHWM`), in bytes, if the system tells.
pub(crate) fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident set to the current one (Linux 4.0+).
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

pub(crate) fn check_recovery(
    world: &World,
    asked: &Asked,
    outcome: &Outcome,
    (corrupting, may_fail): (bool, bool),
    round: u64,
    report: &mut SoakReport,
) {
    let context = format!("round {round} ({}, seed {})", asked.shape, report.seed);
    for f in &outcome.foreign {
        report.violations.push(format!("{context}: {f}"));
    }
    // Each region must get its entries from its checkpoint: all of them,
    // in order, when the recovery ends well; a prefix of them when it
    // fails. Entries retention removed (below the partition's new log
    // start) may be missing: under `LostPolicy::Skip` they are listed in
    // the stats, under `LostPolicy::Error` the recovery fails naming them
    // (retention during a recovery may also come after they were yielded).
    let skip = asked.options.on_lost == LostPolicy::Skip;
    let (listed_lost, listed_ranges) = match &outcome.result {
        Ok(stats) => (stats.lost.clone(), stats.lost_ranges.clone()),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let mut removed: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for (&(p, region), &from) in &asked.checkpoints {
        let start = world.log_start.get(&p).copied().unwrap_or(0);
        let want: Vec<(i64, Bytes)> = world.written[&p]
            .get(&region)
            .map(|v| v.iter().filter(|(o, _)| *o >= from).cloned().collect())
            .unwrap_or_default();
        let got = &outcome.got[&p][&region];
        report.entries_checked += got.len() as u64;
        // Under Skip, what was skipped is not expected.
        let expect: Vec<(i64, Bytes)> = want
            .iter()
            .filter(|(o, _)| !(skip && *o < start && !got.iter().any(|(g, _)| g == o)))
            .cloned()
            .collect();
        removed
            .entry(p)
            .or_default()
            .extend(want.iter().map(|(o, _)| *o).filter(|o| *o < start));
        let complete = outcome.result.is_ok();
        let ok = if complete {
            got == &expect
        } else {
            got.len() <= expect.len() && got[..] == expect[..got.len()]
        };
        if !ok {
            let first_bad = got
                .iter()
                .zip(expect.iter())
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expect.len()));
            report.violations.push(format!(
                "{context}: partition {p} region {region} from {from}: got {} entries, want {} \
                 (complete: {complete}); first difference at #{first_bad}: got {:?}, want {:?}",
                got.len(),
                expect.len(),
                got.get(first_bad).map(|e| e.0),
                expect.get(first_bad).map(|e| e.0),
            ));
        }
        // Skipped entries are listed as lost, and only removed ones.
        if complete && skip {
            for (o, _) in want.iter().filter(|(o, _)| *o < start) {
                let yielded = got.iter().any(|(g, _)| g == o);
                let in_range = listed_ranges.iter().any(|r| r.contains(o));
                if !yielded && !listed_lost.contains(o) && !in_range {
                    report.violations.push(format!(
                        "{context}: partition {p} region {region}: offset {o} neither yielded \
                         nor listed lost"
                    ));
                }
            }
        }
    }
    match &outcome.result {
        Ok(stats) => {
            let all_removed: Vec<i64> = removed.values().flatten().copied().collect();
            if let Some(o) = stats.lost.iter().find(|o| !all_removed.contains(o)) {
                report.violations.push(format!(
                    "{context}: listed offset {o} lost, which retention did not remove"
                ));
            }
            if let Some(r) = stats
                .lost_ranges
                .iter()
                .find(|r| world.log_start.values().all(|start| r.end > *start))
            {
                report.violations.push(format!(
                    "{context}: listed range {r:?} lost, past every retention"
                ));
            }
            if !stats.lost.is_empty() || !stats.lost_ranges.is_empty() {
                report.ended_well_skipping_lost += 1;
            }
            report.omitted += stats.omitted;
            check_memory(&context, asked, stats, report);
        }
        Err(error) => {
            let kind = error_kind(error);
            if !may_fail {
                report.violations.push(format!(
                    "{context}: failed though no fault of the round may end a recovery: {error}"
                ));
            }
            if kind.starts_with("client.connection.Decode") && !corrupting {
                report.violations.push(format!(
                    "{context}: undecodable response without a corrupting fault: {error}"
                ));
            }
            match error {
                Error::LostOffsets {
                    partition, offsets, ..
                } => {
                    let truly = removed.get(partition).cloned().unwrap_or_default();
                    if offsets.is_empty() || !offsets.iter().all(|o| truly.contains(o)) {
                        report.violations.push(format!(
                            "{context}: reported lost {offsets:?} of partition {partition}, \
                             retention removed {truly:?}: {error}"
                        ));
                    }
                }
                Error::LostRange { partition, to, .. } => {
                    let start = world.log_start.get(partition).copied().unwrap_or(0);
                    if *to > start {
                        report.violations.push(format!(
                            "{context}: reported a range lost up to {to}, the log starts at \
                             {start}: {error}"
                        ));
                    }
                }
                Error::Decode { .. } if !corrupting => {
                    report.violations.push(format!(
                        "{context}: decode error without a corrupting fault: {error}"
                    ));
                }
                Error::Stalled { .. } => {
                    report.violations.push(format!("{context}: {error}"));
                }
                _ => {}
            }
            SoakReport::count(&mut report.errors, kind, 1);
        }
    }
}

pub(crate) fn check_memory(
    context: &str,
    asked: &Asked,
    stats: &ReplayStats,
    report: &mut SoakReport,
) {
    let partitions = asked
        .checkpoints
        .keys()
        .map(|(p, _)| *p)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    // The cap may be passed by a batch for each partition's fetch that
    // keeps it going, and for each fetch in flight whose first batch, which
    // comes whole, was larger than counted (see
    // `ReplayOptions::max_buffered_bytes`); a batch and its framing.
    let fetches = partitions + asked.options.max_in_flight as u64;
    let allowed = asked.cap + fetches * 2 * MAX_BATCH_BYTES as u64;
    if stats.peak_buffered_bytes > allowed {
        report.violations.push(format!(
            "{context}: peak buffered {} bytes over the cap {} (allowed {allowed})",
            stats.peak_buffered_bytes, asked.cap
        ));
    }
    report.peak_buffered_bytes = report.peak_buffered_bytes.max(stats.peak_buffered_bytes);
    let ratio = stats.peak_buffered_bytes as f64 / asked.cap as f64;
    if ratio > report.peak_buffered_over_cap {
        report.peak_buffered_over_cap = ratio;
    }
}
