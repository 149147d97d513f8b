//! Replays with indexes from elsewhere, on the real brokers (Apache Kafka and Tansu, one test body on each): a WAL written
//! as GreptimeDB writes it (by walfetch's encoder, and by rskafka, the
//! client GreptimeDB produces with) with its index imported from
//! GreptimeDB's index file, and an index built by `build_index` over a
//! topic that librdkafka wrote.
#![allow(clippy::unwrap_used)]

use walfetch_support::broker::TestBroker;
use walfetch_support::on_brokers;

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use walfetch::cluster::Cluster;
use walfetch::consumer::{Consumer, Recovery, ReplayOptions, ReplayRange};
use walfetch::index::{import_greptime, IdFormat, RegionId, RegionRule, WalIndex};
use walfetch::scan::build_index;
use walfetch_support::greptime;
use walfetch_support::recovery::{librdkafka_wal, to_the_end};

async fn replay(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    topic: &str,
    region: RegionId,
) -> Vec<(i64, Bytes)> {
    let range = to_the_end(topic, region, 0);
    let mut consumer = Consumer::new(Arc::clone(cluster), index, range, ReplayOptions::default())
        .await
        .unwrap();
    let last_index = index.last_index().unwrap_or(-1);
    let mut out = Vec::new();
    while let Some(record) = consumer.next().await {
        let record = record.unwrap_or_else(|e| panic!("region {region}: {e}"));
        assert!(
            record.offset() <= last_index,
            "the index covers the whole topic: no tail"
        );
        out.push((record.offset(), record.value_bytes().unwrap()));
    }
    out
}

/// Imports GreptimeDB's index of the first two thirds of `written`, a WAL
/// in `topic` partition 0 with GreptimeDB's records (GreptimeDB dumps its
/// index now and then, so the entries past `last_index` are the rule's to
/// place), and checks that with the imported index alone (no rule given)
/// every region gets exactly its records, the tail's included, region by
/// region and in one pass.
async fn recover_with_greptimes_index(
    cluster: &Arc<Cluster>,
    topic: &str,
    written: &greptime::GreptimeWal,
) {
    let end = greptime::end(written);
    // GreptimeDB's last_index: the log end when it dumped (exclusive).
    let dumped_at = end * 2 / 3;
    let json = greptime::index_json(topic, written, dumped_at);
    let mut topics = import_greptime(json.as_bytes(), "index.json").unwrap();
    let index = topics.remove(topic).unwrap();
    assert_eq!(index.source().rule, Some(RegionRule::GREPTIMEDB));
    assert_eq!(index.last_index(), Some(dumped_at - 1));
    let last_index = dumped_at - 1;
    let mut recovery = Recovery::builder(Arc::clone(cluster)).index(topic, 0, &index);
    for (region, want) in written {
        let range = ReplayRange {
            topic: topic.into(),
            partition: 0,
            region: *region,
            from: 0,
            to: Some(end),
        };
        let mut consumer =
            Consumer::new(Arc::clone(cluster), &index, range, ReplayOptions::default())
                .await
                .unwrap();
        let mut got = Vec::new();
        while let Some(record) = consumer.next().await {
            let record = record.unwrap_or_else(|e| panic!("{topic} region {region}: {e}"));
            got.push((record.offset(), record.value_bytes().unwrap()));
        }
        assert_eq!(&got, want, "{topic} region {region}");
        assert!(
            want.iter().any(|(o, _)| *o > last_index),
            "{topic} region {region} has a tail"
        );
        recovery = recovery.region(topic, 0, *region, 0);
    }
    let mut recovery = recovery.build().await.unwrap();
    let mut one_pass = greptime::GreptimeWal::new();
    while let Some(entry) = recovery.next().await {
        let entry = entry.unwrap();
        one_pass
            .entry(entry.region)
            .or_default()
            .push((entry.record.offset(), entry.record.value_bytes().unwrap()));
    }
    assert_eq!(&one_pass, written, "{topic}");
}

/// A WAL written as GreptimeDB writes it (`walfetch_support::greptime`: one region
/// per lz4 batch, the region in the record key's JSON meta, split
/// entries), recovered with GreptimeDB's index.
async fn replay_a_wal_greptimedb_wrote_with_its_imported_index(broker: &TestBroker) {
    let topic: &str = &broker.topic("greptime_wal_topic_0");
    let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
    let written = greptime::write(&cluster, topic, 60).await;
    recover_with_greptimes_index(&cluster, topic, &written).await;
}

/// The same WAL written by rskafka, the client GreptimeDB produces with:
/// one `produce` call per entry (a region's write request), lz4 and zstd.
/// Its batches are rskafka's own encoding, not walfetch's.
async fn replay_a_wal_rskafka_wrote_as_greptimedb_does(broker: &TestBroker) {
    use rskafka::client::partition::{Compression, UnknownTopicHandling};
    use rskafka::client::ClientBuilder;
    use rskafka::record::Record;

    let client = ClientBuilder::new(vec![broker.address()])
        .build()
        .await
        .unwrap();
    for (topic, compression) in [
        ("greptime_rskafka_lz4", Compression::Lz4),
        ("greptime_rskafka_zstd", Compression::Zstd),
    ] {
        let topic: &str = &broker.topic(topic);
        let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
        let partition = client
            .partition_client(topic, 0, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        // GreptimeDB's metasrv starts every topic with a no-op record.
        let noop = Record {
            key: None,
            value: None,
            headers: Default::default(),
            timestamp: rskafka::chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
        };
        partition.produce(vec![noop], compression).await.unwrap();
        let mut written = greptime::GreptimeWal::new();
        for n in 0..60 {
            let (region, parts) = greptime::entry(n, topic);
            let records = parts
                .iter()
                .map(|(key, value)| Record {
                    key: Some(key.to_vec()),
                    value: Some(value.to_vec()),
                    headers: Default::default(),
                    timestamp: rskafka::chrono::DateTime::from_timestamp_millis(1_700_000_000_000)
                        .unwrap(),
                })
                .collect();
            let offsets = partition.produce(records, compression).await.unwrap();
            let values = parts.into_iter().map(|(_, value)| value);
            written
                .entry(region)
                .or_default()
                .extend(offsets.into_iter().zip(values));
        }
        recover_with_greptimes_index(&cluster, topic, &written).await;
    }
}

async fn replay_a_topic_librdkafka_wrote_with_an_index_built_by_scanning_it(broker: &TestBroker) {
    for (i, compression) in ["none", "lz4"].into_iter().enumerate() {
        let topic = broker.topic(&format!("librdkafka-wal-{i}"));
        let cluster = Arc::new(broker.cluster_with_topic(&topic, 1).await);
        let mut written = librdkafka_wal(&broker.address(), &topic, 400, 6, compression, 1);
        let written = written.remove(&0).unwrap_or_default();
        let rule = RegionRule::Key(IdFormat::Decimal);
        let (index, report) = build_index(&cluster, &topic, 0, &rule, 0, None, 1 << 20)
            .await
            .unwrap();
        assert_eq!(report.indexed, 400, "{compression}");
        assert_eq!(report.unassigned, 0);
        assert_eq!(index.last_index(), Some(399));
        for (region, want) in &written {
            assert_eq!(
                &replay(&cluster, &index, &topic, *region).await,
                want,
                "{compression} region {region}"
            );
        }
    }
}

on_brokers!(
    replay_a_wal_rskafka_wrote_as_greptimedb_does,
    replay_a_wal_greptimedb_wrote_with_its_imported_index,
    replay_a_topic_librdkafka_wrote_with_an_index_built_by_scanning_it,
);
