//! The scripted broker with a WAL of several partitions of regions, written and indexed.

pub(crate) use std::collections::BTreeMap;
pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use bytes::Bytes;
pub(crate) use futures::StreamExt;
pub(crate) use kafka_protocol::messages::ApiKey;
pub(crate) use rand::rngs::StdRng;
pub(crate) use rand::{RngExt, SeedableRng};
pub(crate) use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
pub(crate) use walfetch::codec::Compression;
pub(crate) use walfetch::consumer::{
    Consumer, CutRecords, Recovery, ReplayOptions, ReplayRange, ReplayStats, StrategyKind,
};
pub(crate) use walfetch::index::{RegionId, WalIndex};
pub(crate) use walfetch::plan::{CostModel, PlanConfig};
pub(crate) use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};
pub(crate) use walfetch_support::recovery::{
    checkpoints, expected, from_start, halfway, recover, recover_with_defaults, region_of,
    skewed_region, start_recovery, time_to_recover_partition, write_partition, Written,
};
pub(crate) use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

pub(crate) const TOPIC: &str = "wal";
pub(crate) const PARTITIONS: i32 = 3;
pub(crate) const REGIONS_PER_PARTITION: u64 = 6;

/// A scripted cluster with `PARTITIONS` partitions, each written by its
/// own WAL writer with `entries` entries of skewed regions, and the
/// writers' indexes.
pub(crate) async fn setup(
    entries_per_partition: usize,
    compression: Compression,
) -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, PARTITIONS).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(20),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.expect("connect"));
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut writer_config = WriterConfig::new(TOPIC, p);
        writer_config.compression = compression;
        writer_config.max_batch_bytes = 4 << 10;
        // Regions mixed in every batch: a cold region's entries lie far
        // apart, many small fetches (a clustered layout needs fewer).
        writer_config.mode = WriterMode::Interleaved;
        let mut entries = Vec::new();
        for n in 0..entries_per_partition {
            // Skewed: low regions are hot.
            let region = region_of(p, skewed_region(&mut rng, REGIONS_PER_PARTITION));
            let len = rng.random_range(0..600);
            let payload = Bytes::from(format!("p{p} r{region} n{n} {}", "z".repeat(len)));
            entries.push((region, payload));
        }
        indexes.push(write_partition(&cluster, writer_config, entries, &mut written).await);
    }
    (scripted, cluster, written, indexes)
}

/// What `recovery` yields up to its first error (each entry's offset and
/// value), and that error, if any.
pub(crate) async fn entries_until_its_error(
    recovery: &mut walfetch::consumer::Recovery,
) -> (Vec<(i64, Bytes)>, Option<walfetch::error::Error>) {
    let mut got = Vec::new();
    while let Some(entry) = recovery.next().await {
        match entry {
            Ok(e) => got.push((e.record.offset(), e.record.value_bytes().unwrap())),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}
