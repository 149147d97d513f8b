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
//! - past `last_index` it fetches `min(remaining × avg, 1 MiB)`;
//! - like GreptimeDB's records buffer, every record a response carries is
//!   matched against the whole index, not only the entries its fetch was
//!   sized for (the replay core does this for every strategy).
//!
//! One addition, walfetch's, so that it completes on brokers that skip the
//! batch containing a mid-batch fetch offset (Tansu 0.6): once that is
//! seen, a fetch for an entry that keeps being handed back starts lower,
//! by the replay core's back-off ([`PlanView::start_for`]: a batch's worth
//! of offsets, doubling), until it lands in the batch before the entry's,
//! and its byte range is measured from where it starts.
//!
//! Which entries are still wanted, and the scan past `last_index`, are the
//! replay core's; this strategy only sizes each fetch.

use std::ops::Range;

use super::{FetchKind, FetchStrategy, PlanView, PlannedFetch};

const INITIAL_AVG: f64 = 256.0 * 1024.0;
const MERGE_WINDOW: f64 = 4.0 * 1024.0 * 1024.0;
const MAX_BATCH_BYTES: f64 = 1024.0 * 1024.0;

/// GreptimeDB's estimate strategy; see the module docs.
#[derive(Debug, Clone)]
pub struct EstimatePlanner {
    avg: f64,
}

impl Default for EstimatePlanner {
    fn default() -> Self {
        Self::new()
    }
}

impl EstimatePlanner {
    /// The strategy before any response: 256 KiB per record.
    pub fn new() -> Self {
        Self { avg: INITIAL_AVG }
    }
}

impl FetchStrategy for EstimatePlanner {
    fn plan_entries(
        &mut self,
        view: &PlanView<'_>,
        run: Range<usize>,
        attempt: u32,
    ) -> PlannedFetch {
        let entries = &view.entries[run.clone()];
        let first = entries[0].offset;
        let start_of = |o: i64| (o - first) as f64 * self.avg;
        let merged = entries
            .partition_point(|e| start_of(e.offset) < MERGE_WINDOW)
            .max(1);
        let last = entries[merged - 1].offset;
        let offset = view.start_for(first, attempt);
        // A fetch backed off below `first` must also cover the offsets in
        // between, or a broker that returns whole batches only (Tansu 0.6)
        // never reaches `first` and the back-off runs away.
        let span = start_of(last) + self.avg + 1.0 + (first - offset) as f64 * self.avg;
        PlannedFetch {
            offset,
            max_bytes: span.clamp(1.0, MAX_BATCH_BYTES) as u32,
            kind: FetchKind::Indexed {
                entries: run.start..run.start + merged,
            },
        }
    }

    fn plan_tail(&mut self, view: &PlanView<'_>, from: i64, to: i64, attempt: u32) -> PlannedFetch {
        let offset = view.start_for(from, attempt);
        let remaining = (to - offset) as f64;
        PlannedFetch {
            offset,
            max_bytes: (remaining * self.avg).clamp(1.0, MAX_BATCH_BYTES) as u32,
            kind: FetchKind::Tail { from },
        }
    }

    /// One fetch at a time, as GreptimeDB's consumer does.
    fn max_in_flight(&self) -> Option<usize> {
        Some(1)
    }

    fn observe_response(
        &mut self,
        _fetch: &PlannedFetch,
        records_bytes: usize,
        records_at_or_above: usize,
    ) {
        if records_at_or_above > 0 {
            self.avg = records_bytes as f64 / records_at_or_above as f64;
        }
    }

    fn name(&self) -> &'static str {
        "estimate"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexEntry;
    use crate::plan::{Layout, SeenBatch};

    #[test]
    fn a_backed_off_fetch_covers_the_offsets_it_backs_over() {
        let entries = [IndexEntry::offset_only(100)];
        // Batches of 4 offsets seen: the back-off steps 4, 8, 16, 32.
        let mut layout = Layout::new();
        layout.observe_batch(&SeenBatch {
            base: 0,
            last: 3,
            len: 400,
            compressed: false,
        });
        let mut p = EstimatePlanner::new();
        let f = p.plan_entries(&PlanView::of(&entries, &layout), 0..1, 0);
        p.observe_response(&f, 1000, 10); // avg 100 B
        let misaligned = PlanView {
            misaligned: Some(0),
            ..PlanView::of(&entries, &layout)
        };
        for attempt in 0..4 {
            let f = p.plan_entries(&misaligned, 0..1, attempt);
            let back = 4 << attempt;
            assert_eq!(f.offset, 100 - back, "attempt {attempt}");
            // One record's range (100 + 1 B) plus the offsets backed over.
            assert_eq!(f.max_bytes, 101 + back as u32 * 100, "attempt {attempt}");
        }
    }

    #[test]
    fn starts_at_256_kib_per_record_and_learns() {
        let entries = [10, 11, 12, 40, 100].map(IndexEntry::offset_only);
        let layout = Layout::new();
        let v = PlanView::of(&entries, &layout);
        let mut p = EstimatePlanner::new();
        assert_eq!(p.max_in_flight(), Some(1));
        let f = p.plan_entries(&v, 0..5, 0);
        // 4 MiB / 256 KiB = 16 offsets of window: 10, 11, 12 merge; span
        // (12 - 10) * 256 KiB + 256 KiB + 1, capped at 1 MiB.
        assert_eq!(
            (f.offset, f.max_bytes, f.kind.clone()),
            (10, 786_433, FetchKind::Indexed { entries: 0..3 })
        );
        p.observe_response(&f, 3000, 3);
        let f = p.plan_entries(&v, 3..5, 0);
        // avg 1000: 40 and 100 are within 4 MiB; span 60 * 1000 + 1001.
        assert_eq!((f.offset, f.max_bytes), (40, 61_001));
        p.observe_response(&f, 1000, 1);
        let t = p.plan_tail(&v, 200, 300, 0);
        assert_eq!(
            (t.offset, t.max_bytes, t.kind),
            (200, 100_000, FetchKind::Tail { from: 200 })
        );
    }
}
