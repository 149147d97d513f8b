//! Planning fetches for one region's replay.

use std::collections::BTreeMap;
use std::ops::Range;

use super::{CostModel, Layout, SeenBatch};
use crate::index::IndexEntry;

/// Limits and defaults for planning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanConfig {
    /// The cost model for merging runs.
    pub cost: CostModel,
    /// Largest byte limit of one fetch (bounds one response's memory); the
    /// byte limit of each fetch of a tail scan, where every record is
    /// wanted and fewer, larger fetches waste less of the batches a broker
    /// cuts.
    pub max_fetch_bytes: u32,
    /// Byte limit of a fetch with nothing to size it from (no hints, no
    /// observed batches yet).
    pub probe_bytes: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            cost: CostModel::default(),
            max_fetch_bytes: 8 << 20,
            probe_bytes: 1 << 20,
        }
    }
}

/// What a planned fetch is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchKind {
    /// Indexed entries: `entries` indexes the planner's entry list.
    Indexed {
        /// The entries this fetch is meant to deliver.
        entries: Range<usize>,
    },
    /// A scan past `last_index`: every record from `from` on is wanted (the
    /// fetch itself may start lower, at a known batch boundary).
    Tail {
        /// The first offset wanted.
        from: i64,
    },
}

/// One Fetch request to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFetch {
    /// The fetch offset.
    pub offset: i64,
    /// The partition byte limit.
    pub max_bytes: u32,
    /// What it is for.
    pub kind: FetchKind,
}

/// Where an entry is known to sit.
#[derive(Debug, Clone, Copy)]
struct Located {
    /// Its batch's base offset.
    base: i64,
    /// Its batch's encoded length.
    batch_len: u32,
    /// Where its record ends in the batch, never past `batch_len` (the
    /// batch's end when that is unknown or the batch is compressed).
    record_end: u32,
}

/// A known batch within a fetch's response.
#[derive(Debug, Clone, Copy)]
struct BatchAt {
    /// Its base offset.
    base: i64,
    /// Where it starts, in bytes from the start of the response.
    start: f64,
}

/// How far a fetch being planned reaches, in bytes from the start of its
/// response, as of its latest entry.
#[derive(Debug, Clone, Copy)]
struct Position {
    /// The latest entry's batch, if known.
    batch: Option<BatchAt>,
    /// Where the latest entry's bytes begin: its batch's start if known,
    /// else its record's.
    start: f64,
    /// Where the bytes the fetch needs end.
    end: f64,
    /// Whether any of it is estimated.
    estimated: bool,
}

impl Position {
    /// An entry in the batch at `base` starting at byte `pos`, its record
    /// ending `record_end` bytes into the batch.
    fn in_batch(base: i64, pos: f64, record_end: u32, estimated: bool) -> Self {
        Self {
            batch: Some(BatchAt { base, start: pos }),
            start: pos,
            end: pos + f64::from(record_end),
            estimated,
        }
    }

    /// An entry in an unknown batch, its record estimated at `pos`.
    fn record(pos: f64, per_offset: f64) -> Self {
        Self {
            batch: None,
            start: pos,
            end: pos + per_offset,
            estimated: true,
        }
    }
}

/// Tail scan state: `next..to` remains.
#[derive(Debug, Clone, Copy)]
struct Tail {
    next: i64,
    to: i64,
    in_flight: bool,
    /// Tail fetches in a row that made no progress.
    attempts: u32,
}

/// Plans the fetches of one region's replay; see the module docs.
#[derive(Debug, Clone)]
pub struct Planner {
    entries: Vec<IndexEntry>,
    layout: Layout,
    config: PlanConfig,
    /// `entries[next..]` have not been planned yet.
    next: usize,
    /// Entry ranges handed back by the consumer, by start: planned first.
    requeued: BTreeMap<usize, usize>,
    tail: Option<Tail>,
    /// Observed bytes and offsets, for estimates without hints.
    seen_bytes: u64,
    seen_offsets: u64,
    seen_batches: u64,
    seen_compressed: u64,
    /// Set once the broker answered a mid-batch fetch offset without the
    /// batch containing it: from then on, fetches start at known batch
    /// boundaries, or at `log_start`.
    aligned_from: Option<i64>,
    /// How often a run starting at an entry was handed back.
    attempts: BTreeMap<usize, u32>,
    /// No fetch starts below the log start.
    log_start: i64,
}

impl Planner {
    /// A planner for `entries` (sorted, the region's indexed entries in the
    /// replay range), then a scan of `tail` (offsets past `last_index`), if
    /// any, with what is known of the log's layout.
    pub fn new(
        entries: &[IndexEntry],
        tail: Option<Range<i64>>,
        layout: Layout,
        config: PlanConfig,
    ) -> Self {
        Self {
            entries: entries.to_vec(),
            layout,
            config,
            next: 0,
            requeued: BTreeMap::new(),
            tail: tail.filter(|t| t.start < t.end).map(|t| Tail {
                next: t.start,
                to: t.end,
                in_flight: false,
                attempts: 0,
            }),
            seen_bytes: 0,
            seen_offsets: 0,
            seen_batches: 0,
            seen_compressed: 0,
            aligned_from: None,
            attempts: BTreeMap::new(),
            log_start: 0,
        }
    }

    /// The broker skipped the batch containing a mid-batch fetch offset (a
    /// habit of some Kafka-compatible brokers). Fetches for entries whose
    /// batch is unknown then start at the nearest known batch boundary
    /// below them, or at `log_start` (the response's log start offset),
    /// which costs bytes but never records.
    pub fn note_misaligned(&mut self, log_start: i64) {
        self.aligned_from = Some(log_start);
    }

    /// The entries being replayed.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The layout as currently known.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Whether nothing is left to plan (fetches may still be in flight).
    pub fn is_exhausted(&self) -> bool {
        self.requeued.is_empty()
            && self.next == self.entries.len()
            && self.tail.is_none_or(|t| t.in_flight)
    }

    /// The log now starts at `offset`: no fetch starts below it.
    pub fn note_log_start(&mut self, offset: i64) {
        self.log_start = self.log_start.max(offset);
    }

    /// The next fetch to send, if any can be planned now. A tail fetch is
    /// planned only after every indexed entry, one at a time.
    pub fn next_fetch(&mut self) -> Option<PlannedFetch> {
        let mut fetch = self.plan_next()?;
        fetch.offset = fetch.offset.max(self.log_start);
        Some(fetch)
    }

    fn plan_next(&mut self) -> Option<PlannedFetch> {
        if let Some((&start, &end)) = self.requeued.iter().next() {
            self.requeued.remove(&start);
            let fetch = self.plan_run(start, end);
            if let FetchKind::Indexed { entries } = &fetch.kind {
                if entries.end < end {
                    self.requeued.insert(entries.end, end);
                }
            }
            return Some(fetch);
        }
        if self.next < self.entries.len() {
            let fetch = self.plan_run(self.next, self.entries.len());
            if let FetchKind::Indexed { entries } = &fetch.kind {
                self.next = entries.end;
            }
            return Some(fetch);
        }
        let tail = self.tail?;
        if tail.in_flight {
            return None;
        }
        // Starting at the batch boundary below costs nothing under Kafka's
        // rules and is safe on brokers that skip a containing batch.
        let offset = match self.layout.containing(tail.next) {
            Some((base, _)) => base,
            None if self.aligned_from.is_some() => self.backed_off(tail.next, tail.attempts),
            None => tail.next,
        };
        self.tail = Some(Tail {
            in_flight: true,
            ..tail
        });
        Some(PlannedFetch {
            offset,
            max_bytes: self.config.max_fetch_bytes,
            kind: FetchKind::Tail { from: tail.next },
        })
    }

    /// Learns a batch a response carried (complete, or the header of one
    /// the broker cut).
    pub fn observe_batch(&mut self, batch: &SeenBatch) {
        self.layout.observe(batch.base, batch.last, batch.len);
        self.seen_bytes += u64::from(batch.len);
        self.seen_offsets += batch
            .last
            .saturating_sub(batch.base)
            .saturating_add(1)
            .max(1) as u64;
        self.seen_batches += 1;
        self.seen_compressed += u64::from(batch.compressed);
    }

    /// Hands back entries a fetch did not deliver; they are planned again
    /// before anything new, as one run with the entries right after them
    /// if those are not planned yet.
    pub fn requeue(&mut self, entries: Range<usize>) {
        if entries.start < entries.end {
            *self.attempts.entry(entries.start).or_default() += 1;
            let mut end = entries.end;
            if let Some(following) = self.requeued.remove(&end) {
                end = following;
            } else if end == self.next {
                end = self.entries.len();
                self.next = end;
            }
            let e = self.requeued.entry(entries.start).or_insert(end);
            *e = (*e).max(end);
        }
    }

    /// A tail fetch came back having read up to `next` (exclusive). The scan
    /// ends when it reaches its end.
    pub fn tail_progress(&mut self, next: i64) {
        if let Some(tail) = self.tail.as_mut() {
            tail.in_flight = false;
            tail.attempts = if next > tail.next {
                0
            } else {
                tail.attempts + 1
            };
            tail.next = tail.next.max(next);
            if tail.next >= tail.to {
                self.tail = None;
            }
        }
    }

    /// Average encoded bytes per offset seen so far.
    fn bytes_per_offset(&self) -> Option<f64> {
        (self.seen_offsets > 0).then(|| self.seen_bytes as f64 / self.seen_offsets as f64)
    }

    /// Where entry `i` is known to sit.
    fn locate(&self, i: usize) -> Option<Located> {
        let entry = self.entries[i];
        if let Some((base, extent)) = self.layout.containing(entry.offset) {
            // A hint for this very batch also knows where the record ends;
            // a compressed batch or an observed-only one is read whole.
            let end = entry
                .hint
                .filter(|h| h.batch_base == base && h.batch_len == extent.len)
                .map_or(extent.len, |h| h.record_end.min(extent.len));
            return Some(Located {
                base,
                batch_len: extent.len,
                record_end: end,
            });
        }
        None
    }

    /// Plans one fetch for entries from `start`, extending it over following
    /// entries (below `end`) while reading the gap to the next one costs less
    /// than another fetch.
    ///
    /// Byte positions are exact while the batches read are known and known
    /// to be adjacent (hints, or batches earlier responses carried); past
    /// that they are estimated from the bytes per offset seen so far,
    /// counted from the last known batch end.
    ///
    /// A fetch that reaches the byte cap with its end estimated claims
    /// every entry up to `end`: where its response really ends is
    /// unknown, so it takes all it carries, and what follows is planned
    /// from there once the consumer hands it back.
    fn plan_run(&self, start: usize, end: usize) -> PlannedFetch {
        let first = self.locate(start);
        if first.is_none() && self.bytes_per_offset().is_none() {
            return self.probe(start, end);
        }
        let batch = self.average_batch();
        let gap_limit = self.config.cost.merge_gap_bytes() as f64;
        let max = f64::from(self.config.max_fetch_bytes);
        let (offset, mut at) = match first {
            // The first batch comes whole regardless (KIP-74), so reaching
            // into the rest of it costs nothing.
            Some(l) => (l.base, Position::in_batch(l.base, 0.0, l.batch_len, false)),
            None => {
                let offset = self.estimated_start(start);
                // The response starts at the batch holding `offset`: on
                // average half a batch before it.
                let per_offset = self.bytes_per_offset().unwrap_or(1.0);
                let pos = batch / 2.0 + (self.entries[start].offset - offset) as f64 * per_offset;
                (offset, Position::record(pos, per_offset))
            }
        };
        // The first batch comes whole whatever the cap: every entry in it
        // is had in this fetch.
        let cap = max.max(first.map_or(0.0, |l| f64::from(l.batch_len)));
        let mut last = start;
        // The fetch as it was before its latest batch was entered: where it
        // goes back to when the cap cuts that batch short of its wanted
        // entries, whose fetch must then start at that batch's first byte
        // anyway (a prefix of it read here would be read twice).
        let mut before_batch: Option<(Position, usize)> = None;
        for i in start + 1..end {
            let rest = self.unread_rest(i, end, at.batch.map(|b| b.base));
            let Some(next) = self.position(i, &at, at.end + gap_limit + rest) else {
                break;
            };
            // Splitting here would not save the slack an estimated end
            // carries, nor the half batch a fetch from an offset whose batch
            // is unknown reads before it, nor the rest of a known batch.
            let unknown_start = if next.batch.is_none() {
                batch / 2.0
            } else {
                0.0
            };
            let whole_rest = if next.batch.is_some() && !next.estimated {
                rest
            } else {
                0.0
            };
            let allowance = gap_limit + self.end_slack(&at, batch) + unknown_start + whole_rest;
            let same_batch =
                matches!((at.batch, next.batch), (Some(a), Some(b)) if a.base == b.base);
            let gap = next.start - at.end;
            if !same_batch && gap > allowance {
                break;
            }
            if next.end > cap {
                if next.estimated {
                    return PlannedFetch {
                        offset,
                        max_bytes: self.config.max_fetch_bytes,
                        kind: FetchKind::Indexed {
                            entries: start..end,
                        },
                    };
                }
                if let (true, Some((before, entry))) = (same_batch, before_batch) {
                    (at, last) = (before, entry);
                }
                break;
            }
            if !same_batch {
                before_batch = Some((at, last));
            }
            at = Position {
                end: at.end.max(next.end),
                ..next
            };
            last = i;
        }
        PlannedFetch {
            offset,
            max_bytes: (at.end + self.end_slack(&at, batch)).clamp(1.0, max) as u32,
            kind: FetchKind::Indexed {
                entries: start..last + 1,
            },
        }
    }

    /// Bytes of entry `i`'s batch, when it is known and not `current`, past
    /// the last entry below `end` it holds: what a fetch split off at `i`
    /// would read of it (its first batch comes whole, KIP-74) and a fetch
    /// reaching on from before it would not (it is cut there).
    fn unread_rest(&self, i: usize, end: usize, current: Option<i64>) -> f64 {
        let Some(l) = self.locate(i) else {
            return 0.0;
        };
        if current == Some(l.base) {
            return 0.0;
        }
        let mut record_end = l.record_end;
        for j in i + 1..end {
            match self.locate(j) {
                Some(m) if m.base == l.base => record_end = record_end.max(m.record_end),
                _ => break,
            }
        }
        f64::from(l.batch_len - record_end)
    }

    /// Where entry `i` sits in the response of a fetch whose previous entry
    /// sits at `at`: in `at`'s batch; exactly, in a known batch reached from
    /// an exact `at` through known adjacent batches within `limit` bytes;
    /// or estimated. `None` ends the fetch: a known batch not reached from
    /// an exact `at` (another writer's batches lie between, of unknown
    /// size; splitting there costs nothing but the round trip, both ends
    /// being exact), or nothing to estimate from.
    fn position(&self, i: usize, at: &Position, limit: f64) -> Option<Position> {
        let located = self.locate(i);
        if let (Some(at_batch), Some(l)) = (at.batch, located) {
            if l.base == at_batch.base {
                return Some(Position::in_batch(
                    l.base,
                    at_batch.start,
                    l.record_end,
                    at.estimated,
                ));
            }
            if !at.estimated {
                let p = self.walk(at_batch.base, at_batch.start as u64, l.base, limit as u64)?;
                return Some(Position::in_batch(l.base, p as f64, l.record_end, false));
            }
        }
        // Count bytes per offset from the end of the last known batch, or
        // from the end of the previous entry's record.
        let per_offset = self.bytes_per_offset()?;
        let (from, from_pos) = match at.batch {
            Some(b) => {
                let (_, extent) = self.layout.containing(b.base)?;
                (extent.last_known + 1, b.start + f64::from(extent.len))
            }
            None => (self.entries[i - 1].offset + 1, at.end),
        };
        let at_offset = |o: i64| from_pos + (o - from).max(0) as f64 * per_offset;
        Some(match located {
            // Its batch is known: only the bytes before it are estimated.
            Some(l) => Position::in_batch(l.base, at_offset(l.base), l.record_end, true),
            None => Position::record(at_offset(self.entries[i].offset), per_offset),
        })
    }

    /// Follows known adjacent batches from `from` (at byte `pos`) to the
    /// batch at `to`; its position, unless the chain breaks or passes `limit`.
    fn walk(&self, from: i64, mut pos: u64, to: i64, limit: u64) -> Option<u64> {
        let mut base = from;
        let mut len = u64::from(self.layout.containing(from)?.1.len);
        while base < to {
            let (next, extent) = self.layout.next_adjacent(base)?;
            pos += len;
            if pos > limit {
                return None;
            }
            base = next;
            len = u64::from(extent.len);
        }
        (base == to).then_some(pos)
    }

    /// The first fetch, with nothing seen to size it by: a probe.
    fn probe(&self, start: usize, end: usize) -> PlannedFetch {
        PlannedFetch {
            offset: self.estimated_start(start),
            max_bytes: self.config.probe_bytes,
            kind: FetchKind::Indexed {
                entries: start
                    ..self.entries_within(start, end, u64::from(self.config.probe_bytes), 1.0),
            },
        }
    }

    /// The fetch offset for entry `start` when its batch is unknown: the
    /// entry itself, or on a broker that skips the batch containing a
    /// mid-batch offset, a known batch start below it.
    fn estimated_start(&self, start: usize) -> i64 {
        let wanted = self.entries[start].offset;
        match self.aligned_from {
            None => wanted,
            Some(_) => self.backed_off(wanted, self.attempts.get(&start).copied().unwrap_or(0)),
        }
    }

    /// Bytes a fetch ending at `at` reads past it: where the end is
    /// estimated, room for the estimate's error, more when records arrive
    /// only with their whole (compressed) batch.
    fn end_slack(&self, at: &Position, batch: f64) -> f64 {
        match (at.estimated, self.mostly_compressed()) {
            (false, _) => 0.0,
            (true, false) => batch / 2.0,
            (true, true) => batch,
        }
    }

    /// Average encoded length of the batches seen so far (0 before any).
    fn average_batch(&self) -> f64 {
        self.seen_bytes as f64 / self.seen_batches.max(1) as f64
    }

    /// Whether most batches seen were compressed.
    fn mostly_compressed(&self) -> bool {
        self.seen_compressed * 2 > self.seen_batches
    }

    /// A fetch offset below `offset` likely to land in the batch before the
    /// one holding it, on a broker that skips the batch containing a
    /// mid-batch offset: about one batch's worth of offsets back, doubling
    /// with each failed attempt, never below a known boundary or the log
    /// start.
    fn backed_off(&self, offset: i64, attempt: u32) -> i64 {
        let per_batch = (self.seen_offsets / self.seen_batches.max(1)).max(1) as i64;
        let back = per_batch.saturating_mul(1 << attempt.min(20));
        let floor = self
            .layout
            .boundary_at_or_below(offset)
            .or(self.aligned_from)
            .unwrap_or(0)
            .min(offset);
        offset.saturating_sub(back).max(floor)
    }

    /// How many entries from `start` a fetch of `bytes` might reach, given
    /// `per_offset` bytes per offset; at least one.
    fn entries_within(&self, start: usize, end: usize, bytes: u64, per_offset: f64) -> usize {
        let first = self.entries[start].offset;
        let reach = first.saturating_add((bytes as f64 / per_offset.max(1.0)) as i64);
        let n = self.entries[start..end].partition_point(|e| e.offset <= reach);
        start + n.max(1)
    }
}

impl super::FetchStrategy for Planner {
    fn entries(&self) -> &[IndexEntry] {
        Planner::entries(self)
    }
    fn next_fetch(&mut self) -> Option<PlannedFetch> {
        Planner::next_fetch(self)
    }
    fn observe_batch(&mut self, batch: &SeenBatch) {
        Planner::observe_batch(self, batch);
    }
    fn requeue(&mut self, entries: Range<usize>) {
        Planner::requeue(self, entries);
    }
    fn tail_progress(&mut self, next: i64) {
        Planner::tail_progress(self, next);
    }
    fn note_misaligned(&mut self, log_start: i64) {
        Planner::note_misaligned(self, log_start);
    }
    fn note_log_start(&mut self, offset: i64) {
        Planner::note_log_start(self, offset);
    }
    fn set_cost_model(&mut self, cost: CostModel) {
        self.config.cost = cost;
    }
    fn name(&self) -> &'static str {
        "walfetch"
    }
}

#[cfg(test)]
mod tests {
    //! Single planned fetches. Whole replays — fetch counts and bytes
    //! against the floor, offsets only, wrong hints, brokers' habits — run
    //! through the replay core against a simulated partition
    //! (`tests/planner_sim.rs`, `tests/replay_sim.rs`).

    use std::time::Duration;

    use super::*;
    use crate::index::{Hint, IndexEntry, WalIndex};

    /// An uncompressed batch of `n` records of `record` bytes at `base`:
    /// record `i` ends `61 + (i + 1) × record` bytes into it.
    #[derive(Debug, Clone, Copy)]
    struct Batch {
        base: i64,
        n: usize,
        record: u32,
    }

    impl Batch {
        fn end(self, i: usize) -> u32 {
            61 + (i as u32 + 1) * self.record
        }

        fn len(self) -> u32 {
            self.end(self.n - 1)
        }

        /// The entry at `offset` in this batch, with the writer's hints.
        fn entry(self, offset: i64) -> IndexEntry {
            IndexEntry {
                offset,
                hint: Some(Hint {
                    batch_base: self.base,
                    batch_len: self.len(),
                    record_end: self.end((offset - self.base) as usize),
                }),
            }
        }
    }

    /// Adjacent batches of `sizes[i]` records of `record` bytes each.
    fn log(sizes: &[usize], record: u32) -> Vec<Batch> {
        let mut base = 0;
        sizes
            .iter()
            .map(|&n| {
                let b = Batch { base, n, record };
                base += n as i64;
                b
            })
            .collect()
    }

    /// Hinted entries at `offsets` of `log`.
    fn hinted(log: &[Batch], offsets: &[i64]) -> Vec<IndexEntry> {
        offsets
            .iter()
            .map(|&o| {
                let b = log
                    .iter()
                    .find(|b| b.base <= o && o < b.base + b.n as i64)
                    .unwrap();
                b.entry(o)
            })
            .collect()
    }

    /// The layout the writer's index of every record of `log` gives.
    fn layout(log: &[Batch]) -> Layout {
        let mut index = WalIndex::new();
        for b in log {
            for o in b.base..b.base + b.n as i64 {
                index.push(1000, b.entry(o)).unwrap();
            }
        }
        Layout::from_index(&index)
    }

    fn planner(log: &[Batch], wanted: &[i64], config: PlanConfig) -> Planner {
        Planner::new(&hinted(log, wanted), None, layout(log), config)
    }

    #[test]
    fn a_precise_limit_stops_mid_batch() {
        let log = log(&[10, 10, 10], 100);
        let mut planner = planner(&log, &[5, 12], PlanConfig::default());
        let fetch = planner.next_fetch().unwrap();
        // From batch 0's start to the end of offset 12's record in batch 1.
        assert_eq!(
            fetch,
            PlannedFetch {
                offset: 0,
                max_bytes: log[0].len() + log[1].end(2),
                kind: FetchKind::Indexed { entries: 0..2 }
            }
        );
        assert!(planner.next_fetch().is_none());
    }

    /// Regression: entries past the cap in a first batch larger than the
    /// cap were left to later fetches, each getting that batch whole again.
    #[test]
    fn a_first_batch_larger_than_the_cap_gives_all_its_entries_to_one_fetch() {
        let log = log(&[10, 10, 10], 100);
        let config = PlanConfig {
            max_fetch_bytes: 500,
            ..PlanConfig::default()
        };
        let wanted: Vec<i64> = (10..20).collect();
        let fetch = planner(&log, &wanted, config).next_fetch().unwrap();
        assert_eq!(
            (fetch.offset, fetch.kind),
            (10, FetchKind::Indexed { entries: 0..10 })
        );
    }

    /// Regression: a run the cap cut inside a batch read that batch's
    /// first records, then fetched the batch again from its start for the
    /// rest.
    #[test]
    fn a_fetch_stops_before_a_batch_the_cap_would_cut_short_of_its_entries() {
        let log = log(&[10, 10, 10], 100);
        let config = PlanConfig {
            max_fetch_bytes: log[0].len() + log[1].end(4),
            ..PlanConfig::default()
        };
        let mut planner = planner(&log, &[5, 12, 18], config);
        let first = planner.next_fetch().unwrap();
        assert_eq!(
            (first.offset, first.max_bytes, first.kind),
            (0, log[0].len(), FetchKind::Indexed { entries: 0..1 })
        );
        let second = planner.next_fetch().unwrap();
        assert_eq!(
            (second.offset, second.kind),
            (10, FetchKind::Indexed { entries: 1..3 })
        );
    }

    /// Regression: a fetch split off at a batch gets it whole (KIP-74);
    /// the planner weighed only the gap before it against a round trip.
    #[test]
    fn reaching_into_a_batch_beats_a_fetch_that_would_get_it_whole() {
        // Batch 0, a small batch of others' records, batch 2; fetches free.
        let log = log(&[10, 1, 10], 100);
        let config = PlanConfig {
            cost: CostModel {
                round_trip: Duration::ZERO,
                ..CostModel::default()
            },
            ..PlanConfig::default()
        };
        // The first record of batch 2 only: reaching over batch 1 (161 B)
        // and cutting batch 2 after its record beats getting it whole.
        let fetch = planner(&log, &[9, 11], config).next_fetch().unwrap();
        assert_eq!(
            (fetch.max_bytes, fetch.kind),
            (
                log[0].len() + log[1].len() + log[2].end(0),
                FetchKind::Indexed { entries: 0..2 }
            )
        );
        // Its last record too: the split fetch reads no more of batch 2,
        // and saves batch 1.
        let fetch = planner(&log, &[9, 11, 20], config).next_fetch().unwrap();
        assert_eq!(fetch.kind, FetchKind::Indexed { entries: 0..1 });
    }

    #[test]
    fn an_estimated_end_leaves_a_whole_batch_when_batches_are_compressed() {
        let limit = |compressed: bool| {
            let entries = [IndexEntry::offset_only(500)];
            let mut planner = Planner::new(&entries, None, Layout::new(), PlanConfig::default());
            for b in 0..10 {
                planner.observe_batch(&SeenBatch {
                    base: b * 10,
                    last: b * 10 + 9,
                    len: 1000,
                    compressed,
                });
            }
            planner.next_fetch().unwrap().max_bytes
        };
        // Half a batch before the record (the batch holding it starts
        // there on average), the record (100 B per offset), then half a
        // batch of room, or a whole one when compressed.
        assert_eq!(limit(false), 500 + 100 + 500);
        assert_eq!(limit(true), 500 + 100 + 1000);
    }

    #[test]
    fn a_full_estimated_fetch_takes_all_it_carries_and_the_rest_follows_it() {
        // 1000 B per offset seen; 19 MB of wanted offsets: more than one
        // fetch can take.
        let entries: Vec<IndexEntry> = (1000..20_000).map(IndexEntry::offset_only).collect();
        let mut planner = Planner::new(&entries, None, Layout::new(), PlanConfig::default());
        for b in 0..100 {
            planner.observe_batch(&SeenBatch {
                base: b * 10,
                last: b * 10 + 9,
                len: 10_000,
                compressed: false,
            });
        }
        let first = planner.next_fetch().unwrap();
        assert_eq!(first.max_bytes, PlanConfig::default().max_fetch_bytes);
        assert_eq!(
            first.kind,
            FetchKind::Indexed {
                entries: 0..entries.len()
            },
            "where its response ends is unknown: it claims every entry"
        );
        assert_eq!(
            planner.next_fetch(),
            None,
            "the rest waits for the response"
        );
        // The response delivered entries up to 8000.
        planner.requeue(8000..entries.len());
        let next = planner.next_fetch().unwrap();
        assert_eq!(next.offset, entries[8000].offset);
    }

    #[test]
    fn the_tail_is_scanned_after_the_index_one_fetch_at_a_time() {
        let entries = [IndexEntry::offset_only(5)];
        let mut planner = Planner::new(
            &entries,
            Some(100..300),
            Layout::new(),
            PlanConfig::default(),
        );
        let first = planner.next_fetch().unwrap();
        assert!(matches!(first.kind, FetchKind::Indexed { .. }));
        let tail = planner.next_fetch().unwrap();
        assert_eq!(
            (tail.offset, tail.kind),
            (100, FetchKind::Tail { from: 100 })
        );
        // Every record is wanted: the largest fetch wastes least of the
        // batch a broker cuts.
        assert_eq!(tail.max_bytes, PlanConfig::default().max_fetch_bytes);
        assert!(planner.next_fetch().is_none(), "one tail fetch in flight");
        planner.tail_progress(180);
        assert_eq!(planner.next_fetch().unwrap().offset, 180);
        planner.tail_progress(300);
        assert!(planner.next_fetch().is_none());
        assert!(planner.is_exhausted());
    }
}
