//! Recovering many regions: what was written, checkpoints, the index as a
//! writer would have dumped it, and a recovery checked entry by entry.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::Cluster;
use walfetch::consumer::{Recovery, ReplayOptions, ReplayRange, ReplayStats};
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::{WalEntry, WriterConfig};

use crate::writers::{write_rounds, Round};

/// What was written: per partition, per region, `(offset, value)`.
pub type Written = BTreeMap<i32, BTreeMap<RegionId, Vec<(i64, Bytes)>>>;

/// `index` as if its writer had dumped it at `cut`: entries up to `cut`,
/// `last_index` there.
pub fn dumped_at(index: &WalIndex, cut: i64) -> WalIndex {
    let mut out = WalIndex::new();
    for (region, entries) in index.regions() {
        for e in entries.entries().iter().filter(|e| e.offset <= cut) {
            out.push(region, *e).unwrap();
        }
    }
    out.set_last_index(cut);
    out
}

/// `region` of partition 0 of `topic`, from offset `from` to the log's
/// end: a replay that stops where the partition did when it started.
pub fn to_the_end(topic: &str, region: RegionId, from: i64) -> ReplayRange {
    ReplayRange {
        topic: topic.into(),
        partition: 0,
        region,
        from,
        to: None,
    }
}

/// A checkpoint per region: somewhere in its entries (or 0).
pub fn checkpoints(written: &Written, seed: u64) -> BTreeMap<(i32, RegionId), i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = BTreeMap::new();
    for (&p, regions) in written {
        for (&region, entries) in regions {
            let i = rng.random_range(0..=entries.len());
            let from = entries.get(i).map_or(0, |(o, _)| *o);
            out.insert((p, region), from);
        }
    }
    out
}

/// What each region must get: its entries from its checkpoint on.
pub fn expected(written: &Written, checkpoints: &BTreeMap<(i32, RegionId), i64>) -> Written {
    let mut out = Written::new();
    for (&(p, region), &from) in checkpoints {
        let entries = written[&p][&region]
            .iter()
            .filter(|(o, _)| *o >= from)
            .cloned()
            .collect();
        out.entry(p).or_default().insert(region, entries);
    }
    out
}

/// Every region of `written` from offset 0: checkpoints for a recovery
/// of everything.
pub fn from_start(written: &Written) -> BTreeMap<(i32, RegionId), i64> {
    written
        .iter()
        .flat_map(|(&p, regions)| regions.keys().map(move |&region| ((p, region), 0)))
        .collect()
}

/// Builds a recovery of every region in `checkpoints` of `topic`, each
/// from its checkpoint, with `indexes` (one per partition, from 0).
pub async fn start_recovery(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
    options: ReplayOptions,
) -> Result<Recovery, Error> {
    let mut builder = Recovery::builder(Arc::clone(cluster)).options(options);
    for (p, index) in (0..).zip(indexes) {
        builder = builder.index(topic, p, index);
    }
    for (&(p, region), &from) in checkpoints {
        builder = builder.region(topic, p, region, from);
    }
    builder.build().await
}

/// Runs `recovery` to its end; how long it took to yield every entry
/// `written` holds of `partition` (its other partitions may take longer).
pub async fn time_to_recover_partition(
    recovery: &mut Recovery,
    written: &Written,
    partition: i32,
) -> std::time::Duration {
    let want: usize = written[&partition].values().map(Vec::len).sum();
    let started = std::time::Instant::now();
    let (mut got, mut done) = (0, None);
    while let Some(entry) = recovery.next().await {
        if entry.unwrap().partition == partition {
            got += 1;
            if got == want {
                done = Some(started.elapsed());
            }
        }
    }
    done.unwrap_or_else(|| panic!("every entry of partition {partition}: {got} of {want}"))
}

/// [`recover`] with the default replay options.
pub async fn recover_with_defaults(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
) -> Result<(Written, ReplayStats), Error> {
    recover(
        cluster,
        topic,
        indexes,
        checkpoints,
        ReplayOptions::default(),
    )
    .await
}

/// Runs a recovery of every region in `checkpoints` of `topic`; what each
/// region got. Every entry must belong to the region it is tagged with, by
/// the options' region rule.
pub async fn recover(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
    options: ReplayOptions,
) -> Result<(Written, ReplayStats), Error> {
    let rule = options
        .region_rule
        .clone()
        .unwrap_or(walfetch::index::RegionRule::Key(
            walfetch::index::IdFormat::BigEndian,
        ));
    let mut recovery = start_recovery(cluster, topic, indexes, checkpoints, options).await?;
    let mut got = Written::new();
    // Every region asked for is in the output, even with nothing to yield.
    for &(p, region) in checkpoints.keys() {
        got.entry(p).or_default().entry(region).or_default();
    }
    while let Some(entry) = recovery.next().await {
        let entry = entry?;
        assert_eq!(&*entry.topic, topic);
        assert_eq!(
            rule.region(&entry.record),
            Some(entry.region),
            "offset {} tagged with the wrong region",
            entry.record.offset()
        );
        got.entry(entry.partition)
            .or_default()
            .get_mut(&entry.region)
            .unwrap_or_else(|| panic!("region {} was not asked for", entry.region))
            .push((entry.record.offset(), entry.record.value_bytes().unwrap()));
    }
    Ok((got, recovery.stats()))
}

/// Writes partitions `0..partitions` of `topic`, each with an interleaved
/// writer of batches of at most `max_batch_bytes`, `entries(p)` the
/// entries of partition `p`; what was written, and each partition's index
/// in partition order.
pub async fn write_interleaved_partitions<I>(
    cluster: &Arc<Cluster>,
    topic: &str,
    partitions: i32,
    max_batch_bytes: usize,
    entries: impl Fn(i32) -> I,
) -> (Written, Vec<WalIndex>)
where
    I: IntoIterator<Item = (RegionId, Bytes)>,
{
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..partitions {
        let config = WriterConfig::new(topic, p)
            .with_mode(walfetch::writer::WriterMode::Interleaved)
            .with_max_batch_bytes(max_batch_bytes);
        indexes.push(write_partition(cluster, config, entries(p), &mut written).await);
    }
    (written, indexes)
}

/// Writes `entries` (region, value) with one WAL writer configured by
/// `config` (its topic and partition), and records them in `written`; the
/// writer's index.
pub async fn write_partition(
    cluster: &Arc<Cluster>,
    config: WriterConfig,
    entries: impl IntoIterator<Item = (RegionId, Bytes)>,
    written: &mut Written,
) -> WalIndex {
    let partition = config.partition;
    let entries: Vec<(RegionId, Bytes)> = entries.into_iter().collect();
    let round = Round {
        writer: 0,
        entries: entries
            .iter()
            .map(|(region, payload)| WalEntry::new(*region, payload.clone()))
            .collect(),
        flush: false,
    };
    let rounds = write_rounds(cluster, [config], [round])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let regions = written.entry(partition).or_default();
    for ((region, payload), offset) in entries.into_iter().zip(&rounds.offsets[0]) {
        regions.entry(region).or_default().push((*offset, payload));
    }
    rounds.index
}

/// Each partition's index as its writer would have dumped it halfway
/// through what was written.
pub fn halfway(indexes: &[WalIndex], written: &Written) -> Vec<WalIndex> {
    indexes
        .iter()
        .zip(written.values())
        .map(|(index, regions)| dumped_halfway(index, regions))
        .collect()
}

/// One partition's `index` as its writer would have dumped it halfway
/// through what its `regions` were written (at half its last offset).
pub fn dumped_halfway(
    index: &WalIndex,
    regions: &BTreeMap<RegionId, Vec<(i64, Bytes)>>,
) -> WalIndex {
    let last = regions
        .values()
        .flatten()
        .map(|(o, _)| *o)
        .max()
        .unwrap_or(0);
    dumped_at(index, last / 2)
}

/// Region `k` of partition `p`: distinct over partitions (for `k` under
/// 100), as the region ids of one node are.
pub fn region_of(p: i32, k: u64) -> RegionId {
    u64::try_from(p).unwrap_or(0) * 100 + k
}

/// One of `regions` region numbers, skewed so that low regions are hot:
/// the smaller of two uniform draws.
pub fn skewed_region(rng: &mut StdRng, regions: u64) -> u64 {
    rng.random_range(0..regions)
        .min(rng.random_range(0..regions))
}

/// Writes a WAL with librdkafka (`scripts/fixtures/librdkafka_wal.py`):
/// `count` records of `regions` regions (the key the region id in ASCII
/// decimal) over `partitions` partitions of `topic`; what it wrote.
pub fn librdkafka_wal(
    bootstrap: &str,
    topic: &str,
    count: usize,
    regions: usize,
    compression: &str,
    partitions: i32,
) -> Written {
    use base64::Engine as _;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/fixtures/librdkafka_wal.py"
    );
    let out = std::process::Command::new("python3")
        .args([script, bootstrap, topic])
        .args([count.to_string(), regions.to_string()])
        .args([compression.to_owned(), partitions.to_string()])
        .output()
        .expect("python3 with confluent-kafka (scripts/setup-python.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written = Written::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let field = |name: &str| v[name].as_i64().expect(name);
        let value = base64::engine::general_purpose::STANDARD
            .decode(v["value"].as_str().expect("value"))
            .expect("base64");
        written
            .entry(i32::try_from(field("partition")).expect("partition"))
            .or_default()
            .entry(v["region"].as_u64().expect("region"))
            .or_default()
            .push((field("offset"), Bytes::from(value)));
    }
    written
}
