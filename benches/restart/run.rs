//! One recovery of every region by one contender, region by region or in one
//! pass, and what it cost.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use walfetch::cluster::Cluster;
use walfetch::consumer::{
    Consumer, Recovery, ReplayOptions, ReplayRange, ReplayStats, StrategyKind,
};
use walfetch::index::RegionId;

use crate::contenders::Checker;

use super::*;

/// What one recovery of every region did.
#[derive(Debug, Clone)]
pub(super) struct RestartRun {
    pub(super) entries: usize,
    /// Bytes broker → client through the proxy.
    pub(super) wire_bytes: u64,
    /// Bytes client → broker through the proxy.
    pub(super) request_bytes: u64,
    /// The replays' own counters, summed (region by region) or the
    /// recovery's.
    pub(super) stats: ReplayStats,
    /// Until every region was recovered.
    pub(super) total: Duration,
    /// CPU time this process used meanwhile ([`crate::harness::cpu_time`]).
    pub(super) cpu: Option<Duration>,
    /// Each replay's wall time: one per region, or the one pass.
    pub(super) replays: Vec<Duration>,
}

/// Recovers every region of `restart` by `contender` and checks the output.
pub(super) async fn run(
    contender: RestartContender,
    setup: &Setup<'_>,
    restart: &Restart,
) -> Result<RestartRun, String> {
    let (cluster, proxy) = (setup.cluster, setup.proxy);
    let (received, sent) = (proxy.received(), proxy.sent());
    let options = crate::contenders::walfetch_options(
        contender.strategy(),
        setup.plan,
        contender == RestartContender::OnePassFewestBytes,
    );
    let cpu_before = crate::harness::cpu_time();
    let started = Instant::now();
    let mut checkers: Vec<Checker<'_>> = restart
        .wishes
        .iter()
        .map(|w| {
            let end = restart.parts[w.part].end;
            Checker::region(w.region, w.from..end, &w.expected, end, started)
        })
        .collect();
    let (stats, replays) = match contender {
        RestartContender::Regions
        | RestartContender::EstimateRegions
        | RestartContender::EstimateGreptime => {
            let (offsets_only, at_once) = (setup.offsets_only, contender.at_once());
            region_by_region(
                cluster,
                options,
                offsets_only,
                at_once,
                restart,
                &mut checkers,
            )
            .await?
        }
        RestartContender::ScanOnce
        | RestartContender::OnePass
        | RestartContender::OnePassFewestBytes => {
            let stats =
                one_pass(cluster, options, setup.offsets_only, restart, &mut checkers).await?;
            (stats, vec![started.elapsed()])
        }
    };
    let total = started.elapsed();
    let cpu = crate::harness::cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let mut entries = 0;
    for (w, checker) in restart.wishes.iter().zip(checkers) {
        entries += checker.finish().map_err(|e| restart.context(w, e))?.0;
    }
    let run = RestartRun {
        entries,
        wire_bytes: proxy.received() - received,
        request_bytes: proxy.sent() - sent,
        stats,
        total,
        cpu,
        replays,
    };
    if run.stats.wire_bytes > run.wire_bytes {
        return Err(format!(
            "the replays counted {} response bytes, the proxy only {}",
            run.stats.wire_bytes, run.wire_bytes
        ));
    }
    let (_, own_bytes) = restart.own_records();
    if run.stats.yielded_bytes != own_bytes {
        return Err(format!(
            "the replays count {} bytes of records yielded, the regions' own records in the broker's batches are {own_bytes} bytes",
            run.stats.yielded_bytes
        ));
    }
    Ok(run)
}

/// One [`Consumer`] per region, `at_once` of them at a time (1: one after
/// another), in the order of the regions; walfetch's with an index of
/// offsets only if `offsets_only`. Each replay's wall time is its own.
pub(super) async fn region_by_region(
    cluster: &Arc<Cluster>,
    options: ReplayOptions,
    offsets_only: bool,
    at_once: usize,
    restart: &Restart,
    checkers: &mut [Checker<'_>],
) -> Result<(ReplayStats, Vec<Duration>), String> {
    let replays = restart
        .wishes
        .iter()
        .zip(checkers.iter_mut())
        .map(|(w, checker)| {
            let options = options.clone();
            async move {
                let part = &restart.parts[w.part];
                let index = match options.strategy {
                    StrategyKind::Index => part.walfetch_index(offsets_only),
                    _ => &part.offsets_only,
                };
                let range = ReplayRange {
                    topic: part.topic.clone(),
                    partition: part.partition,
                    region: w.region,
                    from: w.from,
                    to: Some(part.end),
                };
                let t = Instant::now();
                let mut consumer = Consumer::new(Arc::clone(cluster), index, range, options)
                    .await
                    .map_err(|e| restart.context(w, format!("consumer: {e}")))?;
                while let Some(record) = consumer.next().await {
                    let record = record.map_err(|e| restart.context(w, format!("replay: {e}")))?;
                    checker
                        .walfetch_record(&record)
                        .map_err(|e| restart.context(w, e))?;
                }
                Ok::<_, String>((consumer.stats(), t.elapsed()))
            }
        });
    let mut replays = futures::stream::iter(replays).buffer_unordered(at_once.max(1));
    let mut stats = ReplayStats::default();
    let mut times = Vec::with_capacity(restart.wishes.len());
    while let Some(replay) = replays.next().await {
        let (replay_stats, time) = replay?;
        stats.add(&replay_stats);
        times.push(time);
    }
    Ok((stats, times))
}

/// One [`Recovery`] of every region; with an index of offsets only if
/// `offsets_only`.
pub(super) async fn one_pass(
    cluster: &Arc<Cluster>,
    options: ReplayOptions,
    offsets_only: bool,
    restart: &Restart,
    checkers: &mut [Checker<'_>],
) -> Result<ReplayStats, String> {
    let strategy = options.strategy;
    let mut builder = Recovery::builder(Arc::clone(cluster)).options(options);
    // A scan needs no index.
    if strategy == StrategyKind::Index {
        for part in &restart.parts {
            let index = part.walfetch_index(offsets_only);
            builder = builder.index(part.topic.clone(), part.partition, index);
        }
    }
    for w in &restart.wishes {
        let part = &restart.parts[w.part];
        builder = builder.region_until(
            part.topic.clone(),
            part.partition,
            w.region,
            w.from,
            Some(part.end),
        );
    }
    let mut recovery = builder
        .build()
        .await
        .map_err(|e| format!("recovery: {e}"))?;
    let slot: HashMap<RegionId, usize> = restart
        .wishes
        .iter()
        .enumerate()
        .map(|(i, w)| (w.region, i))
        .collect();
    let mut last: Vec<Option<i64>> = vec![None; restart.parts.len()];
    while let Some(entry) = recovery.next().await {
        let entry = entry.map_err(|e| format!("recovery: {e}"))?;
        let offset = entry.record.offset();
        let Some(&i) = slot.get(&entry.region) else {
            return Err(format!(
                "recovery: offset {offset} of {}/{} yielded for region {}, which was not asked for",
                entry.topic, entry.partition, entry.region
            ));
        };
        let w = &restart.wishes[i];
        let part = &restart.parts[w.part];
        if *entry.topic != *part.topic || entry.partition != part.partition {
            return Err(restart.context(
                w,
                format!(
                    "offset {offset} yielded from {}/{}",
                    entry.topic, entry.partition
                ),
            ));
        }
        if let Some(l) = last[w.part].filter(|&l| offset <= l) {
            return Err(format!(
                "recovery: {}/{} yielded offset {offset} after {l}: not in offset order",
                part.topic, part.partition
            ));
        }
        last[w.part] = Some(offset);
        checkers[i]
            .walfetch_record(&entry.record)
            .map_err(|e| restart.context(w, e))?;
    }
    let stats = recovery.stats();
    for w in &restart.wishes {
        let got = stats
            .regions
            .get(&w.region)
            .map_or(0, |r| r.entries + r.tail_records);
        if got != w.expected.len() as u64 {
            return Err(restart.context(
                w,
                format!("the recovery's stats count {got} records yielded"),
            ));
        }
    }
    Ok(stats)
}
