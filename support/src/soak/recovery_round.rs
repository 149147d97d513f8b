//! A recovery round: faults queued, one, several or every partition's regions asked for, the recovery run and checked.

use super::checks::*;
use super::common::*;
use super::faults::*;
use super::report::*;
use super::world::*;

/// What a round asked of a recovery.
pub(crate) struct Asked {
    pub(crate) shape: &'static str,
    pub(crate) checkpoints: BTreeMap<(i32, RegionId), i64>,
    pub(crate) cap: u64,
    pub(crate) options: ReplayOptions,
}

pub(crate) fn ask(rng: &mut StdRng, world: &World) -> Asked {
    let mut checkpoints = BTreeMap::new();
    // Regions that wrote nothing in a partition are not asked for: a
    // recovery refuses a region its index does not list.
    let mut pick = |p: i32, region: RegionId, rng: &mut StdRng| {
        let Some(entries) = world.written[&p].get(&region) else {
            return;
        };
        let i = rng.random_range(0..=entries.len());
        let from = entries.get(i).map_or(0, |(o, _)| *o);
        checkpoints.insert((p, region), from);
    };
    let shape = match rng.random_range(0..3) {
        0 => {
            let p = rng.random_range(0..PARTITIONS);
            let region = region_of(p, rng.random_range(0..REGIONS_PER_PARTITION));
            pick(p, region, rng);
            "single_region"
        }
        1 => {
            let p = rng.random_range(0..PARTITIONS);
            for k in 0..REGIONS_PER_PARTITION {
                if rng.random_bool(0.6) {
                    pick(p, region_of(p, k), rng);
                }
            }
            pick(p, region_of(p, 0), rng);
            "multi_region_one_partition"
        }
        _ => {
            for p in 0..PARTITIONS {
                for k in 0..REGIONS_PER_PARTITION {
                    if rng.random_bool(0.7) {
                        pick(p, region_of(p, k), rng);
                    }
                }
            }
            "multi_region_multi_partition"
        }
    };
    if checkpoints.is_empty() {
        // Every region picked wrote nothing: ask for one that wrote.
        if let Some((p, region)) = world
            .written
            .iter()
            .find_map(|(&p, regions)| regions.keys().next().map(|&r| (p, r)))
        {
            checkpoints.insert((p, region), 0);
        }
    }
    let cap = [16u64 << 10, 64 << 10, 256 << 10, 4 << 20][rng.random_range(0..4)];
    let plan = PlanConfig {
        max_fetch_bytes: MAX_FETCH_BYTES,
        ..PlanConfig::default()
    };
    let on_lost = if rng.random_bool(0.3) {
        LostPolicy::Skip
    } else {
        LostPolicy::Error
    };
    let options = ReplayOptions::default()
        .with_on_lost(on_lost)
        .with_plan(plan)
        .with_max_buffered_bytes(cap)
        .with_max_in_flight(rng.random_range(1..=6));
    Asked {
        shape,
        checkpoints,
        cap,
        options,
    }
}

/// What a recovery yielded, per partition and region, and how it ended.
pub(crate) struct Outcome {
    pub(crate) got: Written,
    pub(crate) result: Result<ReplayStats, Error>,
    /// Entries yielded for a region not asked for.
    pub(crate) foreign: Vec<String>,
}

pub(crate) async fn run_recovery(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
    options: ReplayOptions,
) -> Outcome {
    let mut got = Written::new();
    let mut foreign = Vec::new();
    for &(p, region) in checkpoints.keys() {
        got.entry(p).or_default().entry(region).or_default();
    }
    // The writer's rule, the default for its indexes.
    let rule = options
        .region_rule
        .clone()
        .unwrap_or(walfetch::index::RegionRule::Key(
            walfetch::index::IdFormat::BigEndian,
        ));
    let mut builder = Recovery::builder(Arc::clone(cluster)).options(options);
    for (p, index) in (0..).zip(indexes) {
        if checkpoints.keys().any(|(q, _)| *q == p) {
            builder = builder.index(topic, p, index);
        }
    }
    for (&(p, region), &from) in checkpoints {
        builder = builder.region(topic, p, region, from);
    }
    let mut recovery = match builder.build().await {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                got,
                result: Err(e),
                foreign,
            }
        }
    };
    let mut result = Ok(());
    while let Some(entry) = recovery.next().await {
        match entry {
            Ok(entry) => {
                let offset = entry.record.offset();
                if rule.region(&entry.record) != Some(entry.region) {
                    foreign.push(format!(
                        "offset {offset} of partition {} tagged region {}",
                        entry.partition, entry.region
                    ));
                }
                let value = entry.record.value_bytes().unwrap_or_default();
                match got
                    .get_mut(&entry.partition)
                    .and_then(|r| r.get_mut(&entry.region))
                {
                    Some(list) => list.push((offset, value)),
                    None => foreign.push(format!(
                        "offset {offset}: region {} of partition {} not asked for",
                        entry.region, entry.partition
                    )),
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let stats = recovery.stats();
    Outcome {
        got,
        result: result.map(|()| stats),
        foreign,
    }
}

/// Queues `faults` and returns a closure-free record of them: kind and
/// times queued.
pub(crate) fn queue(
    world: &World,
    faults: Vec<(&'static str, Fault)>,
) -> Vec<(&'static str, Fault)> {
    for (_, fault) in &faults {
        world.broker.script(fault.clone());
    }
    faults
}

/// Counts the queued faults that fired (queued times minus those still
/// pending; faults are matched by equality of their description).
pub(crate) fn count_fired(
    world: &World,
    queued: &[(&'static str, Fault)],
    report: &mut SoakReport,
) -> u64 {
    let mut pending = world.broker.pending_faults();
    let mut fired_total = 0;
    for (kind, fault) in queued {
        let times = fault.remaining();
        let left = pending
            .iter()
            .position(|p| same(p, fault))
            .map_or(0, |i| pending.remove(i).remaining());
        let fired = u64::from(times.saturating_sub(left));
        SoakReport::count(&mut report.faults, *kind, fired);
        SoakReport::count(&mut report.unfired, *kind, u64::from(left.min(times)));
        fired_total += fired;
    }
    fired_total
}

/// Whether `pending` is what is left of `queued`.
pub(crate) fn same(pending: &Fault, queued: &Fault) -> bool {
    let strip = |f: &Fault| {
        let d = format!("{f:?}");
        // The description without the remaining count.
        d.split("remaining").next().unwrap_or_default().to_owned()
    };
    strip(pending) == strip(queued)
}

pub(crate) async fn replay_round(
    rng: &mut StdRng,
    world: &mut World,
    report: &mut SoakReport,
) -> u64 {
    // Other brokers' habits, now and then.
    let mut habits_fired = Vec::new();
    if rng.random_bool(0.15) {
        let node = rng.random_range(1..=BROKERS);
        let (kind, habits) = match rng.random_range(0..3) {
            0 => ("habit_tansu", Habits::TANSU_0_6),
            1 => ("habit_omits_partitions", Habits::OMITS_WHEN_HURRIED),
            _ => (
                "habit_tansu_omitting",
                Habits {
                    omit_below_wait_ms: 30,
                    ..Habits::TANSU_0_6
                },
            ),
        };
        let _ = world.broker.set_habits(node, habits);
        habits_fired.push(kind);
    }
    // Retention removes the head of a partition, now and then: before the
    // recovery starts, or while it runs.
    let mut retention = None;
    if rng.random_bool(0.06) {
        let p = rng.random_range(0..PARTITIONS);
        let hw = world.broker.high_watermark(TOPIC, p).unwrap_or(0);
        let log = world.broker.log(TOPIC, p).expect("log");
        // At a batch boundary, as retention deletes whole segments.
        let bases: Vec<i64> = log.extents().iter().map(|e| e.base_offset).collect();
        let at = bases
            .get(rng.random_range(0..bases.len().max(1)))
            .copied()
            .unwrap_or(0)
            .min(hw);
        if at > 0 {
            let during = rng.random_bool(0.5).then(|| rng.random_range(0..30u64));
            retention = Some((p, at, during));
            world.log_start.insert(p, at);
        }
    }
    if let Some((p, at, None)) = retention {
        let _ = world.broker.advance_log_start(TOPIC, p, at);
        SoakReport::count(&mut report.faults, "retention_before_recovery", 1);
    }
    let n = rng.random_range(1..=8);
    let faults: Vec<_> = (0..n).map(|_| replay_fault(rng, world)).collect();
    let corrupting = faults
        .iter()
        .any(|(k, _)| matches!(*k, "corrupt_batch" | "absurd_count" | "absurd_length"));
    // Faults that may end a recovery with an error: the others (and the
    // habits) must not.
    let may_fail =
        corrupting || !world.log_start.is_empty() || faults.iter().any(|(k, f)| {
            matches!(*k, "fatal_error" | "response_error")
                || matches!(f.action(), FaultAction::Delay(d) if *d >= Duration::from_millis(500))
        });
    let queued = queue(world, faults);
    let asked = ask(rng, world);
    let recovery = run_recovery(
        &world.cluster,
        TOPIC,
        &world.indexes,
        &asked.checkpoints,
        asked.options.clone(),
    );
    let outcome = match retention {
        Some((p, at, Some(after_ms))) => {
            let broker = &world.broker;
            let retain = async {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                let _ = broker.advance_log_start(TOPIC, p, at);
            };
            SoakReport::count(&mut report.faults, "retention_during_recovery", 1);
            futures::join!(recovery, retain).0
        }
        _ => recovery.await,
    };
    let fired = count_fired(world, &queued, report);
    for kind in &habits_fired {
        SoakReport::count(&mut report.faults, *kind, 1);
    }
    SoakReport::count(&mut report.replays, asked.shape, 1);
    let round = report.rounds;
    let detail = format!(
        "retention {retention:?}, {:?}, cap {}, faults {:?}, stats lost {:?}, result {}",
        asked.options.on_lost,
        asked.cap,
        queued.iter().map(|(_, f)| f).collect::<Vec<_>>(),
        outcome
            .result
            .as_ref()
            .map(|s| s.lost.clone())
            .unwrap_or_default(),
        outcome
            .result
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    let before = report.violations.len();
    check_recovery(
        world,
        &asked,
        &outcome,
        (corrupting, may_fail),
        round,
        report,
    );
    if report.violations.len() > before {
        report.violations.push(format!("round {round}: {detail}"));
    }
    fired + habits_fired.len() as u64
}
