//! Failover on a real 3-node Apache Kafka KRaft cluster: the cluster, a
//! client patient enough for a failover, the WAL written to it, its
//! partition leaders and in-sync replicas, a recovery pulled slowly, and
//! what it got compared with what it should have. Shared by
//! `tests/failover_kafka.rs` and the failover soak
//! (`examples/failover_soak.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::{Cluster, NewTopic, PartitionInfo, RetryPolicy};
use walfetch::consumer::{Recovery, ReplayOptions};
use walfetch::error::Error;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::WriterConfig;
use walfetch_brokers::kafka::{find_kafka, KafkaCluster, KafkaConfig};
use walfetch_codec::Compression;

use crate::recovery::{start_recovery, write_partition, Written};

/// Partitions of the WAL topic.
pub const PARTITIONS: i32 = 4;

/// A 3-node cluster; panics with the harness's reason when it cannot
/// start.
pub async fn start_cluster() -> KafkaCluster {
    let install = find_kafka().unwrap_or_else(|e| panic!("Kafka is needed: {e}"));
    KafkaCluster::start(
        &install,
        // (Kafka 4 refuses `log.segment.bytes` below 1 MiB.)
        KafkaConfig::nodes(3)
            .setting("offsets.topic.replication.factor", "3")
            .setting("transaction.state.log.replication.factor", "3")
            .setting("transaction.state.log.min.isr", "2"),
    )
    .await
    .unwrap_or_else(|e| panic!("a 3-node Kafka cluster could not start: {e}"))
}

/// A client of `kafka` with the harness's test-sized socket timeouts but
/// the library's default retry deadline (30 s): a killed leader stays
/// the leader in Kafka's metadata until the controller fences it, after
/// `broker.session.timeout.ms` (9 s by default), so the harness's 10 s
/// deadline is too close to that for a failover test.
pub async fn client(kafka: &KafkaCluster) -> Arc<Cluster> {
    let mut config = kafka.cluster_config();
    config.retry = RetryPolicy::default();
    Arc::new(Cluster::connect(config).await.unwrap())
}

/// Creates `topic` (RF 3, min ISR 2, 4 partitions) and writes a
/// region-pure lz4 WAL: `per_partition` entries over 6 regions in each
/// partition. What was written, and each partition's index.
pub async fn write_wal(
    cluster: &Arc<Cluster>,
    topic: &str,
    per_partition: usize,
    seed: u64,
) -> (Written, Vec<WalIndex>) {
    let mut new = NewTopic::new(topic, PARTITIONS);
    new.replication_factor = 3;
    new.configs
        .push(("min.insync.replicas".to_owned(), "2".to_owned()));
    cluster.create_topics(&[new]).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut config = WriterConfig::new(topic, p);
        config.compression = Compression::Lz4;
        config.max_batch_bytes = 2 << 10;
        let entries: Vec<(RegionId, Bytes)> = (0..per_partition)
            .map(|n| {
                let region = 100 * RegionId::try_from(p).unwrap() + rng.random_range(0..6u64);
                let pad = "w".repeat(rng.random_range(0..120));
                (region, Bytes::from(format!("p{p} n{n} {pad}")))
            })
            .collect();
        indexes.push(write_partition(cluster, config, entries, &mut written).await);
    }
    (written, indexes)
}

/// A recovery of the regions of `topic` in `checkpoints`, each from its
/// checkpoint, with little buffered ahead so that most of it is still to
/// fetch while the first entries are pulled.
pub async fn recovery(
    cluster: &Arc<Cluster>,
    topic: &str,
    indexes: &[WalIndex],
    checkpoints: &BTreeMap<(i32, RegionId), i64>,
) -> Result<Recovery, Error> {
    let options = ReplayOptions::default()
        .with_max_buffered_bytes(16 << 10)
        .with_max_in_flight(1);
    start_recovery(cluster, topic, indexes, checkpoints, options).await
}

/// The node index leading `topic`/`partition` now (fresh metadata).
pub async fn leader_node(
    kafka: &KafkaCluster,
    cluster: &Cluster,
    topic: &str,
    partition: i32,
) -> usize {
    let metadata = cluster.metadata(Some(&[topic])).await.unwrap();
    let leader = metadata.leader(topic, partition).expect("a leader");
    kafka.index_of(leader.broker_id).expect("a node of ours")
}

/// `topic`'s partitions as the node `index` of `kafka` sees them (a
/// client of that node alone).
pub async fn partitions_seen_by(
    kafka: &KafkaCluster,
    index: usize,
    topic: &str,
) -> Result<BTreeMap<i32, PartitionInfo>, String> {
    let cluster = Cluster::connect(kafka.node_probe_config(index))
        .await
        .map_err(|e| e.to_string())?;
    let metadata = cluster
        .metadata(Some(&[topic]))
        .await
        .map_err(|e| e.to_string())?;
    metadata
        .topics
        .get(topic)
        .map(|t| t.partitions.clone())
        .ok_or_else(|| format!("node {} does not list {topic}", index + 1))
}

/// Waits until every running node of `kafka` agrees that every partition
/// of `topic` has a running leader, at a leader epoch above `fenced`'s
/// for the partitions named there, and all its replicas in sync: the
/// state in which one more node may be killed without taking any
/// partition below `min.insync.replicas` 2. The partitions as the last
/// node asked saw them, or why not within `within`.
pub async fn wait_in_sync(
    kafka: &KafkaCluster,
    topic: &str,
    fenced: &BTreeMap<i32, i32>,
    within: Duration,
) -> Result<BTreeMap<i32, PartitionInfo>, String> {
    let started = Instant::now();
    let running: BTreeSet<i32> = kafka.running().iter().map(|&i| kafka.node_id(i)).collect();
    loop {
        let mut last = Ok(BTreeMap::new());
        for &index in &kafka.running() {
            last = match partitions_seen_by(kafka, index, topic).await {
                Ok(partitions) => match not_in_sync(&partitions, &running, fenced) {
                    None => Ok(partitions),
                    Some(why) => Err(format!("node {}: {why}", index + 1)),
                },
                Err(e) => Err(e),
            };
            if last.is_err() {
                break;
            }
        }
        match last {
            Ok(partitions) => return Ok(partitions),
            Err(why) if started.elapsed() > within => {
                return Err(format!(
                    "{topic} not in sync within {} s: {why}",
                    within.as_secs()
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// What keeps `partitions` from being in sync (see [`wait_in_sync`]).
fn not_in_sync(
    partitions: &BTreeMap<i32, PartitionInfo>,
    running: &BTreeSet<i32>,
    fenced: &BTreeMap<i32, i32>,
) -> Option<String> {
    if partitions.len() != usize::try_from(PARTITIONS).unwrap() {
        return Some(format!("{} partitions listed", partitions.len()));
    }
    for (p, info) in partitions {
        if !running.contains(&info.leader_id) {
            return Some(format!("partition {p} led by {}", info.leader_id));
        }
        if let Some(&epoch) = fenced.get(p) {
            if info.leader_epoch <= epoch {
                return Some(format!("partition {p} still at leader epoch {epoch}"));
            }
        }
        let isr: BTreeSet<i32> = info.isr.iter().copied().collect();
        let replicas: BTreeSet<i32> = info.replicas.iter().copied().collect();
        if isr != replicas {
            return Some(format!("partition {p} in sync {isr:?} of {replicas:?}"));
        }
    }
    None
}

/// Pulls up to `limit` more entries of `recovery` into `got` (stopping
/// early at its end), a little slowly so that the recovery is still in
/// flight when a fault lands; how many it pulled.
pub async fn pull_until(
    recovery: &mut Recovery,
    got: &mut Written,
    limit: usize,
) -> Result<usize, Error> {
    let mut n = 0;
    while n < limit {
        let Some(entry) = recovery.next().await else {
            break;
        };
        let entry = entry?;
        got.entry(entry.partition)
            .or_default()
            .entry(entry.region)
            .or_default()
            .push((entry.record.offset(), entry.record.value_bytes().unwrap()));
        n += 1;
        if n % 16 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    Ok(n)
}

/// How many entries `written` holds.
pub fn total(written: &Written) -> usize {
    written
        .values()
        .flat_map(|r| r.values())
        .map(Vec::len)
        .sum()
}

/// Exactly every region's entries, in order, none twice: compared as
/// whole sequences, with the first difference named.
pub fn assert_exactly(got: &Written, want: &Written) {
    for (p, regions) in want {
        for (region, entries) in regions {
            let had = got.get(p).and_then(|r| r.get(region));
            let had = had.map(Vec::as_slice).unwrap_or_default();
            if had != entries.as_slice() {
                let first = had.iter().zip(entries).position(|(a, b)| a != b);
                panic!(
                    "partition {p} region {region}: got {} entries, want {} (first difference at {first:?})",
                    had.len(),
                    entries.len()
                );
            }
        }
    }
    assert_eq!(got.len(), want.len(), "partitions");
}

/// How what a recovery got differs from what it should have got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Differences {
    /// Entries it should have got.
    pub expected: u64,
    /// Entries it got.
    pub got: u64,
    /// Expected entries it did not get (at their offset, with their value).
    pub lost: u64,
    /// Entries it got again, or after an entry of a later offset of the
    /// same region.
    pub duplicated: u64,
    /// Entries it got, in order and once, that it should not have got: of
    /// a region or an offset not expected, or with another value.
    pub unexpected: u64,
}

impl Differences {
    /// Whether it got exactly what it should have.
    pub fn is_exact(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.unexpected == 0
    }
}

/// Counts how `got` (each region's entries in the order they came)
/// differs from `want` (each region's entries in offset order).
pub fn differences(got: &Written, want: &Written) -> Differences {
    let mut out = Differences {
        expected: u64::try_from(total(want)).unwrap(),
        got: u64::try_from(total(got)).unwrap(),
        ..Differences::default()
    };
    let empty = BTreeMap::new();
    let mut keys: BTreeSet<(i32, RegionId)> = BTreeSet::new();
    for (&p, regions) in want.iter().chain(got) {
        keys.extend(regions.keys().map(|&r| (p, r)));
    }
    for (p, region) in keys {
        let want: BTreeMap<i64, &Bytes> = want
            .get(&p)
            .unwrap_or(&empty)
            .get(&region)
            .map(|e| e.iter().map(|(o, v)| (*o, v)).collect())
            .unwrap_or_default();
        let had = got.get(&p).and_then(|r| r.get(&region));
        let mut seen = BTreeSet::new();
        let mut matched = 0u64;
        let mut last = None;
        for (offset, value) in had.map(Vec::as_slice).unwrap_or_default() {
            if !seen.insert(*offset) {
                out.duplicated += 1;
                continue;
            }
            let wanted = want.get(offset) == Some(&value);
            matched += u64::from(wanted);
            if last.is_some_and(|l| *offset < l) {
                // Late, but there: out of order, not lost.
                out.duplicated += 1;
                continue;
            }
            last = Some(*offset);
            out.unexpected += u64::from(!wanted);
        }
        out.lost += u64::try_from(want.len()).unwrap() - matched;
    }
    out
}
