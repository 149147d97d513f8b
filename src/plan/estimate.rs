//! The estimate strategy of GreptimeDB's index-aware WAL consumer, for
//! comparison: it sizes fetches from an average record size instead of the
//! log's layout.
//!
//! As specified for walfetch's comparisons:
//! - the average record size starts at 256 KiB and, after each fetch,
//!   becomes the response's encoded size divided by the number of records it
//!   returned at or above the fetch offset;
//! - an index offset `i` maps to the byte range
//!   `[(i - first) × avg, (i - first) × avg + avg + 1)`, where `first` is the
//!   first offset still to read;
//! - ranges whose start is within 4 MiB of the first merge into one fetch of
//!   `min(merged span, 1 MiB)`;
//! - one fetch in flight;
//! - past `last_index` it fetches `min(remaining × avg, 1 MiB)`.
//!
//! One addition, so that it completes on brokers that skip the batch
//! containing a mid-batch fetch offset (Tansu 0.6): once that is seen, a
//! fetch for an entry that keeps being handed back starts 1, 2, 4, ...
//! offsets lower (never below the log start) until it lands in the batch
//! before the entry's, and its byte range is measured from where it starts.

use std::ops::Range;

use super::{FetchKind, FetchStrategy, PlannedFetch, SeenBatch};
use crate::index::IndexEntry;

const INITIAL_AVG: f64 = 256.0 * 1024.0;
const MERGE_WINDOW: f64 = 4.0 * 1024.0 * 1024.0;
const MAX_BATCH_BYTES: f64 = 1024.0 * 1024.0;

/// GreptimeDB's estimate strategy; see the module docs.
#[derive(Debug, Clone)]
pub struct EstimatePlanner {
    entries: Vec<IndexEntry>,
    next: usize,
    in_flight: bool,
    avg: f64,
    tail: Option<Range<i64>>,
    /// Set once the broker skipped a containing batch: the log start.
    misaligned: Option<i64>,
    /// The entry last handed back and how often in a row.
    retry: Option<(usize, u32)>,
    /// No fetch starts below the log start.
    log_start: i64,
}

impl EstimatePlanner {
    /// A planner for `entries`, then the `tail` scan, if any.
    pub fn new(entries: &[IndexEntry], tail: Option<Range<i64>>) -> Self {
        Self {
            entries: entries.to_vec(),
            next: 0,
            in_flight: false,
            avg: INITIAL_AVG,
            tail: tail.filter(|t| t.start < t.end),
            misaligned: None,
            retry: None,
            log_start: 0,
        }
    }

    /// Where to fetch for `offset`: the offset itself, or lower after the
    /// broker was seen skipping containing batches.
    fn start_for(&self, offset: i64, entry: Option<usize>) -> i64 {
        let Some(log_start) = self.misaligned else {
            return offset;
        };
        let attempt = match (self.retry, entry) {
            (Some((i, n)), Some(e)) if i == e => n,
            (Some((usize::MAX, n)), None) => n,
            _ => 0,
        };
        offset
            .saturating_sub(1 << attempt.min(40))
            .max(log_start)
            .min(offset)
    }
}

impl FetchStrategy for EstimatePlanner {
    fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    fn next_fetch(&mut self) -> Option<PlannedFetch> {
        if self.in_flight {
            return None;
        }
        if self.next < self.entries.len() {
            let first = self.entries[self.next].offset;
            let start_of = |o: i64| (o - first) as f64 * self.avg;
            let merged = self.entries[self.next..]
                .partition_point(|e| start_of(e.offset) < MERGE_WINDOW)
                .max(1);
            let last = self.entries[self.next + merged - 1].offset;
            let offset = self.start_for(first, Some(self.next));
            // A fetch backed off below `first` must also cover the offsets
            // in between, or a broker that returns whole batches only
            // (Tansu 0.6) never reaches `first` and the back-off runs away.
            let span = start_of(last) + self.avg + 1.0 + (first - offset) as f64 * self.avg;
            let fetch = PlannedFetch {
                offset,
                max_bytes: span.clamp(1.0, MAX_BATCH_BYTES) as u32,
                kind: FetchKind::Indexed {
                    entries: self.next..self.next + merged,
                },
            };
            self.next += merged;
            self.in_flight = true;
            return Some(fetch);
        }
        let tail = self.tail.clone()?;
        self.in_flight = true;
        let offset = self.start_for(tail.start, None);
        let remaining = (tail.end - offset) as f64;
        Some(PlannedFetch {
            offset,
            max_bytes: (remaining * self.avg).clamp(1.0, MAX_BATCH_BYTES) as u32,
            kind: FetchKind::Tail { from: tail.start },
        })
    }

    fn observe_batch(&mut self, _batch: &SeenBatch) {}

    fn observe_response(
        &mut self,
        _fetch: &PlannedFetch,
        records_bytes: usize,
        records_at_or_above: usize,
    ) {
        self.in_flight = false;
        if records_at_or_above > 0 {
            self.avg = records_bytes as f64 / records_at_or_above as f64;
        }
    }

    fn requeue(&mut self, entries: Range<usize>) {
        self.next = self.next.min(entries.start);
        self.retry = match self.retry {
            Some((i, n)) if i == entries.start => Some((i, n + 1)),
            _ => Some((entries.start, 0)),
        };
    }

    fn tail_progress(&mut self, next: i64) {
        if let Some(tail) = self.tail.as_mut() {
            // `usize::MAX` marks the tail in `retry`.
            self.retry = (next <= tail.start).then(|| {
                let n = self
                    .retry
                    .filter(|r| r.0 == usize::MAX)
                    .map_or(0, |r| r.1 + 1);
                (usize::MAX, n)
            });
            tail.start = tail.start.max(next);
            if tail.start >= tail.end {
                self.tail = None;
            }
        }
    }

    fn note_misaligned(&mut self, log_start: i64) {
        self.misaligned = Some(log_start);
    }

    fn note_log_start(&mut self, offset: i64) {
        self.log_start = self.log_start.max(offset);
    }

    fn name(&self) -> &'static str {
        "estimate"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backed_off_fetch_covers_the_offsets_it_backs_over() {
        let entries: Vec<IndexEntry> = [100].map(IndexEntry::offset_only).to_vec();
        let mut p = EstimatePlanner::new(&entries, Some(200..210));
        let f = p.next_fetch().unwrap();
        p.observe_response(&f, 1000, 10); // avg 100 B
        p.note_misaligned(0);
        for attempt in 0..4 {
            p.requeue(0..1);
            let f = p.next_fetch().unwrap();
            let back = 1 << attempt;
            assert_eq!(f.offset, 100 - back, "attempt {attempt}");
            // One record's range (100 + 1 B) plus the offsets backed over.
            assert_eq!(f.max_bytes, 101 + back as u32 * 100, "attempt {attempt}");
            p.observe_response(&f, 1000, 10);
        }
    }

    #[test]
    fn starts_at_256_kib_per_record_and_learns() {
        let entries: Vec<IndexEntry> = [10, 11, 12, 40, 100].map(IndexEntry::offset_only).to_vec();
        let mut p = EstimatePlanner::new(&entries, Some(200..300));
        let f = p.next_fetch().unwrap();
        // 4 MiB / 256 KiB = 16 offsets of window: 10, 11, 12 merge; span
        // (12 - 10) * 256 KiB + 256 KiB + 1, capped at 1 MiB.
        assert_eq!(
            (f.offset, f.max_bytes, f.kind.clone()),
            (10, 786_433, FetchKind::Indexed { entries: 0..3 })
        );
        assert!(p.next_fetch().is_none(), "one in flight");
        p.observe_response(&f, 3000, 3);
        let f = p.next_fetch().unwrap();
        // avg 1000: 40 and 100 are within 4 MiB; span 60 * 1000 + 1001.
        assert_eq!((f.offset, f.max_bytes), (40, 61_001));
        p.observe_response(&f, 1000, 1);
        p.requeue(4..5);
        assert_eq!(p.next_fetch().unwrap().offset, 100);
        p.observe_response(&f, 1000, 1);
        let t = p.next_fetch().unwrap();
        assert_eq!(
            (t.offset, t.max_bytes, t.kind.clone()),
            (200, 100_000, FetchKind::Tail { from: 200 })
        );
        p.observe_response(&t, 0, 0);
        p.tail_progress(300);
        assert!(p.next_fetch().is_none());
    }
}
