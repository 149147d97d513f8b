//! The WAL writer against a real broker, Tansu 0.6: both layouts, one and
//! five requests in flight, idempotent; the log read back holds every
//! entry once, regions in append order, and the index's offsets and hints
//! are exact. And what Tansu does with a batch sent twice.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use walfetch::codec::Compression;
use walfetch::index::RegionId;
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};

use support::tansu::Tansu;
use support::wal_log::{check_written, read_log};

fn entries(count: usize) -> Vec<(RegionId, Bytes)> {
    (0..count)
        .map(|n| {
            let region = [1, 1, 1, 2, 2, 3, 4, 5, 6][n % 9] as RegionId;
            let payload = format!("entry {n} of region {region} {}", "y".repeat(n * 53 % 400));
            (region, Bytes::from(payload))
        })
        .collect()
}

#[tokio::test]
async fn writes_every_entry_once_in_order_with_exact_hints_on_tansu() {
    for (n, (mode, in_flight, compression)) in [
        (WriterMode::Clustered, 5, Compression::None),
        (WriterMode::Clustered, 5, Compression::Lz4),
        (WriterMode::Interleaved, 5, Compression::None),
        (WriterMode::Clustered, 1, Compression::None),
    ]
    .into_iter()
    .enumerate()
    {
        let tansu = Tansu::start().await;
        let topic = format!("wal{n}");
        let cluster = Arc::new(tansu.cluster_with_topic(&topic, 1).await);
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
                panic!("{mode:?} {in_flight} in flight: {e}\n{}", tansu.log_text())
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

/// Tansu's habit, which the scripted broker's
/// `DuplicateAnswer::DuplicateSequenceNumber` mode copies (and
/// `tests/writer_scripted.rs` drives the writer through): it keeps
/// idempotent producers' sequences, refuses a gap with
/// `OUT_OF_ORDER_SEQUENCE_NUMBER`, and answers a batch sent again with
/// `DUPLICATE_SEQUENCE_NUMBER`, without its offset (Kafka since 1.0 answers
/// with the original offset), and does not append it twice.
#[tokio::test]
async fn tansu_refuses_duplicates_with_duplicate_sequence_number() {
    use walfetch::codec::{BatchBuilder, NewRecord};
    use walfetch::error_code::ErrorCode;
    let tansu = Tansu::start().await;
    let cluster = Arc::new(tansu.cluster_with_topic("p", 1).await);
    let id = cluster.init_producer_id("p", 0).await.unwrap();
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
        answers.push(match cluster.produce("p", 0, batch(seq, n)).await {
            Ok(base) => Ok(base),
            Err(e) => Err(e.code().unwrap_or_else(|| panic!("{e}"))),
        });
    }
    let dup = Err(ErrorCode::DuplicateSequenceNumber);
    assert_eq!(
        answers,
        [
            Ok(0),
            dup,
            Ok(3),
            Err(ErrorCode::OutOfOrderSequenceNumber),
            dup,
            Ok(5),
            dup
        ]
    );
    let log = read_log(&cluster, "p", 0).await;
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
