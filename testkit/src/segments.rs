//! How Kafka lays a partition log out in segment files, and the sparse
//! offset index of each: a pure function of the sizes of the batches in
//! the order they were appended.
//!
//! - A segment is rolled where the next append would take it past
//!   `log.segment.bytes`; an append into an empty segment never rolls, so
//!   a batch larger than the limit gets a segment of its own.
//! - Within a segment, an append gets an offset index entry (its last
//!   offset, its position) when more than `index.interval.bytes` were
//!   appended since the segment's previous entry (or its start); the
//!   segment's first append never gets one.
//!
//! A read returns bytes of one segment only, and Kafka bounds the aborted
//! transactions it lists with the index: by the first entry at or past
//! the end of the bytes read, else the next segment's base offset, else
//! the log end offset. The bound is coarser than the returned batches, so
//! Kafka lists aborted transactions that begin after them.
//!
//! Each batch is taken as one append (one Produce of one batch, or one
//! control batch), as the scripted broker stores them. Segments rolled by
//! time (`segment.ms`, 7 days) are not modelled.
//!
//! # References
//! - Apache Kafka `LogSegment.append` (the index entry), `LogSegment`
//!   `shouldRoll` (the size rule), `OffsetIndex.fetchUpperBoundOffset`,
//!   `LocalLog.addAbortedTransactions` (the bound and its fallbacks).

use crate::fetch_rules::BatchExtent;

/// Kafka's default `index.interval.bytes`.
pub const INDEX_INTERVAL_BYTES: usize = 4096;

/// Where a log's first stored batch stands in its segment: what was
/// appended to that segment before it, in batches since removed from the
/// log (a log start moved by DeleteRecords or retention; Kafka deletes
/// whole segments only, so the segment's layout does not change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SegmentCarry {
    /// Bytes in the segment before the first stored batch.
    pub bytes: usize,
    /// Bytes appended since the segment's last index entry (or start).
    pub since_index_entry: usize,
}

impl SegmentCarry {
    /// The carry after batches of `sizes` (in append order) were appended
    /// and then removed from the log, under `segment_bytes` (0: one
    /// segment).
    pub fn after(sizes: impl IntoIterator<Item = usize>, segment_bytes: u32) -> Self {
        let mut carry = Self::default();
        for len in sizes {
            carry.append(len, segment_bytes);
        }
        carry
    }

    /// Appends a batch of `len` bytes; where it lands: whether it begins a
    /// segment, and whether it gets an index entry.
    fn append(&mut self, len: usize, segment_bytes: u32) -> (bool, bool) {
        let rolls =
            segment_bytes > 0 && self.bytes > 0 && self.bytes + len > segment_bytes as usize;
        if rolls {
            *self = Self::default();
        }
        let indexed = self.since_index_entry > INDEX_INTERVAL_BYTES;
        if indexed {
            self.since_index_entry = 0;
        }
        self.bytes += len;
        self.since_index_entry += len;
        (rolls || self.bytes == len, indexed)
    }
}

/// Where a batch of a log lands: the first batch of its segment and its
/// position within the segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    segment_first: usize,
    in_segment: usize,
}

/// The segment layout of a log (its stored batches, in order), built batch
/// by batch as they are appended.
#[derive(Debug, Clone)]
pub struct Layout {
    segment_bytes: u32,
    /// Where the first batch stands in its segment.
    carry: SegmentCarry,
    /// Where the segment stands after the last batch laid out.
    state: SegmentCarry,
    places: Vec<Place>,
    /// The batches with an index entry, in order.
    entries: Vec<usize>,
}

impl Layout {
    /// Lays `log` out in segments of `segment_bytes` (0: one segment),
    /// its first batch standing after `carry`.
    pub fn new(log: &[BatchExtent], carry: SegmentCarry, segment_bytes: u32) -> Self {
        let mut layout = Self {
            segment_bytes,
            carry,
            state: carry,
            places: Vec::with_capacity(log.len()),
            entries: Vec::new(),
        };
        layout.extend(log);
        layout
    }

    /// The segment size this layout was made for.
    pub fn segment_bytes(&self) -> u32 {
        self.segment_bytes
    }

    /// Where the first batch stands in its segment.
    pub fn carry(&self) -> SegmentCarry {
        self.carry
    }

    /// How many batches are laid out.
    pub fn len(&self) -> usize {
        self.places.len()
    }

    /// Whether no batch is laid out.
    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Lays out the batches of `log` past those already laid out (`log`
    /// is the whole log, the laid-out batches its first ones).
    pub fn extend(&mut self, log: &[BatchExtent]) {
        for batch in log.iter().skip(self.places.len()) {
            let i = self.places.len();
            let (starts, indexed) = self.state.append(batch.len, self.segment_bytes);
            let segment_first = match self.places.last() {
                Some(last) if !starts => last.segment_first,
                _ if starts => i,
                _ => 0,
            };
            if indexed {
                self.entries.push(i);
            }
            self.places.push(Place {
                segment_first,
                in_segment: self.state.bytes - batch.len,
            });
        }
    }

    /// The index of the first batch past the segment that holds batch
    /// `index` (the log's length when it is in the last segment).
    pub fn segment_end(&self, index: usize) -> usize {
        let Some(first) = self.places.get(index).map(|p| p.segment_first) else {
            return self.places.len();
        };
        self.places.partition_point(|p| p.segment_first <= first)
    }

    /// Kafka's bound on the aborted transactions it lists for a read of
    /// `fetch_size` bytes that starts at batch `start`: the last offset of
    /// the first index entry of that segment at or past the read's end,
    /// else the next segment's base offset, else `log_end_offset`.
    pub fn aborted_bound(
        &self,
        log: &[BatchExtent],
        start: usize,
        fetch_size: usize,
        log_end_offset: i64,
    ) -> i64 {
        let Some(first) = self.places.get(start) else {
            return log_end_offset;
        };
        let end = first.in_segment + fetch_size;
        let segment_end = self.segment_end(start);
        let from = self.entries.partition_point(|&e| e < first.segment_first);
        let to = self.entries.partition_point(|&e| e < segment_end);
        let entries = &self.entries[from..to];
        let position = |slot: usize| self.places[entries[slot]].in_segment;
        match smallest_upper_bound(entries.len(), position, end) {
            Some(slot) => log[entries[slot]].last_offset,
            None => log
                .get(segment_end)
                .map_or(log_end_offset, |b| b.base_offset),
        }
    }
}

/// Entries of an index Kafka searches in its "warm" section first (the
/// last 8 KiB of the index file, 8-byte entries).
const WARM_ENTRIES: usize = 8192 / 8;

/// The slot of the first entry at or past `target` in an index of `n`
/// increasing values (`value(slot)`), as Kafka's index search finds it
/// (`AbstractIndex.smallestUpperBoundSlotFor`), quirk included: an entry
/// equal to the target where a binary search begins is never compared,
/// so a target equal to the first entry gets the second one (or none).
fn smallest_upper_bound(n: usize, value: impl Fn(usize) -> usize, target: usize) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let search = |begin: usize, end: usize| {
        let (mut lo, mut hi) = (begin, end);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            match value(mid).cmp(&target) {
                std::cmp::Ordering::Greater => hi = mid - 1,
                std::cmp::Ordering::Less => lo = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        (lo + 1 < n).then_some(lo + 1)
    };
    let first_hot = n.saturating_sub(1 + WARM_ENTRIES);
    if value(first_hot) < target {
        return search(first_hot, n - 1);
    }
    if value(0) > target {
        return Some(0);
    }
    search(0, first_hot)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches of `lens` bytes, one offset each, back to back.
    fn log(lens: &[usize]) -> Vec<BatchExtent> {
        let mut position = 0;
        (0..)
            .zip(lens)
            .map(|(offset, &len)| {
                let e = BatchExtent {
                    base_offset: offset,
                    last_offset: offset,
                    position,
                    len,
                };
                position += len;
                e
            })
            .collect()
    }

    #[test]
    fn segments_roll_before_the_batch_that_would_overflow() {
        let log = log(&[600, 300, 200, 1500, 100]);
        let layout = Layout::new(&log, SegmentCarry::default(), 1000);
        // [600, 300] [200] [1500] [100]: 900 + 200 > 1000; a batch over the
        // limit in an empty segment stays; 1500 + 100 > 1000.
        assert_eq!(
            (0..5).map(|i| layout.segment_end(i)).collect::<Vec<_>>(),
            vec![2, 2, 3, 4, 5]
        );
        assert_eq!(
            Layout::new(&log, SegmentCarry::default(), 0).segment_end(0),
            5
        );
    }

    #[test]
    fn a_carried_segment_keeps_its_layout() {
        // 600 bytes were dropped; the segment holding them goes on.
        let carry = SegmentCarry::after([600], 1000);
        let kept = log(&[300, 200]);
        let layout = Layout::new(&kept, carry, 1000);
        assert_eq!(layout.segment_end(0), 1);
        let fresh = Layout::new(&kept, SegmentCarry::default(), 1000);
        assert_eq!(fresh.segment_end(0), 2);
    }

    #[test]
    fn the_index_search_is_kafkas() {
        let values = [10, 20, 30];
        let found: Vec<_> = [0, 10, 11, 20, 25, 30, 31]
            .iter()
            .map(|&t| smallest_upper_bound(3, |i| values[i], t))
            .collect();
        // 10 equals the first entry: skipped for the second.
        assert_eq!(
            found,
            vec![Some(0), Some(1), Some(1), Some(1), Some(2), Some(2), None]
        );
        assert_eq!(smallest_upper_bound(1, |_| 10, 10), None);
        assert_eq!(smallest_upper_bound(0, |_| 10, 10), None);
    }

    #[test]
    fn index_entries_come_after_more_than_the_interval() {
        // 3000 + 2000 = 5000 > 4096 before the third batch: it is indexed
        // (offset 2); then 10 + 10 bytes, none.
        let log = log(&[3000, 2000, 10, 10, 5000, 10]);
        let layout = Layout::new(&log, SegmentCarry::default(), 0);
        assert_eq!(layout.entries, vec![2, 5]);
        // A read of batch 0 whole (3000 bytes): the first entry at or past
        // position 3000 is batch 2's (position 5000).
        assert_eq!(layout.aborted_bound(&log, 0, 3000, 6), 2);
        // A read ending past the last entry: the log end offset.
        assert_eq!(layout.aborted_bound(&log, 2, 20_000, 6), 6);
        // A read ending exactly at the segment's first entry: Kafka's
        // search skips it (the next entry, or as here none: the log end).
        assert_eq!(layout.aborted_bound(&log, 0, 5000, 6), 5);
        assert_eq!(layout.aborted_bound(&log, 0, 5001, 6), 5);
        // In a rolled log, the next segment's base offset.
        let rolled = Layout::new(&log, SegmentCarry::default(), 5000);
        assert_eq!(rolled.aborted_bound(&log, 0, 10, 6), 2);
    }
}
