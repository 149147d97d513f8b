//! Recovering many regions over many partitions in one pass, on the real
//! brokers (Apache Kafka and Tansu, started by the harness, one test body
//! on each): a WAL written by walfetch's
//! writer, and one written by librdkafka with an index built by scanning
//! it. Every region gets exactly its entries from its checkpoint on, with
//! the index complete and with `last_index` halfway (the rest read once by
//! a scan split by the region rule).
#![allow(clippy::unwrap_used)]

use walfetch_support::broker::TestBroker;
use walfetch_support::on_brokers;

use std::sync::Arc;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::consumer::{ReplayOptions, StrategyKind};
use walfetch::index::{IdFormat, RegionId, RegionRule};
use walfetch::scan::build_index;
use walfetch::writer::WriterConfig;
use walfetch_support::recovery::{
    checkpoints, expected, halfway, librdkafka_wal, recover, write_partition, Written,
};

async fn one_pass_over_a_wal_walfetch_wrote(broker: &TestBroker) {
    let topic: &str = &broker.topic("recovery-walwriter");
    let partitions = 3;
    let cluster = Arc::new(broker.cluster_with_topic(topic, partitions).await);
    let mut rng = StdRng::seed_from_u64(42);
    let mut written = Written::new();
    let mut full = Vec::new();
    for p in 0..partitions {
        let mut config = WriterConfig::new(topic, p);
        config.max_batch_bytes = 4 << 10;
        let entries: Vec<(RegionId, Bytes)> = (0..300)
            .map(|n| {
                let region = 1000 * RegionId::try_from(p).unwrap()
                    + rng.random_range(0..5u64).min(rng.random_range(0..5u64));
                (
                    region,
                    Bytes::from(format!("p{p} n{n} {}", "x".repeat(n % 200))),
                )
            })
            .collect();
        full.push(write_partition(&cluster, config, entries, &mut written).await);
    }
    let halfway = halfway(&full, &written);
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

async fn one_pass_over_a_wal_librdkafka_wrote_with_indexes_built_by_scanning(broker: &TestBroker) {
    let topic: &str = &broker.topic("recovery-librdkafka");
    let partitions = 2;
    let cluster = Arc::new(broker.cluster_with_topic(topic, partitions).await);
    let written = librdkafka_wal(&broker.address(), topic, 600, 6, "lz4", partitions);
    assert_eq!(written.len(), 2, "both partitions written");
    let rule = RegionRule::Key(IdFormat::Decimal);
    let mut full = Vec::new();
    for p in 0..partitions {
        let (index, _) = build_index(&cluster, topic, p, &rule, 0, None, 1 << 20)
            .await
            .unwrap();
        full.push(index);
    }
    let halfway = halfway(&full, &written);
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

on_brokers!(
    one_pass_over_a_wal_walfetch_wrote,
    one_pass_over_a_wal_librdkafka_wrote_with_indexes_built_by_scanning,
);
