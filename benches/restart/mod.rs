//! The "restart" scenario: a database node restarts and recovers all its
//! regions at once, each from its own checkpoint.
//!
//! Every region of the workload is recovered from a seeded checkpoint
//! (a fraction of its partition's log drawn uniformly, the same fractions
//! for every layout), on the workload's own partition and on a topic of
//! four partitions (by default; `--partitions` lists others), the regions
//! split over them (region `r` on partition `(r - 1) % N`), each partition
//! written by its own [`WalWriter`] with its own index: the workload's
//! batches, each split by partition, so a partition's batches close when
//! the workload's do.
//!
//! The contenders, on walfetch's connection layer through the proxy:
//!
//! 1. `walfetch, region by region`: a [`Consumer`] per region, one after
//!    another, with the writer's hints;
//! 2. `estimate, region by region`: the same with GreptimeDB's estimate
//!    strategy and offsets only;
//! 3. `estimate, 16 regions at a time`: the same, [`GREPTIMEDB_PARALLELISM`]
//!    regions at a time, as GreptimeDB opens its regions on restart;
//! 4. `scan, one pass`: a [`Recovery`] with [`StrategyKind::Scan`], which
//!    reads each partition once from the lowest checkpoint and splits the
//!    records by the region rule;
//! 5. `walfetch, one pass`: a [`Recovery`] with the index and its hints
//!    (and the same planning the fewest bytes).
//!
//! Every region must get exactly its written entries from its checkpoint
//! on, in offset order (checked record by record); a wrong contender fails
//! the bench. The floor is the bench's floor (`floor.rs`) over the union of
//! the regions' wanted records, partition by partition, summed.
//!
//! [`WalWriter`]: walfetch::writer::WalWriter

mod contender;
mod row;
mod run;
mod targets;
mod written;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use walfetch::cluster::Cluster;
use walfetch::plan::PlanConfig;

use crate::floor::{self, LogLayout};
use crate::proxy::Proxy;
use crate::report::Conditions;
use crate::workload::{PlannedBatch, WorkloadSpec, Written};

pub(crate) use contender::RestartContender;
use row::set_over_scan;
pub(crate) use row::RestartRow;
use run::*;
pub(crate) use targets::{check_targets, markdown, slower_than_scan};
pub(crate) use written::Restart;
use written::*;

/// The layouts a restart runs on by default: partitions the regions are
/// split over (`--partitions` chooses others).
pub(crate) const LAYOUTS: [usize; 2] = [1, 4];

/// How many regions GreptimeDB opens, and so replays, at once when a
/// datanode starts: its `init_regions_parallelism` option, 16 by default
/// (GreptimeDB's `config/config.md`; `open_all_regions` in its datanode
/// takes it). Each region replays its WAL with its own consumer.
pub(crate) const GREPTIMEDB_PARALLELISM: usize = 16;

/// A contender stops being measured once its measured runs took this long
/// together (after one run at least, at most the bench's `--runs`): a
/// region-by-region restart takes seconds, 64 replays per run, and runs of
/// that length vary little, while the one-pass contenders take
/// milliseconds and get every run. Only the one-pass contenders get an
/// unmeasured warm-up run; a region-by-region run warms the caches with
/// its first replays.
const RUN_BUDGET: Duration = Duration::from_secs(8);

/// How a bench of the restart runs.
pub(crate) struct Setup<'a> {
    /// The broker's name in the tables.
    pub(crate) broker: &'a str,
    pub(crate) cluster: &'a Arc<Cluster>,
    pub(crate) proxy: &'a Proxy,
    pub(crate) plan: PlanConfig,
    /// Measured runs, and unmeasured (but checked) runs before them.
    pub(crate) runs: usize,
    pub(crate) warmups: usize,
    pub(crate) seed: u64,
    /// The partition counts the regions are split over, one restart each.
    pub(crate) partitions: &'a [usize],
    /// walfetch recovers with an index of offsets only (GreptimeDB's),
    /// not the writer's hints.
    pub(crate) offsets_only: bool,
}

/// The workload as the bench wrote it to its one-partition topic.
pub(crate) struct Workload<'a> {
    pub(crate) spec: &'a WorkloadSpec,
    pub(crate) planned: &'a [PlannedBatch],
    pub(crate) topic: &'a str,
    pub(crate) written: &'a Written,
    pub(crate) layout: &'a LogLayout,
}

/// Lays out the restart of `workload` on every layout of `setup`: the
/// workload's own partition, or a new topic written over more; adds a
/// line per dataset written. Each is run by [`bench`], once per link.
pub(crate) async fn prepare(
    setup: &Setup<'_>,
    workload: &Workload<'_>,
    datasets: &mut Vec<String>,
) -> Result<Vec<Restart>, String> {
    let name = setup.broker;
    let spec = workload.spec;
    let fractions = checkpoints(spec.regions, setup.seed);
    let mut restarts = Vec::with_capacity(setup.partitions.len());
    for &partitions in setup.partitions {
        let t = Instant::now();
        let restart = if partitions == 1 {
            let part = part(workload.topic, 0, workload.written, workload.layout.clone())?;
            restart(vec![part], &[workload.written], &fractions)?
        } else {
            let topic = format!("{}-{partitions}p", workload.topic);
            let (parts, written) =
                write_partitioned(setup.cluster, &topic, spec, workload.planned, partitions)
                    .await
                    .map_err(|e| format!("{name}: {e}"))?;
            let info = format!(
                "{name}, {}: over {partitions} partitions ({topic}), one writer each: {} batches, {:.1} MiB on the broker; written in {:.1} s",
                spec.name,
                parts.iter().map(|p| p.layout.batches.len()).sum::<usize>(),
                parts.iter().map(|p| p.layout.bytes()).sum::<usize>() as f64 / 1048576.0,
                t.elapsed().as_secs_f64()
            );
            eprintln!("{info}");
            datasets.push(info);
            let written: Vec<&Written> = written.iter().collect();
            restart(parts, &written, &fractions)?
        };
        restarts.push(restart);
    }
    Ok(restarts)
}

/// Runs each of `restarts` (of `spec`, from [`prepare`]) over
/// `conditions`, the link the proxy stands for now; adds a row per
/// restart and contender.
pub(crate) async fn bench(
    setup: &Setup<'_>,
    spec: &WorkloadSpec,
    restarts: &[Restart],
    conditions: Conditions,
    rows: &mut Vec<RestartRow>,
) -> Result<(), String> {
    let name = setup.broker;
    for restart in restarts {
        let partitions = restart.parts.len();
        let t = Instant::now();
        let mut results: BTreeMap<RestartContender, Vec<RestartRun>> = BTreeMap::new();
        let all = RestartContender::ALL;
        let context = |c: RestartContender| {
            format!(
                "{name} {} ({}) restart over {partitions} partition(s), {}",
                spec.name,
                conditions.label(),
                c.name()
            )
        };
        for round in 0..setup.warmups + setup.runs {
            for k in 0..all.len() {
                // Rotate the order so no contender always runs first.
                let c = all[(k + round) % all.len()];
                let measured = results.get(&c).map_or(&[][..], Vec::as_slice);
                let spent: Duration = measured.iter().map(|r| r.total).sum();
                let warmup = round < setup.warmups;
                if (warmup && !c.one_pass()) || (!measured.is_empty() && spent >= RUN_BUDGET) {
                    continue;
                }
                let result = run(c, setup, restart)
                    .await
                    .map_err(|e| format!("{}: {e}", context(c)))?;
                // Records only: one response may carry several partitions,
                // so the per-fetch framing of a one-partition floor does not
                // add up over partitions.
                floor::check_above(&context(c), result.wire_bytes, restart.floor_bytes(name))?;
                if !warmup {
                    results.entry(c).or_default().push(result);
                }
            }
        }
        let mut new_rows: Vec<RestartRow> = all
            .iter()
            .map(|&c| {
                RestartRow::new(
                    name,
                    conditions,
                    &spec.name,
                    restart,
                    c,
                    &results[&c],
                    setup.offsets_only,
                )
            })
            .collect();
        set_over_scan(&mut new_rows);
        let Some(one) = new_rows
            .iter()
            .find(|r| r.kind == RestartContender::OnePass)
        else {
            return Err("no one-pass row".to_owned());
        };
        eprintln!(
            "  {} restart, {partitions} partition(s), {}: {} regions, {} entries, union floor {} B; one pass {:.3}x floor, {:.0} ms ({:.3}x the scan's); {:.1} s",
            spec.name,
            conditions.label(),
            restart.wishes.len(),
            restart.entries(),
            restart.floor_bytes(name),
            one.amp_floor,
            one.total_wall_ms.median,
            one.wall_over_scan.unwrap_or(f64::NAN),
            t.elapsed().as_secs_f64()
        );
        rows.extend(new_rows);
    }
    Ok(())
}
