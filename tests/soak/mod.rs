//! A seeded, randomized fault soak against the scripted broker.
//!
//! Rounds, each on a small world (a scripted cluster of three brokers, a
//! WAL topic of three partitions written by one [`WalWriter`] per
//! partition, their indexes): random faults are queued (connection cuts
//! before, during and after a response, partial and oversized frames,
//! leader moves, slow and throttled responses, retriable and fatal error
//! codes, corrupt and truncated batches, absurd array counts and lengths),
//! brokers may take on other brokers' habits (Tansu's, omitting partitions
//! of hurried fetches), retention may drop the log's head, and then one of:
//!
//! - a recovery of one region,
//! - a recovery of several regions of one partition,
//! - a recovery of several regions of every partition,
//! - a WAL writer producing a batch of entries to a topic of its own, then
//!   a fault-free recovery of what it wrote with its index.
//!
//! The invariant, checked entry by entry: a recovery that ends well gave
//! every region exactly its entries from its checkpoint, in order; one that
//! fails gave each region a prefix of them, and its error is one the
//! round's faults explain (offsets reported lost were really removed; a
//! decode error only after a corrupting fault); never an entry twice,
//! never one of another region, never a hang. The replay core's reported
//! peak of buffered bytes stays within the cap (plus the one fetch per
//! partition the cap allows past it). A writer's acknowledged entries are
//! all in the log at their offsets and all recovered; nothing it did not
//! write is recovered, nothing twice; an entry it reported failed is not
//! in the log unless its error says it may be.
//!
//! Memory is measured two ways: the replay core's own account
//! ([`ReplayStats::peak_buffered_bytes`]: buffered records plus the limits
//! of fetches in flight), checked against the cap; and the process's peak
//! resident set (`VmHWM` of `/proc/self/status`, reset before each round
//! through `/proc/self/clear_refs`), reported as growth over the level
//! before the round. The latter counts everything in the process (the
//! scripted broker's logs and response frames too) and is only a sanity
//! bound against runaway allocations.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::json;
use walfetch::cluster::{ClientError, Cluster, ClusterConfig, FetchParams, RetryPolicy};
use walfetch::codec::{Batches, Compression, DecodeOptions};
use walfetch::consumer::{LostPolicy, Recovery, ReplayOptions, ReplayStats};
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};
use walfetch::plan::PlanConfig;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

const TOPIC: &str = "wal";
const PARTITIONS: i32 = 3;
const BROKERS: i32 = 3;
const REGIONS_PER_PARTITION: u64 = 8;
/// The largest fetch the soak's recoveries plan.
const MAX_FETCH_BYTES: u32 = 64 << 10;
/// The writers' batch size (a batch may come whole past a fetch's limit).
const MAX_BATCH_BYTES: usize = 8 << 10;
/// A round that takes longer than this hangs.
const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// What the soak runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SoakConfig {
    /// Seeds every random choice.
    pub(crate) seed: u64,
    /// Stop once at least this many faults fired.
    pub(crate) faults: u64,
    /// Entries per partition of each world.
    pub(crate) entries_per_partition: usize,
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
pub(crate) struct SoakReport {
    /// The seed.
    pub(crate) seed: u64,
    /// Rounds run.
    pub(crate) rounds: u64,
    /// Faults that fired, by kind.
    pub(crate) faults: BTreeMap<String, u64>,
    /// Faults queued that never fired (the round ended first), by kind.
    pub(crate) unfired: BTreeMap<String, u64>,
    /// Recoveries run, by shape.
    pub(crate) replays: BTreeMap<String, u64>,
    /// Entries checked against what was written.
    pub(crate) entries_checked: u64,
    /// Recoveries and writes that ended in an error, by kind.
    pub(crate) errors: BTreeMap<String, u64>,
    /// Entries produced by the writers, acknowledged and failed.
    pub(crate) produced_acked: u64,
    /// Entries whose append failed.
    pub(crate) produced_failed: u64,
    /// Of those, entries found in the log all the same (the broker appended
    /// them, the answer was lost: their errors say they may be written).
    pub(crate) produced_failed_but_written: u64,
    /// Recoveries under `LostPolicy::Skip` that ended well after skipping
    /// entries retention removed (listed in their stats).
    pub(crate) ended_well_skipping_lost: u64,
    /// Omitted partitions the recoveries counted.
    pub(crate) omitted: u64,
    /// The highest `peak_buffered_bytes` a recovery reported.
    pub(crate) peak_buffered_bytes: u64,
    /// The highest ratio of `peak_buffered_bytes` to the recovery's cap.
    pub(crate) peak_buffered_over_cap: f64,
    /// The largest growth of the peak resident set over a round's start.
    pub(crate) peak_rss_growth_bytes: u64,
    /// Invariant violations (the soak fails if any).
    pub(crate) violations: Vec<String>,
    /// Wall time.
    pub(crate) elapsed: Duration,
}

impl SoakReport {
    /// Faults that fired, all kinds.
    pub(crate) fn faults_fired(&self) -> u64 {
        self.faults.values().sum()
    }

    /// The report as one JSON object.
    pub(crate) fn to_json(&self) -> serde_json::Value {
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

    fn count(map: &mut BTreeMap<String, u64>, key: impl Into<String>, n: u64) {
        *map.entry(key.into()).or_default() += n;
    }
}

#[path = "../support/recovery.rs"]
#[allow(dead_code)]
mod recovery;

use recovery::{dumped_at, write_partition, Written};

/// One world: the cluster, a client, what was written and the indexes.
struct World {
    broker: ScriptedCluster,
    cluster: Arc<Cluster>,
    written: Written,
    indexes: Vec<WalIndex>,
    /// Offsets below which retention removed the log, per partition.
    log_start: BTreeMap<i32, i64>,
    /// Whether Fetch responses have the v11 layout `PatchFrame` faults
    /// aim at.
    fetch_v11: bool,
    produce_topics: u32,
}

fn client_config(bootstrap: String) -> ClusterConfig {
    let mut config = ClusterConfig::new([bootstrap]);
    config.retry = RetryPolicy {
        initial_backoff: Duration::from_millis(2),
        max_backoff: Duration::from_millis(40),
        multiplier: 2.0,
        jitter: 0.5,
        deadline: Duration::from_secs(4),
    };
    config.connection.connect_timeout = Duration::from_secs(2);
    config.connection.request_timeout = Duration::from_millis(800);
    config
}

async fn new_world(rng: &mut StdRng, entries: usize) -> World {
    let broker = ScriptedCluster::start(BROKERS as usize)
        .await
        .expect("scripted cluster");
    broker.create_topic(TOPIC, PARTITIONS).expect("topic");
    let cluster = Arc::new(
        Cluster::connect(client_config(broker.bootstrap()))
            .await
            .expect("connect"),
    );
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut config = WriterConfig::new(TOPIC, p);
        config.max_batch_bytes = MAX_BATCH_BYTES;
        config.compression = if rng.random_bool(0.3) {
            Compression::Lz4
        } else {
            Compression::None
        };
        let drawn: Vec<(RegionId, Bytes)> = (0..entries)
            .map(|n| {
                let k = rng
                    .random_range(0..REGIONS_PER_PARTITION)
                    .min(rng.random_range(0..REGIONS_PER_PARTITION));
                let region = region_of(p, k);
                let pad = rng.random_range(0..300);
                let payload = Bytes::from(format!("p{p} r{region} n{n} {}", "x".repeat(pad)));
                (region, payload)
            })
            .collect();
        let mut index = write_partition(&cluster, config, drawn, &mut written).await;
        let regions = &written[&p];
        // Some worlds' indexes stop halfway: the rest is read by the scan
        // past `last_index`.
        if rng.random_bool(0.3) {
            let last = regions
                .values()
                .flatten()
                .map(|(o, _)| *o)
                .max()
                .unwrap_or(0);
            index = dumped_at(&index, last / 2);
        }
        indexes.push(index);
    }
    let probe = cluster
        .fetch(&FetchParams::new(TOPIC, 0, 0).with_max_bytes(1))
        .await
        .expect("probe");
    World {
        broker,
        cluster,
        written,
        indexes,
        log_start: BTreeMap::new(),
        fetch_v11: probe.version == 11,
        produce_topics: 0,
    }
}

fn region_of(p: i32, k: u64) -> RegionId {
    u64::try_from(p).unwrap_or(0) * 100 + k
}

/// A random fault of the replay side, and its kind.
fn replay_fault(rng: &mut StdRng, world: &World) -> (&'static str, Fault) {
    let api = match rng.random_range(0..20) {
        0..=13 => Some(ApiKey::Fetch),
        14..=15 => Some(ApiKey::ListOffsets),
        16..=17 => Some(ApiKey::Metadata),
        _ => None,
    };
    let mut fault = match api {
        Some(api) => Fault::on(api),
        None => Fault::any(),
    };
    if rng.random_bool(0.5) {
        fault = fault.broker(rng.random_range(1..=BROKERS));
    }
    if rng.random_bool(0.3) {
        fault = fault
            .topic(TOPIC)
            .partition(rng.random_range(0..PARTITIONS));
    }
    fault = fault.times(if rng.random_bool(0.2) { 2 } else { 1 });
    let fetch = api == Some(ApiKey::Fetch);
    let (kind, action) = loop {
        let pick = rng.random_range(0..17);
        let action = match pick {
            0 => ("drop_request", FaultAction::DropRequest),
            1 => ("cut_before_response", FaultAction::CutBeforeResponse),
            2 => {
                let bytes = rng.random_bool(0.7).then(|| rng.random_range(1..120));
                ("cut_mid_frame", FaultAction::CutDuringResponse { bytes })
            }
            3 => ("cut_after_response", FaultAction::CutAfterResponse),
            4 => (
                "partial_frame",
                FaultAction::TruncatedFrame {
                    missing: rng.random_range(1..5000),
                },
            ),
            5 => {
                let lengths = [0x8000_0000, 0xFFFF_FFFF, 0x7FFF_FFFF, 300 << 20];
                let length = lengths[rng.random_range(0..lengths.len())];
                ("oversized_frame", FaultAction::OversizedFrame { length })
            }
            6 => (
                "leader_move",
                FaultAction::MoveLeader {
                    to: rng.random_range(1..=BROKERS),
                },
            ),
            7 => {
                // Now and then slower than the request timeout.
                let ms = if rng.random_bool(0.05) {
                    1000
                } else {
                    rng.random_range(1..80)
                };
                (
                    "slow_response",
                    FaultAction::Delay(Duration::from_millis(ms)),
                )
            }
            8 => (
                "throttled_response",
                FaultAction::Throttle(Duration::from_millis(rng.random_range(1..80))),
            ),
            9 | 10 => {
                // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
                // UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT,
                // NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR,
                // FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH.
                let codes = [6, 5, 3, 7, 19, 56, 74, 75];
                let code = codes[rng.random_range(0..codes.len())];
                ("retriable_error", FaultAction::PartitionError(code))
            }
            11 => {
                // Rare: each ends a recovery. TOPIC_AUTHORIZATION_FAILED,
                // UNSUPPORTED_VERSION, INVALID_REQUEST, UNKNOWN_SERVER_ERROR.
                if !rng.random_bool(0.25) {
                    continue;
                }
                let codes = [29, 35, 42, -1];
                let code = codes[rng.random_range(0..codes.len())];
                ("fatal_error", FaultAction::PartitionError(code))
            }
            12 if fetch => {
                if !rng.random_bool(0.3) {
                    continue;
                }
                ("corrupt_batch", FaultAction::CorruptRecords)
            }
            13 if fetch => (
                "truncated_batch",
                FaultAction::TruncateRecords {
                    keep: rng.random_range(0..400),
                },
            ),
            14 | 15 if fetch && world.fetch_v11 => {
                // Fetch v11, one topic "wal", first partition:
                // 18 responses count, 27 partitions count, 61 aborted
                // transactions count, 22 topic name length (i16),
                // 69 records length, 81 first batch length.
                let (kind, at, bytes): (&'static str, usize, Vec<u8>) = match rng.random_range(0..6)
                {
                    0 => ("absurd_count", 18, 0x7FFF_FFFFu32.to_be_bytes().to_vec()),
                    1 => ("absurd_count", 27, 0x4000_0000u32.to_be_bytes().to_vec()),
                    2 => ("absurd_count", 61, 0x7FFF_FFF0u32.to_be_bytes().to_vec()),
                    3 => ("absurd_length", 22, 0x7FFFu16.to_be_bytes().to_vec()),
                    4 => ("absurd_length", 69, 0x7FFF_FFFFu32.to_be_bytes().to_vec()),
                    _ => ("absurd_length", 81, 0x7FFF_FF00u32.to_be_bytes().to_vec()),
                };
                (kind, FaultAction::PatchFrame { at, bytes })
            }
            16 => (
                "response_error",
                FaultAction::ResponseError(if rng.random_bool(0.5) { 6 } else { 70 }),
            ),
            _ => continue,
        };
        break action;
    };
    (kind, fault.then(action))
}

/// A random fault for a writer's Produce requests, and its kind.
fn produce_fault(rng: &mut StdRng) -> (&'static str, Fault) {
    let fault = Fault::on(ApiKey::Produce);
    let (kind, action) = match rng.random_range(0..9) {
        0 => ("produce_drop_request", FaultAction::DropRequest),
        1 => (
            "produce_cut_before_response",
            FaultAction::CutBeforeResponse,
        ),
        2 => (
            "produce_cut_mid_frame",
            FaultAction::CutDuringResponse {
                bytes: Some(rng.random_range(1..30)),
            },
        ),
        3 => (
            "produce_leader_move",
            FaultAction::MoveLeader {
                to: rng.random_range(1..=BROKERS),
            },
        ),
        4 => (
            "produce_slow_response",
            FaultAction::Delay(Duration::from_millis(rng.random_range(1..60))),
        ),
        5 | 6 => {
            // NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (not appended),
            // REQUEST_TIMED_OUT (may be appended: not retried).
            let codes = [6, 19, 7];
            let code = codes[rng.random_range(0..codes.len())];
            ("produce_error", FaultAction::PartitionError(code))
        }
        7 => {
            // Refused for good: INVALID_RECORD (the batch fails, the
            // producer's sequence taken back), MESSAGE_TOO_LARGE (a batch
            // of several entries split and sent again).
            let codes = [87, 10];
            let code = codes[rng.random_range(0..codes.len())];
            ("produce_refused", FaultAction::PartitionError(code))
        }
        _ => (
            "produce_partial_frame",
            FaultAction::TruncatedFrame {
                missing: rng.random_range(1..100),
            },
        ),
    };
    (kind, fault.then(action))
}

/// Kind of a replay or write error, for the counts.
fn error_kind(error: &Error) -> String {
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

fn client_kind(error: &ClientError) -> String {
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
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident set to the current one (Linux 4.0+).
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// What a round asked of a recovery.
struct Asked {
    shape: &'static str,
    checkpoints: BTreeMap<(i32, RegionId), i64>,
    cap: u64,
    options: ReplayOptions,
}

fn ask(rng: &mut StdRng, world: &World) -> Asked {
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
struct Outcome {
    got: Written,
    result: Result<ReplayStats, Error>,
    /// Entries yielded for a region not asked for.
    foreign: Vec<String>,
}

async fn run_recovery(
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

/// Runs the soak; the report (whose `violations` must be empty).
pub(crate) async fn run(config: SoakConfig) -> SoakReport {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut report = SoakReport {
        seed: config.seed,
        ..SoakReport::default()
    };
    let mut world = new_world(&mut rng, config.entries_per_partition).await;
    let mut world_rounds = 0;
    while report.faults_fired() < config.faults {
        if world_rounds >= 30 || !world.log_start.is_empty() {
            world = new_world(&mut rng, config.entries_per_partition).await;
            world_rounds = 0;
        }
        world_rounds += 1;
        report.rounds += 1;
        let round = report.rounds;
        reset_peak_rss();
        let rss_before = peak_rss();
        let produce = rng.random_bool(0.15);
        let fired = tokio::time::timeout(ROUND_TIMEOUT, async {
            if produce {
                produce_round(&mut rng, &mut world, &mut report).await
            } else {
                replay_round(&mut rng, &mut world, &mut report).await
            }
        })
        .await;
        if fired.is_err() {
            report
                .violations
                .push(format!("round {round}: no end within {ROUND_TIMEOUT:?}"));
        }
        // What did not fire is not counted; the world goes back to
        // Kafka's rules.
        world.broker.clear_faults();
        for node in world.broker.node_ids() {
            let _ = world.broker.set_habits(node, Habits::KAFKA);
        }
        if let (Some(before), Some(after)) = (rss_before, peak_rss()) {
            report.peak_rss_growth_bytes = report
                .peak_rss_growth_bytes
                .max(after.saturating_sub(before));
        }
        if report.violations.len() > 20 {
            break;
        }
    }
    report.elapsed = started.elapsed();
    report
}

/// Queues `faults` and returns a closure-free record of them: kind and
/// times queued.
fn queue(world: &World, faults: Vec<(&'static str, Fault)>) -> Vec<(&'static str, Fault)> {
    for (_, fault) in &faults {
        world.broker.script(fault.clone());
    }
    faults
}

/// Counts the queued faults that fired (queued times minus those still
/// pending; faults are matched by equality of their description).
fn count_fired(world: &World, queued: &[(&'static str, Fault)], report: &mut SoakReport) -> u64 {
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
fn same(pending: &Fault, queued: &Fault) -> bool {
    let strip = |f: &Fault| {
        let d = format!("{f:?}");
        // The description without the remaining count.
        d.split("remaining").next().unwrap_or_default().to_owned()
    };
    strip(pending) == strip(queued)
}

async fn replay_round(rng: &mut StdRng, world: &mut World, report: &mut SoakReport) -> u64 {
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

fn check_recovery(
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

fn check_memory(context: &str, asked: &Asked, stats: &ReplayStats, report: &mut SoakReport) {
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

async fn produce_round(rng: &mut StdRng, world: &mut World, report: &mut SoakReport) -> u64 {
    world.produce_topics += 1;
    let topic = format!("produced-{}", world.produce_topics);
    world.broker.create_topic(&topic, 1).expect("topic");
    let n = rng.random_range(1..=6);
    let faults: Vec<_> = (0..n).map(|_| produce_fault(rng)).collect();
    let queued = queue(world, faults);
    let mut config = WriterConfig::new(topic.clone(), 0);
    config.max_batch_bytes = 2 << 10;
    config.linger = Duration::from_millis(1);
    let writer = WalWriter::new(Arc::clone(&world.cluster), config);
    let mut pending = Vec::new();
    let entries = rng.random_range(20..120);
    for n in 0..entries {
        let region = rng.random_range(0..4u64);
        let payload = Bytes::from(format!("{topic} r{region} n{n} {}", "y".repeat(n % 97)));
        match writer.append(WalEntry::new(region, payload.clone())).await {
            Ok(appended) => pending.push((region, payload, appended)),
            Err(e) => {
                SoakReport::count(&mut report.errors, format!("produce.{}", error_kind(&e)), 1)
            }
        }
    }
    let mut acked: BTreeMap<RegionId, Vec<(i64, Bytes)>> = BTreeMap::new();
    // Failed entries, and whether their error says they may be in the log.
    let mut failed: Vec<(Bytes, bool)> = Vec::new();
    for (region, payload, appended) in pending {
        match appended.await {
            Ok(offset) => acked.entry(region).or_default().push((offset, payload)),
            Err(e) => {
                SoakReport::count(&mut report.errors, format!("produce.{}", error_kind(&e)), 1);
                let says = matches!(
                    e,
                    Error::MaybeWritten { .. } | Error::WrittenOffsetUnknown { .. }
                );
                failed.push((payload, says));
            }
        }
    }
    let index = match writer.close().await {
        Ok(index) => index,
        Err(_) => WalIndex::new(),
    };
    let fired = count_fired(world, &queued, report);
    world.broker.clear_faults();
    SoakReport::count(&mut report.replays, "produce_then_recover", 1);
    report.produced_acked += acked.values().map(|v| v.len() as u64).sum::<u64>();
    report.produced_failed += failed.len() as u64;
    let context = format!("round {} (produce, seed {})", report.rounds, report.seed);

    // Every acknowledged entry is in the log, at its offset.
    let log = world.broker.log(&topic, 0).expect("log");
    let mut in_log: BTreeMap<i64, Bytes> = BTreeMap::new();
    for extent in log.extents() {
        let bytes = log.bytes(extent.position..extent.end());
        let decoded = Batches::new(bytes, DecodeOptions::default())
            .collect::<Result<Vec<_>, _>>()
            .and_then(|batches| {
                let mut records = Vec::new();
                for batch in batches {
                    for record in batch.records()? {
                        records.push(record?);
                    }
                }
                Ok(records)
            });
        let Ok(records) = decoded else {
            report
                .violations
                .push(format!("{context}: the log holds an undecodable batch"));
            continue;
        };
        for record in records {
            in_log.insert(record.offset(), record.value_bytes().unwrap_or_default());
        }
    }
    for (region, list) in &acked {
        for (offset, payload) in list {
            if in_log.get(offset) != Some(payload) {
                report.violations.push(format!(
                    "{context}: acknowledged entry of region {region} at {offset} is not in the log"
                ));
            }
        }
    }
    let values: Vec<&Bytes> = in_log.values().collect();
    let distinct: std::collections::BTreeSet<&Bytes> = values.iter().copied().collect();
    if distinct.len() != values.len() {
        report
            .violations
            .push(format!("{context}: an entry was written twice"));
    }
    report.produced_failed_but_written +=
        failed.iter().filter(|(p, _)| distinct.contains(p)).count() as u64;
    // An entry reported failed is not in the log, unless its error says it
    // may be: a caller appends it again only when it is not.
    if failed.iter().any(|(p, says)| !says && distinct.contains(p)) {
        report.violations.push(format!(
            "{context}: an entry reported failed is in the log, its error not saying it may be"
        ));
    }

    // A fault-free recovery of every region with the writer's index gets
    // every acknowledged entry, and nothing that was not written.
    // A region the index does not list (every append of it failed) is
    // refused by the recovery, and must have nothing acknowledged.
    let listed: Vec<RegionId> = (0..4u64).filter(|&r| index.region(r).is_some()).collect();
    for r in (0..4u64).filter(|r| !listed.contains(r)) {
        if acked.get(&r).is_some_and(|a| !a.is_empty()) {
            report.violations.push(format!(
                "{context}: region {r} has acknowledged entries but is not in the writer's index"
            ));
        }
    }
    if listed.is_empty() {
        // Nothing was acknowledged (checked above): nothing to recover.
        return fired;
    }
    let checkpoints: BTreeMap<(i32, RegionId), i64> = listed.iter().map(|&r| ((0, r), 0)).collect();
    let outcome = run_recovery(
        &world.cluster,
        &topic,
        std::slice::from_ref(&index),
        &checkpoints,
        ReplayOptions::default(),
    )
    .await;
    for f in &outcome.foreign {
        report.violations.push(format!("{context}: {f}"));
    }
    match &outcome.result {
        Err(e) => report
            .violations
            .push(format!("{context}: recovering what the writer wrote: {e}")),
        Ok(_) => {
            for &r in &listed {
                let got = &outcome.got[&0][&r];
                report.entries_checked += got.len() as u64;
                let want = acked.get(&r).cloned().unwrap_or_default();
                // The log may also hold entries whose append failed (the
                // answer was lost after the broker appended them): they
                // are past the index's `last_index` or not indexed.
                let got_acked: Vec<(i64, Bytes)> = got
                    .iter()
                    .filter(|(o, _)| want.iter().any(|(w, _)| w == o))
                    .cloned()
                    .collect();
                if got_acked != want {
                    report.violations.push(format!(
                        "{context}: region {r}: recovered {} of its {} acknowledged entries",
                        got_acked.len(),
                        want.len()
                    ));
                }
                let offsets: Vec<i64> = got.iter().map(|(o, _)| *o).collect();
                if offsets.windows(2).any(|w| w[0] >= w[1]) {
                    report
                        .violations
                        .push(format!("{context}: region {r}: out of order or repeated"));
                }
                for (o, v) in got {
                    if in_log.get(o) != Some(v) {
                        report
                            .violations
                            .push(format!("{context}: region {r}: offset {o} not as written"));
                    }
                }
            }
        }
    }
    fired
}
