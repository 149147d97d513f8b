//! The checks that what a WAL writer left in a partition (read back by
//! [`crate::partition_log`]) is exactly what was appended: each entry once,
//! at the offset its append returned, regions in append order, the index's
//! offsets and hints exact.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use walfetch::codec::{record_checksum_header, RECORD_CHECKSUM_HEADER};
use walfetch::index::{RegionId, WalIndex};

use crate::partition_log::{LogBatch, LogRecord};

/// The region of a record written by the WAL writer (its 8-byte key).
pub fn region_of(record: &LogRecord) -> RegionId {
    let key = record.key.as_ref().expect("a key");
    RegionId::from_be_bytes(key[..].try_into().expect("an 8-byte key"))
}

/// What a check found about the layout.
#[derive(Debug, Default)]
pub struct Layout {
    /// Batches holding one region.
    pub pure_batches: usize,
    /// Batches holding several.
    pub mixed_batches: usize,
    /// Producer ids seen on the writer's batches.
    pub producer_ids: HashSet<i64>,
}

/// Checks `log` against what was appended, in append order: `(region,
/// payload, offset the append returned)`, and against the writer's index.
/// Every record of the log must be one of `appended`, each exactly once.
/// `checksums`: whether records carry the per-record checksum header.
pub fn check_written(
    log: &[LogBatch],
    appended: &[(RegionId, Bytes, i64)],
    index: &WalIndex,
    checksums: bool,
) -> Layout {
    let mut layout = Layout::default();
    let mut at: BTreeMap<i64, (&LogBatch, &LogRecord)> = BTreeMap::new();
    for batch in log {
        let regions: HashSet<RegionId> = batch.records.iter().map(region_of).collect();
        if regions.len() == 1 {
            layout.pure_batches += 1;
        } else {
            layout.mixed_batches += 1;
        }
        layout.producer_ids.insert(batch.header.producer_id);
        for record in &batch.records {
            assert!(
                at.insert(record.offset, (batch, record)).is_none(),
                "offset {} twice in the log",
                record.offset
            );
        }
    }
    assert_eq!(
        at.len(),
        appended.len(),
        "the log holds {} records for {} entries appended (duplicates or losses)",
        at.len(),
        appended.len()
    );
    let mut last_of_region: BTreeMap<RegionId, i64> = BTreeMap::new();
    let mut expected_index: BTreeMap<RegionId, Vec<i64>> = BTreeMap::new();
    for (n, (region, payload, offset)) in appended.iter().enumerate() {
        let (batch, record) = at
            .get(offset)
            .unwrap_or_else(|| panic!("entry {n}: offset {offset} is not in the log"));
        assert_eq!(region_of(record), *region, "entry {n} at {offset}: region");
        assert_eq!(
            record.value.as_ref(),
            Some(payload),
            "entry {n} at {offset}: payload"
        );
        if let Some(previous) = last_of_region.insert(*region, *offset) {
            assert!(
                *offset > previous,
                "region {region}: entry {n} at {offset} is not after {previous} (append order lost)"
            );
        }
        expected_index.entry(*region).or_default().push(*offset);
        // The checksum header: first, and right.
        let sum = record
            .headers
            .iter()
            .find(|(k, _)| k == RECORD_CHECKSUM_HEADER.as_bytes());
        match checksums {
            true => {
                let want = record_checksum_header(record.key.as_deref(), record.value.as_deref());
                assert_eq!(
                    sum.and_then(|(_, v)| v.as_deref()),
                    Some(&want[..]),
                    "entry {n} at {offset}: checksum header"
                );
                assert_eq!(
                    record.headers[0].0,
                    RECORD_CHECKSUM_HEADER.as_bytes(),
                    "the checksum header comes first"
                );
            }
            false => assert!(sum.is_none(), "entry {n}: a checksum header when off"),
        }
        // The index: this entry, with exact hints.
        let entries = index
            .region(*region)
            .unwrap_or_else(|| panic!("region {region} not indexed"))
            .entries();
        let e = entries
            .iter()
            .find(|e| e.offset == *offset)
            .unwrap_or_else(|| panic!("entry {n} at {offset} not indexed"));
        let hint = e.hint.expect("the writer's hints");
        assert_eq!(
            hint.batch_base, batch.header.base_offset,
            "entry {n}: batch base"
        );
        assert_eq!(
            hint.batch_len as usize, batch.len,
            "entry {n}: batch length"
        );
        let want_end = match batch.compressed() {
            true => batch.len,
            false => record.end.expect("an uncompressed record's end"),
        };
        assert_eq!(hint.record_end as usize, want_end, "entry {n}: record end");
    }
    for (region, offsets) in &expected_index {
        let indexed: Vec<i64> = index
            .region(*region)
            .map(|r| r.entries().iter().map(|e| e.offset).collect())
            .unwrap_or_default();
        assert_eq!(&indexed, offsets, "region {region}: indexed offsets");
    }
    assert_eq!(
        index.len(),
        appended.len(),
        "the index holds entries never appended"
    );
    assert_eq!(
        index.last_index(),
        at.keys().next_back().copied(),
        "last_index"
    );
    layout
}
