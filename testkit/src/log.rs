//! One partition's log, in memory: encoded record batches back to back, the
//! offsets that bound them, and the transaction state computed from them.
//!
//! The log end offset is also the high watermark (every replica is in sync).
//! The last stable offset is the first offset of the earliest transaction
//! that has no marker yet; the aborted-transaction index lists, per aborted
//! transaction, its producer, first offset and the offset of its abort
//! marker, as Kafka's `.txnindex` does.
//!
//! # References
//! - Kafka documentation, "Message Format" (record batches, control batches).
//! - KIP-98 (transactions: last stable offset, aborted transaction index).
//! - KIP-107 (log start offset).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use walfetch_codec::{BatchHeader, Batches, ControlType, DecodeOptions, Error as CodecError};

use crate::fetch_rules::{self, BatchExtent, OffsetOutOfRange, ReadBounds, ReadRequest, ReadSlice};
use crate::segments::{Layout, SegmentCarry};

/// Why a batch could not be appended.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// The bytes are not one valid record batch.
    #[error("invalid record batch: {0}")]
    Codec(#[from] CodecError),
    /// The buffer holds no complete batch, or a batch cut short.
    #[error("{0}")]
    Incomplete(String),
    /// The buffer holds more than one batch where one was expected.
    #[error("expected one record batch, found more")]
    SeveralBatches,
    /// An explicit base offset is below the log end offset.
    #[error("batch base offset {base_offset} is below the log end offset {log_end_offset}")]
    OffsetBelowLogEnd {
        /// The batch's base offset.
        base_offset: i64,
        /// The log end offset.
        log_end_offset: i64,
    },
}

/// An aborted transaction: what a Fetch response's `aborted_transactions`
/// lists when it overlaps the returned records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbortedTxn {
    /// The producer that aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch.
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
}

/// A log's segment layout, kept between reads (a clone starts without).
#[derive(Default)]
struct LayoutCache(Mutex<Option<Layout>>);

impl Clone for LayoutCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for LayoutCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LayoutCache")
    }
}

/// A batch stored in the log.
#[derive(Debug, Clone)]
pub struct StoredBatch {
    /// The batch header, as stored.
    pub header: BatchHeader,
    /// The whole batch.
    pub bytes: Bytes,
}

impl StoredBatch {
    /// Its records, `(offset, timestamp)` in order; `None` if they do not
    /// decode (a batch is checked when appended, so only a bug would do).
    fn records(&self) -> Option<Vec<(i64, i64)>> {
        let decoded = Batches::new(self.bytes.clone(), DecodeOptions::default())
            .next()?
            .ok()?;
        decoded
            .records()
            .ok()?
            .map(|r| r.ok().map(|r| (r.offset(), r.timestamp())))
            .collect()
    }
}

/// One partition's log.
#[derive(Debug, Clone, Default)]
pub struct PartitionLog {
    batches: Vec<StoredBatch>,
    extents: Vec<BatchExtent>,
    log_start_offset: i64,
    log_end_offset: i64,
    /// Sizes of the batches a moved log start removed, in order: the
    /// layout of the segment the first stored batch is in.
    removed: Vec<usize>,
    /// The segment layout of the stored batches, for the segment size
    /// last read with, extended as batches are appended.
    layout: LayoutCache,
    /// Producer id → first offset of its open transaction.
    open_txns: BTreeMap<i64, i64>,
    aborted: Vec<AbortedTxn>,
}

impl PartitionLog {
    /// An empty log starting at offset 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log whose first offset will be `offset` (as after retention
    /// deleted everything before it).
    pub fn starting_at(offset: i64) -> Self {
        Self {
            log_start_offset: offset,
            log_end_offset: offset,
            ..Self::default()
        }
    }

    /// The log start offset.
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    /// The log end offset, which is also the high watermark.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// The high watermark: every appended batch is committed at once.
    pub fn high_watermark(&self) -> i64 {
        self.log_end_offset
    }

    /// The last stable offset: the first offset of the earliest open
    /// transaction, or the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.open_txns
            .values()
            .copied()
            .min()
            .map_or(self.high_watermark(), |first| {
                first.min(self.high_watermark())
            })
    }

    /// The stored batches, in offset order.
    pub fn batches(&self) -> &[StoredBatch] {
        &self.batches
    }

    /// Where each batch lies (positions count from the first stored batch).
    pub fn extents(&self) -> &[BatchExtent] {
        &self.extents
    }

    /// Size of the stored batches, in bytes.
    pub fn size(&self) -> usize {
        self.extents.last().map_or(0, BatchExtent::end)
    }

    /// The aborted transactions computed from the log's markers.
    pub fn aborted_transactions(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Appends one encoded batch, assigning it the next offset: its
    /// `baseOffset` is rewritten to the log end offset and its
    /// `partitionLeaderEpoch` to `leader_epoch` (neither is covered by the
    /// CRC). Returns the assigned base offset.
    pub fn append(&mut self, batch: Bytes, leader_epoch: i32) -> Result<i64, AppendError> {
        let base_offset = self.log_end_offset;
        let mut bytes = BytesMut::from(&batch[..]);
        if bytes.len() < 16 {
            return Err(AppendError::Incomplete(format!(
                "{} bytes cannot hold a batch header",
                bytes.len()
            )));
        }
        bytes[0..8].copy_from_slice(&base_offset.to_be_bytes());
        bytes[12..16].copy_from_slice(&leader_epoch.to_be_bytes());
        self.push(bytes.freeze())?;
        Ok(base_offset)
    }

    /// Appends one encoded batch as it is, keeping its `baseOffset`, which
    /// must not be below the log end offset; the offsets in between are left
    /// as a gap (as compaction leaves them). Returns the base offset.
    pub fn append_at(&mut self, batch: Bytes) -> Result<i64, AppendError> {
        self.push(batch)
    }

    fn push(&mut self, bytes: Bytes) -> Result<i64, AppendError> {
        let mut iter = Batches::new(bytes.clone(), DecodeOptions::default());
        let batch = match iter.next() {
            Some(batch) => batch?,
            None => {
                return Err(AppendError::Incomplete(match iter.partial() {
                    Some(p) => format!(
                        "batch cut short: {} bytes present of {:?} needed",
                        p.present(),
                        p.needed()
                    ),
                    None => "no record batch".into(),
                }))
            }
        };
        if iter.next().is_some() || iter.partial().is_some() || iter.position() != bytes.len() {
            return Err(AppendError::SeveralBatches);
        }
        let header = *batch.header();
        if header.base_offset < self.log_end_offset {
            return Err(AppendError::OffsetBelowLogEnd {
                base_offset: header.base_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let control = batch.control_record()?;
        self.track_transaction(&header, control.map(|c| c.kind));
        let extent = BatchExtent::from_header(&header, self.size());
        self.extents.push(extent);
        self.batches.push(StoredBatch { header, bytes });
        self.log_end_offset = extent.next_offset();
        Ok(header.base_offset)
    }

    fn track_transaction(&mut self, header: &BatchHeader, control: Option<ControlType>) {
        if !header.is_transactional() || header.producer_id < 0 {
            return;
        }
        let pid = header.producer_id;
        match control {
            // An empty control batch (what Kafka's log cleaner keeps of a
            // producer's last marker) begins and ends nothing, as in
            // Kafka's producer state.
            None if header.is_control() => {}
            None => {
                self.open_txns.entry(pid).or_insert(header.base_offset);
            }
            Some(kind) => {
                if let Some(first_offset) = self.open_txns.remove(&pid) {
                    if kind == ControlType::Abort {
                        self.aborted.push(AbortedTxn {
                            producer_id: pid,
                            first_offset,
                            last_offset: header.base_offset,
                        });
                    }
                }
            }
        }
    }

    /// Truncates the log to `offset` (an unclean leader election): batches
    /// whose base offset is at or past it are dropped, and the log end
    /// moves back to the first dropped batch's base offset. Open
    /// transactions are forgotten, and aborted ones past the new end.
    pub fn truncate_to(&mut self, offset: i64) {
        self.layout = LayoutCache::default();
        let keep = self.extents.partition_point(|e| e.base_offset < offset);
        self.batches.truncate(keep);
        self.extents.truncate(keep);
        self.log_end_offset = self
            .extents
            .last()
            .map_or(self.log_start_offset, |e| e.next_offset());
        self.open_txns.clear();
        self.aborted.retain(|t| t.last_offset < self.log_end_offset);
    }

    /// Moves the log start offset forward to `offset` (DeleteRecords,
    /// retention): batches wholly below it are dropped; a batch that
    /// contains it stays, so a fetch at the new start offset still returns
    /// that batch from its first byte. Positions restart at the first kept
    /// batch, but the segments keep their layout (Kafka deletes whole
    /// segments only: the sizes of the dropped batches are remembered). An
    /// offset past the log end empties the log and moves the end.
    pub fn advance_log_start(&mut self, offset: i64) {
        if offset <= self.log_start_offset {
            return;
        }
        self.layout = LayoutCache::default();
        self.log_start_offset = offset;
        if offset >= self.log_end_offset {
            // Every segment goes; the next batch begins a new one.
            self.batches.clear();
            self.extents.clear();
            self.removed.clear();
            self.log_end_offset = offset;
            self.open_txns.clear();
            self.aborted.clear();
            return;
        }
        let keep = self.extents.partition_point(|e| e.last_offset < offset);
        self.removed
            .extend(self.extents[..keep].iter().map(|e| e.len));
        self.batches.drain(..keep);
        let mut position = 0;
        self.extents = self
            .batches
            .iter()
            .map(|b| {
                let extent = BatchExtent::from_header(&b.header, position);
                position += extent.len;
                extent
            })
            .collect();
        self.aborted.retain(|t| t.last_offset >= offset);
    }

    /// Reads the log under `request`'s rules, up to `upper_bound` (the high
    /// watermark, or the last stable offset for `read_committed`).
    pub fn read(
        &self,
        request: ReadRequest,
        upper_bound: i64,
    ) -> Result<ReadSlice, OffsetOutOfRange> {
        let segment_bytes = request.habits.segment_bytes;
        let mut cached = self.layout.0.lock().unwrap_or_else(PoisonError::into_inner);
        let layout = match cached.take() {
            Some(mut layout) if layout.segment_bytes() == segment_bytes => {
                layout.extend(&self.extents);
                layout
            }
            _ => {
                let carry = SegmentCarry::after(self.removed.iter().copied(), segment_bytes);
                Layout::new(&self.extents, carry, segment_bytes)
            }
        };
        let bounds = ReadBounds {
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
            upper_bound: upper_bound.min(self.high_watermark()),
            carry: layout.carry(),
        };
        let slice = fetch_rules::read_laid_out(&self.extents, &layout, bounds, request);
        *cached = Some(layout);
        slice
    }

    /// The log bytes in `range` (positions as in [`PartitionLog::extents`]),
    /// in one buffer; a range inside one batch is a slice of it, without a
    /// copy.
    pub fn bytes(&self, range: Range<usize>) -> Bytes {
        if range.is_empty() {
            return Bytes::new();
        }
        let first = self.extents.partition_point(|e| e.end() <= range.start);
        if let (Some(extent), Some(batch)) = (self.extents.get(first), self.batches.get(first)) {
            if range.end <= extent.end() {
                return batch
                    .bytes
                    .slice(range.start - extent.position..range.end - extent.position);
            }
        }
        let mut out = BytesMut::with_capacity(range.len());
        for (extent, batch) in self.extents[first..].iter().zip(&self.batches[first..]) {
            if extent.position >= range.end {
                break;
            }
            let from = range.start.saturating_sub(extent.position);
            let to = (range.end - extent.position).min(extent.len);
            out.extend_from_slice(&batch.bytes[from..to]);
        }
        out.freeze()
    }

    /// All stored batches back to back, as a segment file holds them.
    pub fn to_bytes(&self) -> Bytes {
        self.bytes(0..self.size())
    }

    /// The aborted transactions that overlap offsets `[from, to)`: those
    /// whose abort marker is at or after `from` and whose first offset is
    /// before `to`.
    pub fn aborted_overlapping(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted
            .iter()
            .filter(|t| t.last_offset >= from && t.first_offset < to)
            .copied()
            .collect()
    }

    /// The leader epoch of the batch that holds `offset` (or of the first
    /// batch after it), if any.
    pub fn epoch_at(&self, offset: i64) -> Option<i32> {
        let index = self.extents.partition_point(|e| e.last_offset < offset);
        self.batches
            .get(index)
            .map(|b| b.header.partition_leader_epoch)
    }

    /// The first record at or after `log start` whose timestamp is at least
    /// `timestamp`, below `upper_bound`: `(offset, timestamp, leader epoch)`.
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
        upper_bound: i64,
    ) -> Option<(i64, i64, i32)> {
        for batch in &self.batches {
            if batch.header.max_timestamp < timestamp {
                continue;
            }
            for (offset, ts) in batch.records()? {
                if offset >= upper_bound {
                    return None;
                }
                if ts >= timestamp && offset >= self.log_start_offset {
                    return Some((offset, ts, batch.header.partition_leader_epoch));
                }
            }
        }
        None
    }

    /// The first record with the largest timestamp below `upper_bound`:
    /// `(offset, timestamp, leader epoch)`.
    pub fn max_timestamp(&self, upper_bound: i64) -> Option<(i64, i64, i32)> {
        let mut best: Option<(i64, i64, i32)> = None;
        for batch in &self.batches {
            if batch.header.base_offset >= upper_bound {
                break;
            }
            if best.is_some_and(|(_, ts, _)| batch.header.max_timestamp <= ts) {
                continue;
            }
            for (offset, ts) in batch.records()? {
                if offset < self.log_start_offset || offset >= upper_bound {
                    continue;
                }
                if best.is_none_or(|(_, best_ts, _)| ts > best_ts) {
                    best = Some((offset, ts, batch.header.partition_leader_epoch));
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use walfetch_codec::{BatchBuilder, NewRecord};

    fn batch(n: i32) -> Bytes {
        let records: Vec<_> = (0..n)
            .map(|i| NewRecord {
                offset_delta: i,
                timestamp: 1000 + i64::from(i),
                value: Some(Bytes::from(vec![b'x'; 10])),
                ..NewRecord::default()
            })
            .collect();
        BatchBuilder::new(0).encode(&records).expect("encode").bytes
    }

    fn txn(pid: i64, n: i32) -> Bytes {
        let records: Vec<_> = (0..n).map(|i| NewRecord::value(i, "t")).collect();
        BatchBuilder::new(0)
            .producer(pid, 0, 0)
            .transactional(true)
            .encode(&records)
            .expect("encode")
            .bytes
    }

    fn marker(pid: i64, kind: ControlType) -> Bytes {
        BatchBuilder::new(0)
            .producer(pid, 0, -1)
            .encode_marker(kind, 0, 0)
            .expect("encode")
            .bytes
    }

    #[test]
    fn a_moved_log_start_keeps_the_segments_where_they_were() {
        use crate::fetch_rules::Habits;
        let mut log = PartitionLog::new();
        for _ in 0..6 {
            log.append(batch(1), 0).expect("append");
        }
        let len = log.extents()[0].len;
        // Segments of two batches: [0, 1] [2, 3] [4, 5].
        let request = ReadRequest {
            habits: Habits {
                segment_bytes: u32::try_from(2 * len).expect("small"),
                ..Habits::KAFKA
            },
            ..ReadRequest::kafka(3, 10 * len)
        };
        let before = log.read(request, i64::MAX).expect("in range");
        assert_eq!(before.batches, 3..4, "offset 3 ends its segment");
        log.advance_log_start(1);
        let after = log.read(request, i64::MAX).expect("in range");
        // Batch 0 is gone, but offset 3 still ends its segment (counted
        // from the first kept batch, the read would run to offset 4).
        assert_eq!(after.batches.len(), 1);
        assert_eq!(log.extents()[after.batches.start].base_offset, 3);
    }

    #[test]
    fn append_assigns_offsets_and_keeps_the_crc_valid() {
        let mut log = PartitionLog::new();
        assert_eq!(log.append(batch(3), 7).ok(), Some(0));
        assert_eq!(log.append(batch(2), 7).ok(), Some(3));
        assert_eq!(log.high_watermark(), 5);
        let all: Vec<_> = Batches::new(log.to_bytes(), DecodeOptions::default())
            .map(|b| b.map(|b| (b.base_offset(), b.header().partition_leader_epoch)))
            .collect::<Result<_, _>>()
            .expect("valid CRCs");
        assert_eq!(all, vec![(0, 7), (3, 7)]);
    }

    #[test]
    fn append_at_leaves_a_gap_and_refuses_going_back() {
        let mut log = PartitionLog::new();
        log.append(batch(2), 0).expect("append");
        let at_ten = BatchBuilder::new(10)
            .encode(&[NewRecord::value(0, "a")])
            .expect("encode");
        assert_eq!(log.append_at(at_ten.bytes.clone()).ok(), Some(10));
        assert_eq!(log.high_watermark(), 11);
        assert!(matches!(
            log.append_at(at_ten.bytes),
            Err(AppendError::OffsetBelowLogEnd { .. })
        ));
    }

    #[test]
    fn append_rejects_garbage_and_partial_batches() {
        let mut log = PartitionLog::new();
        assert!(log.append(Bytes::from_static(b"short"), 0).is_err());
        let whole = batch(2);
        assert!(matches!(
            log.append(whole.slice(..whole.len() - 1), 0),
            Err(AppendError::Incomplete(_))
        ));
        let mut two = whole.to_vec();
        two.extend_from_slice(&whole);
        assert!(matches!(
            log.append(two.into(), 0),
            Err(AppendError::SeveralBatches)
        ));
        let mut corrupt = whole.to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(matches!(
            log.append(corrupt.into(), 0),
            Err(AppendError::Codec(_))
        ));
        assert_eq!(log.high_watermark(), 0);
    }

    #[test]
    fn transactions_set_lso_and_aborted_index() {
        let mut log = PartitionLog::new();
        log.append(batch(2), 0).expect("append"); // 0..=1
        log.append(txn(7, 2), 0).expect("append"); // 2..=3, pid 7 opens
        log.append(txn(8, 1), 0).expect("append"); // 4, pid 8 opens
        assert_eq!(log.last_stable_offset(), 2);
        log.append(marker(7, ControlType::Abort), 0)
            .expect("append"); // 5
        assert_eq!(log.last_stable_offset(), 4);
        log.append(marker(8, ControlType::Commit), 0)
            .expect("append"); // 6
        assert_eq!(log.last_stable_offset(), 7);
        assert_eq!(
            log.aborted_transactions(),
            &[AbortedTxn {
                producer_id: 7,
                first_offset: 2,
                last_offset: 5
            }]
        );
        assert_eq!(log.aborted_overlapping(0, 2).len(), 0);
        assert_eq!(log.aborted_overlapping(0, 3).len(), 1);
        assert_eq!(log.aborted_overlapping(6, 7).len(), 0);
    }

    #[test]
    fn bytes_spans_batches_and_slices_within_one() {
        let mut log = PartitionLog::new();
        log.append(batch(2), 0).expect("append");
        log.append(batch(2), 0).expect("append");
        let whole = log.to_bytes();
        let first_len = log.extents()[0].len;
        assert_eq!(log.bytes(5..20), whole.slice(5..20));
        assert_eq!(
            log.bytes(first_len - 3..first_len + 4),
            whole.slice(first_len - 3..first_len + 4)
        );
        assert_eq!(log.bytes(0..whole.len()), whole);
    }

    #[test]
    fn advance_log_start_keeps_the_containing_batch() {
        let mut log = PartitionLog::new();
        log.append(batch(3), 0).expect("append"); // 0..=2
        log.append(batch(3), 0).expect("append"); // 3..=5
        log.advance_log_start(4);
        assert_eq!(log.log_start_offset(), 4);
        assert_eq!(log.extents().len(), 1);
        assert_eq!(log.extents()[0].position, 0);
        assert!(log.read(ReadRequest::kafka(3, 100), i64::MAX).is_err());
        let slice = log
            .read(ReadRequest::kafka(4, 1 << 20), i64::MAX)
            .expect("in range");
        assert_eq!(slice.bytes, 0..log.size());
    }

    #[test]
    fn timestamps() {
        let mut log = PartitionLog::new();
        log.append(batch(3), 2).expect("append"); // ts 1000..=1002 at 0..=2
        log.append(batch(3), 3).expect("append"); // ts 1000..=1002 at 3..=5
        assert_eq!(log.offset_for_timestamp(1001, i64::MAX), Some((1, 1001, 2)));
        assert_eq!(log.offset_for_timestamp(0, i64::MAX), Some((0, 1000, 2)));
        assert_eq!(log.offset_for_timestamp(5000, i64::MAX), None);
        assert_eq!(log.max_timestamp(i64::MAX), Some((2, 1002, 2)));
        assert_eq!(log.epoch_at(4), Some(3));
    }
}
