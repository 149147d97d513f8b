//! Transactions as a transactional producer writes them: its batches, and
//! the control batch (commit or abort marker) that ends them.

use bytes::Bytes;
use walfetch::codec::{BatchBuilder, ControlType, EncodedBatch, NewRecord};

/// A transactional batch of `records` by producer `producer_id` (epoch 0,
/// first sequence 0).
pub fn transactional_batch(producer_id: i64, records: &[NewRecord]) -> EncodedBatch {
    BatchBuilder::new(0)
        .producer(producer_id, 0, 0)
        .transactional(true)
        .encode(records)
        .unwrap()
}

/// The marker (`kind`: commit or abort) that ends producer `producer_id`'s
/// transaction, at sequence `sequence` (coordinator epoch 0).
pub fn transaction_marker(producer_id: i64, sequence: i32, kind: ControlType) -> EncodedBatch {
    BatchBuilder::new(0)
        .producer(producer_id, 0, sequence)
        .encode_marker(kind, 0, 0)
        .unwrap()
}

/// `count` records of region `region` (its id the 8-byte big-endian key),
/// their values `"{tag} 0"`, `"{tag} 1"`, …
pub fn region_records(region: u64, tag: &str, count: i32) -> Vec<NewRecord> {
    let key = Bytes::copy_from_slice(&region.to_be_bytes());
    (0..count)
        .map(|i| NewRecord {
            offset_delta: i,
            key: Some(key.clone()),
            value: Some(Bytes::from(format!("{tag} {i}"))),
            ..NewRecord::default()
        })
        .collect()
}
