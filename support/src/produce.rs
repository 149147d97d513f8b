//! Sample batches produced to a partition, and the offsets of the batches a
//! Fetch response carries.

use bytes::Bytes;
use walfetch::cluster::{Cluster, IsolationLevel, OffsetSpec};
use walfetch::codec::{
    BatchBuilder, Batches, Compression, DecodeOptions, NewRecord, SnappyFraming,
};

/// Every compression a batch can be written with, Snappy in both framings
/// (Xerial's, as the Java client writes it, and raw).
pub const EVERY_CODEC: [(Compression, SnappyFraming); 6] = [
    (Compression::None, SnappyFraming::Xerial),
    (Compression::Gzip, SnappyFraming::Xerial),
    (Compression::Snappy, SnappyFraming::Xerial),
    (Compression::Snappy, SnappyFraming::Raw),
    (Compression::Lz4, SnappyFraming::Xerial),
    (Compression::Zstd, SnappyFraming::Xerial),
];

/// `records` records of batch `batch`: values `b{batch}-r{i}` padded with
/// `.` to `value_len` bytes, timestamps `1000 * batch + i`.
pub fn sample_records(batch: usize, records: i32, value_len: usize) -> Vec<NewRecord> {
    (0..records)
        .map(|i| {
            let mut value = format!("b{batch}-r{i}").into_bytes();
            value.resize(value_len.max(value.len()), b'.');
            NewRecord {
                offset_delta: i,
                timestamp: 1000 * batch as i64 + i64::from(i),
                value: Some(value.into()),
                ..NewRecord::default()
            }
        })
        .collect()
}

/// Produces `batches` uncompressed batches of `records` records each to
/// partition 0 of `topic`; returns each batch's assigned base offset and
/// its bytes as produced.
pub async fn produce_batches(
    cluster: &Cluster,
    topic: &str,
    batches: usize,
    records: i32,
    value_len: usize,
) -> Vec<(i64, Bytes)> {
    let mut out = Vec::new();
    for b in 0..batches {
        let encoded = BatchBuilder::new(0)
            .encode(&sample_records(b, records, value_len))
            .expect("encode batch");
        let base = cluster
            .produce(topic, 0, encoded.bytes.clone())
            .await
            .unwrap_or_else(|e| panic!("produce batch {b}: {e}"));
        out.push((base, encoded.bytes));
    }
    out
}

/// `(base offset, last offset)` of every complete batch in a Fetch
/// response's records; panics on a partial or corrupt batch.
pub fn batch_offsets(records: &Bytes) -> Vec<(i64, i64)> {
    let mut batches = Batches::new(records.clone(), DecodeOptions::default());
    let offsets = batches
        .by_ref()
        .map(|b| {
            let b = b.expect("complete, valid batch");
            (b.header().base_offset, b.header().last_offset())
        })
        .collect();
    assert!(
        batches.partial().is_none(),
        "unexpected partial batch: {:?}",
        batches.partial()
    );
    offsets
}

/// The latest offset ListOffsets answers for `topic`/`partition`
/// (read-uncommitted): Kafka's high watermark.
pub async fn latest_offset(cluster: &Cluster, topic: &str, partition: i32) -> Option<i64> {
    cluster
        .list_offsets(
            topic,
            partition,
            OffsetSpec::Latest,
            IsolationLevel::ReadUncommitted,
        )
        .await
        .unwrap_or_else(|e| panic!("ListOffsets of {topic}/{partition}: {e}"))
        .offset
}
