//! End to end against the real brokers (Apache Kafka and Tansu 0.6.0, one
//! test body on each): WAL writers build the index while writing regions
//! into one partition, then every region is replayed with each strategy
//! and compared with what was written.
#![allow(clippy::unwrap_used)]

use walfetch_support::broker::TestBroker;
use walfetch_support::on_brokers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use walfetch::cluster::Cluster;
use walfetch::codec::Compression;
use walfetch::consumer::{Consumer, ReplayOptions, ReplayRange, StrategyKind};
use walfetch::index::{RegionId, WalIndex};
use walfetch::plan::{CostModel, PlanConfig};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};
use walfetch_support::recovery::to_the_end;
use walfetch_support::sim::{BatchSpec, SimBatch, SimLog};
use walfetch_support::tansu::Tansu;

type Row = (i64, Bytes, Vec<(Bytes, Option<Bytes>)>);

/// Deterministic entry sizes and region choice, from a seeded generator.
struct Workload(StdRng);

impl Workload {
    fn new(seed: u64) -> Self {
        Self(StdRng::seed_from_u64(seed))
    }

    /// An entry of one of `regions` regions, skewed toward low ids (the
    /// lower of two uniform draws).
    fn entry(&mut self, regions: u64, n: usize) -> WalEntry {
        let region = self
            .0
            .random_range(0..regions)
            .min(self.0.random_range(0..regions));
        let size = self.0.random_range(20..720);
        let payload = format!("region {region} entry {n} {}", "x".repeat(size));
        let mut entry = WalEntry::new(region, payload);
        if n % 5 == 0 {
            entry
                .headers
                .push((Bytes::from_static(b"n"), Some(Bytes::from(n.to_string()))));
        }
        entry
    }
}

/// Writes `count` entries with one writer; returns what each region got, in order.
async fn write(
    cluster: &Arc<Cluster>,
    topic: &str,
    compression: Compression,
    count: usize,
    seed: u64,
    region_base: RegionId,
) -> (BTreeMap<RegionId, Vec<(i64, WalEntry)>>, WalIndex) {
    let mut config = WriterConfig::new(topic, 0);
    config.compression = compression;
    config.max_batch_bytes = 8 << 10;
    let writer = WalWriter::new(Arc::clone(cluster), config);
    let mut workload = Workload::new(seed);
    let mut pending = Vec::new();
    for n in 0..count {
        let mut entry = workload.entry(6, n);
        entry.region += region_base;
        pending.push((entry.clone(), writer.append(entry).await.expect("queue")));
    }
    let mut written: BTreeMap<RegionId, Vec<(i64, WalEntry)>> = BTreeMap::new();
    for (entry, appended) in pending {
        let offset = appended.await.expect("written");
        written
            .entry(entry.region)
            .or_default()
            .push((offset, entry));
    }
    let index = writer.close().await.expect("close");
    (written, index)
}

async fn replay(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    topic: &str,
    region: RegionId,
    strategy: StrategyKind,
) -> Vec<Row> {
    let options = ReplayOptions::default().with_strategy(strategy);
    let range = to_the_end(topic, region, 0);
    let mut consumer = Consumer::new(Arc::clone(cluster), index, range, options)
        .await
        .expect("consumer");
    let mut out = Vec::new();
    while let Some(record) = consumer.next().await {
        let record = record.unwrap_or_else(|e| panic!("{strategy:?} region {region}: {e}"));
        // A scan yields every record: keep the region's own.
        if record.key() != Some(&region.to_be_bytes()[..]) {
            assert_eq!(
                strategy,
                StrategyKind::Scan,
                "only a scan yields other regions' records"
            );
            continue;
        }
        let headers = record
            .headers()
            .map(|h| (Bytes::copy_from_slice(h.key), h.value_bytes()))
            .collect();
        out.push((
            record.offset(),
            record.value_bytes().expect("value"),
            headers,
        ));
    }
    let stats = consumer.stats();
    assert!(stats.lost.is_empty());
    assert!(stats.fetches > 0);
    out
}

/// What replay yields for the entries: the writer puts the per-record
/// checksum header before the entry's own headers.
fn expected(entries: &[(i64, WalEntry)]) -> Vec<Row> {
    entries
        .iter()
        .map(|(o, e)| {
            let sum = walfetch::codec::record_checksum_header(
                Some(&e.region.to_be_bytes()),
                Some(&e.payload),
            );
            let mut headers = vec![(
                Bytes::from_static(walfetch::codec::RECORD_CHECKSUM_HEADER.as_bytes()),
                Some(Bytes::copy_from_slice(&sum)),
            )];
            headers.extend(e.headers.iter().cloned());
            (*o, e.payload.clone(), headers)
        })
        .collect()
}

async fn every_region_replays_exactly_with_every_strategy(broker: &TestBroker) {
    for (i, compression) in [Compression::None, Compression::Lz4]
        .into_iter()
        .enumerate()
    {
        let topic = broker.topic(&format!("wal-{i}"));
        let cluster = Arc::new(broker.cluster_with_topic(&topic, 1).await);
        let (written, index) = write(
            &cluster,
            &topic,
            compression,
            600,
            0x9e37_79b9_7f4a_7c15 + i as u64,
            0,
        )
        .await;
        assert_eq!(index.len(), 600);
        for (&region, entries) in &written {
            for strategy in [
                StrategyKind::Index,
                StrategyKind::Estimate,
                StrategyKind::Scan,
            ] {
                let got = replay(&cluster, &index, &topic, region, strategy).await;
                let want = expected(entries);
                let offsets = |v: &[Row]| v.iter().map(|e| e.0).collect::<Vec<_>>();
                assert_eq!(
                    offsets(&got),
                    offsets(&want),
                    "{compression} {strategy:?} region {region}"
                );
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        g == w,
                        "{compression} {strategy:?} region {region} offset {}: {g:?}",
                        g.0
                    );
                }
            }
        }
    }
}

async fn two_writers_interleaving_and_an_offsets_only_index(broker: &TestBroker) {
    let topic: &str = &broker.topic("wal-two-writers");
    let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
    let (a, b) = tokio::join!(
        write(&cluster, topic, Compression::None, 400, 7, 0),
        write(&cluster, topic, Compression::Zstd, 400, 11, 100),
    );
    // Each writer's regions are its own: writer B's region ids start at 100.
    let (mut written, mut index) = a;
    let (written_b, index_b) = b;
    written.extend(written_b);
    index.merge(&index_b).expect("merge");
    let offsets_only = index.without_hints();
    for (region, entries) in &written {
        for idx in [&index, &offsets_only] {
            let options = ReplayOptions::default();
            let range = to_the_end(topic, *region, 0);
            let mut consumer = Consumer::new(Arc::clone(&cluster), idx, range, options)
                .await
                .expect("consumer");
            let mut got = Vec::new();
            while let Some(record) = consumer.next().await {
                let record = record.unwrap_or_else(|e| panic!("region {region}: {e}"));
                // Past last_index too, only the region's records come.
                assert_eq!(record.key(), Some(&region.to_be_bytes()[..]));
                got.push((record.offset(), record.value_bytes().expect("value")));
            }
            let want: Vec<_> = entries
                .iter()
                .map(|(o, e)| (*o, e.payload.clone()))
                .collect();
            assert_eq!(got, want, "region {region}");
        }
    }
}

/// Tansu adds whole batches while the bytes it counted (each batch without
/// its header) are below a fetch's limit, so a limit at a wanted batch's
/// end gets the next batch too (`tansu_habits`). A replay that has seen
/// this limits each fetch to one byte into its last wanted batch: a region
/// whose batches lie apart (GreptimeDB's layout, one region a batch) gets
/// its own batches and, at most, one more with its first fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tansu_a_region_gets_its_own_batches_once_the_overshoot_is_seen() {
    let specs: Vec<BatchSpec> = (0..40)
        .map(|b| BatchSpec {
            regions: vec![b % 4; 3],
            ..BatchSpec::default()
        })
        .collect();
    let log = SimLog::build(&specs, Compression::Lz4, |o| 200 + (o as usize % 7) * 50);
    let broker = Tansu::start().await;
    let cluster = Arc::new(broker.cluster_with_topic("wal", 1).await);
    for i in 0..log.batches().len() {
        cluster
            .produce("wal", 0, log.batch_bytes(i))
            .await
            .expect("produce");
    }
    let range = log.whole(1);
    let fewest_bytes = PlanConfig {
        cost: CostModel {
            round_trip: Duration::ZERO,
            ..CostModel::default()
        },
        ..PlanConfig::default()
    };
    let options = ReplayOptions::default()
        .with_plan(fewest_bytes)
        .with_learn_link(false);
    let replay = ReplayRange {
        topic: "wal".into(),
        partition: 0,
        region: 1,
        from: range.from,
        to: Some(range.to),
    };
    let mut consumer = Consumer::new(Arc::clone(&cluster), &log.full_index(), replay, options)
        .await
        .expect("consumer");
    let mut got = Vec::new();
    while let Some(record) = consumer.next().await {
        let record = record.expect("record");
        got.push((record.offset(), record.value_bytes().expect("value")));
    }
    assert_eq!(got, log.expected(&range));
    let batches = log.batches();
    let len = |b: &SimBatch| u64::from(b.len);
    let wanted: u64 = batches.iter().skip(1).step_by(4).map(len).sum();
    let largest = batches.iter().map(len).max().unwrap();
    let stats = consumer.stats();
    assert!(
        stats.records_bytes <= wanted + largest,
        "{} bytes of records for {wanted} wanted",
        stats.records_bytes
    );
    assert_eq!(stats.fetches, 10, "one fetch a wanted batch");
}

on_brokers!(
    every_region_replays_exactly_with_every_strategy,
    two_writers_interleaving_and_an_offsets_only_index,
);
