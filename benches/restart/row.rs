//! A contender's figures over its measured runs: one row of the restart table.

use std::time::Duration;

use serde::Serialize;

use crate::floor::{self, Floor};
use crate::report::{median, ms, Conditions, Spread};

use super::*;

/// Every figure of one contender on one restart (medians over the
/// measured runs unless said otherwise).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RestartRow {
    pub(super) broker: String,
    /// The link and fetch cost it ran over.
    #[serde(flatten)]
    pub(super) conditions: Conditions,
    pub(super) workload: String,
    pub(super) partitions: usize,
    pub(super) contender: String,
    #[serde(skip)]
    pub(super) kind: RestartContender,
    pub(super) regions: usize,
    /// Entries yielded (checked equal to the written ones, region by region).
    pub(super) entries: usize,
    /// Bytes the proxy carried from the broker, and to it (requests).
    pub(super) wire: Spread<u64>,
    pub(super) request_bytes: u64,
    /// The floor of the union of the regions' wanted records, all
    /// partitions together, and each partition's.
    pub(super) floor_bytes: u64,
    pub(super) partition_floors: Vec<Floor>,
    /// The regions' own floors, summed.
    pub(super) region_floors_bytes: u64,
    /// The recovered regions' own record bytes (`ReplayStats::yielded_bytes`).
    pub(super) yielded_bytes: u64,
    /// Wire bytes over the union floor, and over `yielded_bytes`.
    pub(super) amp_floor: f64,
    pub(super) amp_own: f64,
    /// Fetches and round trips on the critical path, all replays together.
    pub(super) fetches: u64,
    pub(super) round_trips: u64,
    /// Wall time of one replay: of a region (region by region, over every
    /// region of every measured run) or of the one pass.
    pub(super) replay_wall_ms: f64,
    /// Wall time until every region was recovered.
    pub(super) total_wall_ms: Spread<f64>,
    /// walfetch's rows: the total wall time median over the one-pass
    /// scan's of the same restart ([`set_over_scan`]).
    pub(super) wall_over_scan: Option<f64>,
    /// CPU time of this process (client, proxy, and the broker when it is
    /// the in-process scripted one) during a run; `None` where unknown.
    pub(super) cpu_ms: Option<f64>,
    /// Peak buffered bytes (of any one replay).
    pub(super) peak_buffered_bytes: u64,
    /// What the one pass learned of the broker's link; `None` for the
    /// region-by-region contenders (each replay learns anew).
    pub(super) link: Option<LearnedLink>,
    /// Measured runs.
    pub(super) runs: usize,
}

/// What a one-pass contender learned a fetch costs (`ReplayStats::links`),
/// over its measured runs.
#[derive(Debug, Clone, Copy, Serialize)]
pub(super) struct LearnedLink {
    /// The median over the runs that measured it of the most a fetch was
    /// measured to cost beyond its bytes, on any broker.
    pub(super) dearest_us: Option<f64>,
    /// Runs in which fetches were dear after some answer (the plan then
    /// read through gaps to send fewer).
    pub(super) dear_runs: usize,
}

impl LearnedLink {
    pub(super) fn of(runs: &[RestartRun]) -> Self {
        let dearest: Vec<Duration> = runs
            .iter()
            .filter_map(|r| {
                r.stats
                    .links
                    .values()
                    .filter_map(|l| l.dearest_per_fetch)
                    .max()
            })
            .collect();
        LearnedLink {
            dearest_us: (!dearest.is_empty()).then(|| median(dearest).as_secs_f64() * 1e6),
            dear_runs: runs
                .iter()
                .filter(|r| r.stats.links.values().any(|l| l.dear_answers > 0))
                .count(),
        }
    }
}

impl RestartRow {
    pub(super) fn new(
        broker: &str,
        conditions: Conditions,
        workload: &str,
        restart: &Restart,
        kind: RestartContender,
        runs: &[RestartRun],
        offsets_only: bool,
    ) -> Self {
        let wire = Spread::of(runs.iter().map(|r| r.wire_bytes).collect());
        let total = Spread::of(runs.iter().map(|r| r.total).collect());
        let (_, yielded_bytes) = restart.own_records();
        let per_run = |f: fn(&RestartRun) -> u64| median(runs.iter().map(f).collect());
        RestartRow {
            broker: broker.into(),
            conditions,
            workload: workload.into(),
            partitions: restart.parts.len(),
            contender: kind.label(floor::kafka_rules(broker), offsets_only),
            kind,
            regions: restart.wishes.len(),
            entries: runs.last().map_or(0, |r| r.entries),
            wire,
            request_bytes: per_run(|r| r.request_bytes),
            floor_bytes: restart.floor_bytes(broker),
            partition_floors: restart.floors.clone(),
            region_floors_bytes: restart.region_floors,
            yielded_bytes,
            amp_floor: wire.median as f64 / restart.floor_bytes(broker).max(1) as f64,
            amp_own: wire.median as f64 / yielded_bytes.max(1) as f64,
            fetches: per_run(|r| r.stats.fetches),
            round_trips: per_run(|r| r.stats.round_trips),
            replay_wall_ms: ms(median(
                runs.iter()
                    .flat_map(|r| r.replays.iter().copied())
                    .collect(),
            )),
            total_wall_ms: total.map(ms),
            wall_over_scan: None,
            cpu_ms: runs
                .iter()
                .map(|r| r.cpu)
                .collect::<Option<Vec<_>>>()
                .filter(|cpu| !cpu.is_empty())
                .map(|cpu| ms(median(cpu))),
            peak_buffered_bytes: per_run(|r| r.stats.peak_buffered_bytes),
            link: kind.one_pass().then(|| LearnedLink::of(runs)),
            runs: runs.len(),
        }
    }
}

/// Sets `wall_over_scan` on walfetch's rows of `rows`, one restart's,
/// against its one-pass scan.
pub(super) fn set_over_scan(rows: &mut [RestartRow]) {
    let Some(scan) = rows
        .iter()
        .find(|r| r.kind == RestartContender::ScanOnce)
        .map(|r| r.total_wall_ms.median)
    else {
        return;
    };
    for r in rows.iter_mut().filter(|r| r.kind.is_walfetch()) {
        r.wall_over_scan = Some(r.total_wall_ms.median / scan.max(1e-9));
    }
}
