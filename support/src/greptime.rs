//! A WAL written the way GreptimeDB's Kafka log store writes it, and its
//! index file, for tests of walfetch on GreptimeDB's own records.

use std::collections::BTreeMap;

use bytes::Bytes;
use walfetch::cluster::Cluster;
use walfetch::codec::{BatchBuilder, Compression, NewRecord};
use walfetch::index::RegionId;

/// Each region's records, in offset order: `(offset, value)`.
pub type GreptimeWal = BTreeMap<RegionId, Vec<(i64, Bytes)>>;

/// A record key as GreptimeDB writes it: its record meta (`RecordMeta`),
/// serialized by serde_json in its struct's field order.
pub fn key(tp: &str, entry_id: u64, region: RegionId, topic: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"version":0,"tp":{tp},"entry_id":{entry_id},"ns":{{"region_id":{region},"topic":"{topic}"}}}}"#
    ))
}

/// GreptimeDB's records of the `n`th entry of the test WAL: its region
/// (GreptimeDB-style ids, table 1024, regions 0 to 4) and each record's key
/// and value. Every thirteenth entry is too large for one record and split
/// into First, Middle and Last records.
pub fn entry(n: u64, topic: &str) -> (RegionId, Vec<(Bytes, Bytes)>) {
    let region = 4_398_046_511_104 + (n * 31 % 5);
    let parts: &[&str] = match n % 13 {
        5 => &[r#""First""#, r#"{"Middle":1}"#, r#""Last""#],
        _ => &[r#""Full""#],
    };
    let records = parts
        .iter()
        .enumerate()
        .map(|(i, tp)| {
            let value = format!("entry {n} part {i} {}", "v".repeat((n % 50) as usize));
            (key(tp, n, region, topic), Bytes::from(value))
        })
        .collect();
    (region, records)
}

/// Writes `entries` entries ([`entry`]) to `topic` partition 0 as
/// GreptimeDB does: after the no-op record its metasrv writes into every
/// topic it creates (neither key nor value, lz4: `append_noop_record`),
/// each region's write request its own lz4 batch (its own produce
/// request), the region in the record key's meta.
pub async fn write(cluster: &Cluster, topic: &str, entries: u64) -> GreptimeWal {
    let noop = BatchBuilder::new(0)
        .compression(Compression::Lz4)
        .encode(&[NewRecord {
            offset_delta: 0,
            timestamp: 1_700_000_000_000,
            key: None,
            value: None,
            headers: Vec::new(),
        }])
        .expect("a no-op batch encodes");
    cluster
        .produce(topic, 0, noop.bytes)
        .await
        .expect("the no-op record is produced");
    let mut written = GreptimeWal::new();
    for n in 0..entries {
        let (region, parts) = entry(n, topic);
        let records: Vec<NewRecord> = (0..)
            .zip(&parts)
            .map(|(i, (key, value))| NewRecord {
                offset_delta: i,
                timestamp: 1_700_000_000_000,
                key: Some(key.clone()),
                value: Some(value.clone()),
                headers: Vec::new(),
            })
            .collect();
        let batch = BatchBuilder::new(0)
            .compression(Compression::Lz4)
            .encode(&records)
            .expect("a GreptimeDB batch encodes");
        let base = cluster
            .produce(topic, 0, batch.bytes)
            .await
            .expect("a GreptimeDB batch is produced");
        let offsets = (base..).zip(parts.into_iter().map(|(_, value)| value));
        written.entry(region).or_default().extend(offsets);
    }
    written
}

/// GreptimeDB's `index.json` for `topic` as GreptimeDB dumps it when the
/// log ends at `last_index`: its `last_index` is that log end offset
/// (exclusive: what its worker's `get_offset(OffsetAt::Latest)` returned),
/// and each region lists its offsets below it, delta-encoded (the first
/// absolute).
pub fn index_json(topic: &str, written: &GreptimeWal, last_index: i64) -> String {
    let regions: serde_json::Map<String, serde_json::Value> = written
        .iter()
        .map(|(region, entries)| {
            let offsets = entries.iter().map(|(o, _)| *o).filter(|o| *o < last_index);
            let deltas: Vec<i64> = offsets
                .scan(0, |previous, o| {
                    let delta = o - *previous;
                    *previous = o;
                    Some(delta)
                })
                .collect();
            (region.to_string(), serde_json::json!(deltas))
        })
        .collect();
    serde_json::json!({ topic: { "regions": regions, "last_index": last_index } }).to_string()
}

/// The offset past the last record of `written`.
pub fn end(written: &GreptimeWal) -> i64 {
    written
        .values()
        .flatten()
        .map(|(o, _)| o + 1)
        .max()
        .unwrap_or(0)
}
