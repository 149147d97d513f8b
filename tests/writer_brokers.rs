//! The WAL writer against the real brokers, Apache Kafka and Tansu 0.6 (one
//! test body on each): both layouts, one and five requests in flight,
//! idempotent; the log read back holds every entry once, regions in append
//! order, and the index's offsets and hints are exact. And what each broker
//! does with a batch sent twice.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use walfetch::codec::Compression;
use walfetch::index::RegionId;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};

use walfetch_support::broker::{BrokerKind, TestBroker};
use walfetch_support::on_brokers;
use walfetch_support::partition_log::read_log;
use walfetch_support::wal_log::check_written;

fn entries(count: usize) -> Vec<(RegionId, Bytes)> {
    (0..count)
        .map(|n| {
            let region = [1, 1, 1, 2, 2, 3, 4, 5, 6][n % 9] as RegionId;
            let payload = format!("entry {n} of region {region} {}", "y".repeat(n * 53 % 400));
            (region, Bytes::from(payload))
        })
        .collect()
}

async fn writes_every_entry_once_in_order_with_exact_hints(broker: &TestBroker) {
    for (n, (mode, in_flight, compression)) in [
        (WriterMode::Clustered, 5, Compression::None),
        (WriterMode::Clustered, 5, Compression::Lz4),
        (WriterMode::Interleaved, 5, Compression::None),
        (WriterMode::Clustered, 1, Compression::None),
    ]
    .into_iter()
    .enumerate()
    {
        let topic = broker.topic(&format!("wal{n}"));
        let cluster = Arc::new(broker.cluster_with_topic(&topic, 1).await);
        let config = WriterConfig::new(topic.clone(), 0)
            .with_mode(mode)
            .with_max_in_flight(in_flight)
            .with_compression(compression)
            .with_max_batch_bytes(4 << 10)
            .with_linger(Duration::from_millis(3));
        let writer = WalWriter::new(Arc::clone(&cluster), config);
        let mut pending = Vec::new();
        for (region, payload) in entries(800) {
            let appended = writer
                .append(WalEntry::new(region, payload.clone()))
                .await
                .unwrap();
            pending.push((region, payload, appended));
        }
        let mut appended = Vec::new();
        for (region, payload, offset) in pending {
            let offset = offset.await.unwrap_or_else(|e| {
                panic!("{mode:?} {in_flight} in flight: {e}\n{}", broker.log_text())
            });
            appended.push((region, payload, offset));
        }
        let index = writer.close().await.unwrap();
        let log = read_log(&cluster, &topic, 0).await;
        let layout = check_written(&log, &appended, &index, true);
        if mode == WriterMode::Clustered {
            assert_eq!(layout.mixed_batches, 0, "{layout:?}");
        }
        assert!(
            layout.producer_ids.iter().all(|id| *id >= 0),
            "idempotent batches carry the producer id: {layout:?}"
        );
    }
}

/// Both brokers keep idempotent producers' sequences, refuse a gap with
/// `OUT_OF_ORDER_SEQUENCE_NUMBER` and do not append a batch sent again.
/// They answer that batch differently: Kafka (since 1.0, for any of the
/// producer's last five batches) with `NONE` and the offset it was first
/// written at; Tansu with `DUPLICATE_SEQUENCE_NUMBER` and no offset, which
/// the scripted broker's `DuplicateAnswer::DuplicateSequenceNumber` mode
/// copies (and `tests/writer_scripted.rs` drives the writer through).
async fn a_batch_sent_twice_is_written_once(broker: &TestBroker) {
    use walfetch::codec::{BatchBuilder, NewRecord};
    use walfetch::error_code::ErrorCode;
    let p: &str = &broker.topic("p");
    let cluster = Arc::new(broker.cluster_with_topic(p, 1).await);
    let id = cluster.init_producer_id(p, 0).await.unwrap();
    let batch = |seq: i32, n: i32| {
        let records: Vec<NewRecord> = (0..n)
            .map(|i| NewRecord::value(i, format!("s{seq}-{i}")))
            .collect();
        BatchBuilder::new(0)
            .producer(id.id, id.epoch, seq)
            .encode(&records)
            .unwrap()
            .bytes
    };
    let mut answers = Vec::new();
    for (seq, n) in [(0, 3), (0, 3), (3, 2), (7, 1), (3, 2), (5, 1), (0, 3)] {
        answers.push(match cluster.produce(p, 0, batch(seq, n)).await {
            Ok(base) => Ok(base),
            Err(e) => Err(e.code().unwrap_or_else(|| panic!("{e}"))),
        });
    }
    // What a batch sent again at `offset` is answered with.
    let dup = |offset: i64| match broker.kind() {
        BrokerKind::Kafka => Ok(offset),
        BrokerKind::Tansu => Err(ErrorCode::DuplicateSequenceNumber),
    };
    assert_eq!(
        answers,
        [
            Ok(0),
            dup(0),
            Ok(3),
            Err(ErrorCode::OutOfOrderSequenceNumber),
            dup(3),
            Ok(5),
            dup(0)
        ],
        "on {}",
        broker.name()
    );
    let log = read_log(&cluster, p, 0).await;
    let batches: Vec<(i64, i32, usize)> = log
        .iter()
        .map(|b| {
            (
                b.header.base_offset,
                b.header.base_sequence,
                b.records.len(),
            )
        })
        .collect();
    assert_eq!(batches, [(0, 0, 3), (3, 3, 2), (5, 5, 1)]);
}

on_brokers!(
    writes_every_entry_once_in_order_with_exact_hints,
    a_batch_sent_twice_is_written_once,
);
