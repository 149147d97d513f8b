//! Recovering many regions over many partitions in one pass, on the real
//! broker (Tansu, started by the harness): a WAL written by walfetch's
//! writer, and one written by librdkafka with an index built by scanning
//! it. Every region gets exactly its entries from its checkpoint on, with
//! the index complete and with `last_index` halfway (the rest read once by
//! a scan split by the region rule).
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use support::recovery::{checkpoints, dumped_at, expected, recover, Written};
use support::tansu::Tansu;
use walfetch::consumer::{ReplayOptions, StrategyKind};
use walfetch::index::{IdFormat, RegionId, RegionRule, WalIndex};
use walfetch::scan::build_index;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig};

/// The highest offset written to each partition.
fn last_offsets(written: &Written) -> Vec<i64> {
    written
        .values()
        .map(|regions| {
            regions
                .values()
                .flatten()
                .map(|(o, _)| *o)
                .max()
                .unwrap_or(0)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pass_over_a_wal_walfetch_wrote() {
    let broker = Tansu::start().await;
    let topic = "recovery-walwriter";
    let partitions = 3;
    let cluster = Arc::new(broker.cluster_with_topic(topic, partitions).await);
    let mut rng = StdRng::seed_from_u64(42);
    let mut written = Written::new();
    let mut full = Vec::new();
    for p in 0..partitions {
        let mut config = WriterConfig::new(topic, p);
        config.max_batch_bytes = 4 << 10;
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let mut pending = Vec::new();
        for n in 0..300 {
            let region = 1000 * RegionId::try_from(p).unwrap()
                + rng.random_range(0..5u64).min(rng.random_range(0..5u64));
            let payload = Bytes::from(format!("p{p} n{n} {}", "x".repeat(n % 200)));
            let appended = writer
                .append(WalEntry::new(region, payload.clone()))
                .await
                .unwrap();
            pending.push((region, payload, appended));
        }
        for (region, payload, appended) in pending {
            let offset = appended.await.unwrap();
            written
                .entry(p)
                .or_default()
                .entry(region)
                .or_default()
                .push((offset, payload));
        }
        full.push(writer.close().await.unwrap());
    }
    let halfway: Vec<WalIndex> = full
        .iter()
        .zip(last_offsets(&written))
        .map(|(index, last)| dumped_at(index, last / 2))
        .collect();
    let checkpoints = checkpoints(&written, 5);
    let want = expected(&written, &checkpoints);
    for (name, indexes) in [("complete", &full), ("last_index halfway", &halfway)] {
        for strategy in [StrategyKind::Index, StrategyKind::Scan] {
            let options = ReplayOptions::default().with_strategy(strategy);
            let (got, stats) = recover(&cluster, topic, indexes, &checkpoints, options)
                .await
                .unwrap_or_else(|e| panic!("{name} {strategy:?}: {e}"));
            assert!(got == want, "{name} {strategy:?}: regions differ");
            assert!(stats.requests <= stats.fetches, "{stats:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pass_over_a_wal_librdkafka_wrote_with_indexes_built_by_scanning() {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/fixtures/librdkafka_wal.py"
    );
    let broker = Tansu::start().await;
    let topic = "recovery-librdkafka";
    let partitions = 2;
    let cluster = Arc::new(broker.cluster_with_topic(topic, partitions).await);
    let out = Command::new("python3")
        .args([script, &broker.address(), topic, "600", "6", "lz4", "2"])
        .output()
        .expect("python3 with confluent-kafka (scripts/test.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written = Written::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let value = BASE64.decode(v["value"].as_str().unwrap()).unwrap();
        written
            .entry(i32::try_from(v["partition"].as_i64().unwrap()).unwrap())
            .or_default()
            .entry(v["region"].as_u64().unwrap())
            .or_default()
            .push((v["offset"].as_i64().unwrap(), Bytes::from(value)));
    }
    assert_eq!(written.len(), 2, "both partitions written");
    let rule = RegionRule::Key(IdFormat::Decimal);
    let mut full = Vec::new();
    for p in 0..partitions {
        let (index, _) = build_index(&cluster, topic, p, &rule, 0, None, 1 << 20)
            .await
            .unwrap();
        full.push(index);
    }
    let halfway: Vec<WalIndex> = full
        .iter()
        .zip(last_offsets(&written))
        .map(|(index, last)| dumped_at(index, last / 2))
        .collect();
    let checkpoints = checkpoints(&written, 9);
    let want = expected(&written, &checkpoints);
    for (name, indexes) in [("complete", &full), ("last_index halfway", &halfway)] {
        let options = ReplayOptions::default().with_region_rule(rule.clone());
        let (got, _) = recover(&cluster, topic, indexes, &checkpoints, options)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got == want, "{name}: regions differ");
    }
}
