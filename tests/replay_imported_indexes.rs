//! Replays with indexes from elsewhere, on the real broker: a WAL written
//! as GreptimeDB writes it with its index imported from GreptimeDB's index
//! file, and an index built by `build_index` over a topic that librdkafka
//! wrote.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use support::greptime;
use support::recovery::librdkafka_wal;
use support::tansu::Tansu;
use walfetch::cluster::Cluster;
use walfetch::consumer::{Consumer, Recovery, ReplayOptions, ReplayRange};
use walfetch::index::{import_greptime, IdFormat, RegionId, RegionRule, WalIndex};
use walfetch::scan::build_index;

async fn replay(
    cluster: &Arc<Cluster>,
    index: &WalIndex,
    topic: &str,
    region: RegionId,
) -> Vec<(i64, Bytes)> {
    let range = ReplayRange {
        topic: topic.into(),
        partition: 0,
        region,
        from: 0,
        to: None,
    };
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

/// A WAL written as GreptimeDB writes it (`support::greptime`: one region
/// per lz4 batch, the region in the record key's JSON meta, split entries)
/// and GreptimeDB's index of its first part (GreptimeDB dumps its index now
/// and then, so the entries past `last_index` are the rule's to place).
/// With the imported index alone (no rule given), every region gets exactly
/// its records, the tail's included, region by region and in one pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_a_wal_greptimedb_wrote_with_its_imported_index() {
    let broker = Tansu::start().await;
    let topic = "greptime_wal_topic_0";
    let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
    let written = greptime::write(&cluster, topic, 60).await;
    let end = greptime::end(&written);
    let last_index = end * 2 / 3;
    let json = greptime::index_json(topic, &written, last_index);
    let mut topics = import_greptime(json.as_bytes(), "index.json").unwrap();
    let index = topics.remove(topic).unwrap();
    assert_eq!(index.source().rule, Some(RegionRule::GREPTIMEDB));
    let mut recovery = Recovery::builder(Arc::clone(&cluster)).index(topic, 0, &index);
    for (region, want) in &written {
        let range = ReplayRange {
            topic: topic.into(),
            partition: 0,
            region: *region,
            from: 0,
            to: Some(end),
        };
        let mut consumer = Consumer::new(
            Arc::clone(&cluster),
            &index,
            range,
            ReplayOptions::default(),
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        while let Some(record) = consumer.next().await {
            let record = record.unwrap_or_else(|e| panic!("region {region}: {e}"));
            got.push((record.offset(), record.value_bytes().unwrap()));
        }
        assert_eq!(&got, want, "region {region}");
        assert!(
            want.iter().any(|(o, _)| *o > last_index),
            "region {region} has a tail"
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
    assert_eq!(one_pass, written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_a_topic_librdkafka_wrote_with_an_index_built_by_scanning_it() {
    let broker = Tansu::start().await;
    for (i, compression) in ["none", "lz4"].into_iter().enumerate() {
        let topic = format!("librdkafka-wal-{i}");
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
