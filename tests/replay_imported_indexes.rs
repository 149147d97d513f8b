//! Replays with indexes from elsewhere, on the real broker: an index
//! imported from a GreptimeDB-format file, and an index built by
//! `build_index` over a topic that librdkafka wrote.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt;
use support::tansu::Tansu;
use walfetch::cluster::Cluster;
use walfetch::consumer::{Consumer, ConsumerOptions, ReplayRange};
use walfetch::index::{build_index, import_greptime, IdFormat, RegionId, RegionRule, WalIndex};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};

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
    let mut consumer = Consumer::new(
        Arc::clone(cluster),
        index,
        range,
        ConsumerOptions::default(),
    )
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_with_an_index_imported_from_greptimedb() {
    let broker = Tansu::start().await;
    let topic = "greptime_wal_topic_0";
    let cluster = Arc::new(broker.cluster_with_topic(topic, 1).await);
    let mut config = WriterConfig::new(topic, 0);
    config.max_batch_bytes = 2048;
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut pending = Vec::new();
    for n in 0..500u64 {
        let region = (4398046511104 + (n * 31 % 5)) as RegionId; // GreptimeDB-style region ids
        let payload = Bytes::from(format!("entry {n} {}", "v".repeat((n % 50) as usize)));
        pending.push((
            region,
            payload.clone(),
            writer.append(WalEntry::new(region, payload)).await.unwrap(),
        ));
    }
    let mut written: BTreeMap<RegionId, Vec<(i64, Bytes)>> = BTreeMap::new();
    for (region, payload, appended) in pending {
        written
            .entry(region)
            .or_default()
            .push((appended.await.unwrap(), payload));
    }
    let last = writer.close().await.unwrap().last_index().unwrap();
    // The index file as GreptimeDB writes it: delta-encoded offsets.
    let regions: serde_json::Map<String, serde_json::Value> = written
        .iter()
        .map(|(region, entries)| {
            let mut previous = 0;
            let deltas: Vec<i64> = entries
                .iter()
                .enumerate()
                .map(|(i, (o, _))| {
                    let d = if i == 0 { *o } else { o - previous };
                    previous = *o;
                    d
                })
                .collect();
            (region.to_string(), serde_json::json!(deltas))
        })
        .collect();
    let json = serde_json::json!({ topic: { "regions": regions, "last_index": last } });
    let mut topics = import_greptime(json.to_string().as_bytes(), "index.json").unwrap();
    let index = topics.remove(topic).unwrap();
    for (region, want) in &written {
        assert_eq!(
            &replay(&cluster, &index, topic, *region).await,
            want,
            "region {region}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_a_topic_librdkafka_wrote_with_an_index_built_by_scanning_it() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/fixtures/librdkafka_wal.py"
    );
    let broker = Tansu::start().await;
    for (i, compression) in ["none", "lz4"].into_iter().enumerate() {
        let topic = format!("librdkafka-wal-{i}");
        let cluster = Arc::new(broker.cluster_with_topic(&topic, 1).await);
        let out = Command::new("python3")
            .args([script, &broker.address(), &topic, "400", "6", compression])
            .output()
            .expect("python3 with confluent-kafka (scripts/setup-python.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut written: BTreeMap<RegionId, Vec<(i64, Bytes)>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let value = BASE64.decode(v["value"].as_str().unwrap()).unwrap();
            written
                .entry(v["region"].as_u64().unwrap())
                .or_default()
                .push((v["offset"].as_i64().unwrap(), Bytes::from(value)));
        }
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
