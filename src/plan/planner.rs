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
        let mut last = start;
        for i in start + 1..end {
            let Some(next) = self.position(i, &at, at.end + gap_limit) else {
                break;
            };
            // Splitting here would not save the slack an estimated end
            // carries, nor the half batch a fetch from an offset whose batch
            // is unknown reads before it.
            let unknown_start = if next.batch.is_none() {
                batch / 2.0
            } else {
                0.0
            };
            let allowance = gap_limit + self.end_slack(&at, batch) + unknown_start;
            let same_batch =
                matches!((at.batch, next.batch), (Some(a), Some(b)) if a.base == b.base);
            let gap = next.start - at.end;
            if !same_batch && gap > allowance {
                break;
            }
            if next.end > max {
                if next.estimated {
                    return PlannedFetch {
                        offset,
                        max_bytes: self.config.max_fetch_bytes,
                        kind: FetchKind::Indexed {
                            entries: start..end,
                        },
                    };
                }
                break;
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
    //! Table-driven tests: a model log (batches with per-record byte ends),
    //! a model broker following Kafka's fetch rules (or a habit), and a model
    //! consumer that checks responses and hands back what was not delivered.

    use super::*;
    use crate::index::{Hint, IndexEntry, WalIndex};

    #[derive(Debug, Clone)]
    struct Batch {
        base: i64,
        /// Byte end of each record inside the batch, by offset delta.
        ends: Vec<u32>,
        len: u32,
        compressed: bool,
        writer: u8,
    }

    impl Batch {
        fn last(&self) -> i64 {
            self.base + self.ends.len() as i64 - 1
        }

        fn seen(&self) -> SeenBatch {
            SeenBatch {
                base: self.base,
                last: self.last(),
                len: self.len,
                compressed: self.compressed,
            }
        }
    }

    /// A log of batches with `sizes[i]` records of `record` bytes each.
    fn log(sizes: &[usize], record: u32) -> Vec<Batch> {
        let mut base = 0;
        sizes
            .iter()
            .map(|&n| {
                let ends: Vec<u32> = (1..=n as u32).map(|i| 61 + i * record).collect();
                let b = Batch {
                    base,
                    len: *ends.last().unwrap(),
                    ends,
                    compressed: false,
                    writer: 0,
                };
                base += n as i64;
                b
            })
            .collect()
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Habit {
        Kafka,
        NeverCut,
        SkipContaining,
    }

    /// What a broker sends for `fetch(offset, max)`: complete batches and,
    /// where it cuts, the bytes of a partial one.
    fn broker(
        log: &[Batch],
        offset: i64,
        max: u32,
        habit: Habit,
    ) -> (Vec<&Batch>, Option<(&Batch, u32)>) {
        let mut i = log
            .iter()
            .position(|b| b.last() >= offset)
            .unwrap_or(log.len());
        if habit == Habit::SkipContaining && i < log.len() && log[i].base != offset {
            i += 1;
        }
        let (mut whole, mut used) = (Vec::new(), 0u32);
        for (k, b) in log[i..].iter().enumerate() {
            if k == 0 || used + b.len <= max {
                used += b.len;
                whole.push(b);
            } else {
                let left = max.saturating_sub(used);
                let partial = (habit == Habit::Kafka && left > 0).then_some((b, left));
                return (whole, partial);
            }
        }
        (whole, None)
    }

    struct Outcome {
        delivered: Vec<i64>,
        fetches: usize,
        bytes: u64,
    }

    /// Replays `entries` against the model broker, as the consumer does.
    fn replay(log: &[Batch], entries: &[IndexEntry], layout: Layout, habit: Habit) -> Outcome {
        let mut planner = Planner::new(entries, None, layout, PlanConfig::default());
        let mut delivered = vec![false; entries.len()];
        let (mut fetches, mut bytes) = (0, 0u64);
        while let Some(fetch) = planner.next_fetch() {
            fetches += 1;
            assert!(fetches < 10_000, "no progress");
            let FetchKind::Indexed { entries: range } = fetch.kind.clone() else {
                panic!("no tail here")
            };
            let (whole, partial) = broker(log, fetch.offset, fetch.max_bytes, habit);
            let mut present: Vec<i64> = Vec::new();
            for b in &whole {
                bytes += u64::from(b.len);
                planner.observe_batch(&b.seen());
                present.extend(b.base..=b.last());
            }
            if let Some((b, cut)) = partial {
                bytes += u64::from(cut);
                // The header of a cut batch teaches its extent too.
                if cut >= 61 {
                    planner.observe_batch(&b.seen());
                }
                if !b.compressed {
                    present.extend(
                        b.ends
                            .iter()
                            .enumerate()
                            .filter(|(_, &e)| e <= cut)
                            .map(|(d, _)| b.base + d as i64),
                    );
                }
            }
            // The consumer checks the first batch covers the fetch offset;
            // it delivers in order and hands back from the first miss.
            let covers = whole.first().is_some_and(|b| b.base <= fetch.offset);
            if !covers {
                planner.note_misaligned(0);
            }
            let mut i = range.start;
            while covers && i < range.end && present.contains(&entries[i].offset) {
                delivered[i] = true;
                i += 1;
            }
            if i < range.end {
                planner.requeue(i..range.end);
            }
        }
        assert!(delivered.iter().all(|&d| d), "every entry is delivered");
        Outcome {
            delivered: entries.iter().map(|e| e.offset).collect(),
            fetches,
            bytes,
        }
    }

    /// Index entries for `offsets`, with the writer's exact hints.
    fn hinted(log: &[Batch], offsets: &[i64]) -> Vec<IndexEntry> {
        offsets
            .iter()
            .map(|&o| {
                let b = log.iter().find(|b| b.base <= o && o <= b.last()).unwrap();
                let end = if b.compressed {
                    b.len
                } else {
                    b.ends[(o - b.base) as usize]
                };
                IndexEntry {
                    offset: o,
                    hint: Some(Hint {
                        batch_base: b.base,
                        batch_len: b.len,
                        record_end: end,
                    }),
                }
            })
            .collect()
    }

    /// The index of every record of a log: what the writer knows.
    fn full_index(log: &[Batch], writer: u8) -> WalIndex {
        let mut index = WalIndex::new();
        for b in log.iter().filter(|b| b.writer == writer) {
            let offsets: Vec<i64> = (b.base..=b.last()).collect();
            for e in hinted(log, &offsets) {
                index.push(1000, e).unwrap();
            }
        }
        index
    }

    /// Bytes Kafka must send at the least to deliver `offsets`: each run of
    /// wanted batches read from its first batch's start to its last record,
    /// the first batch whole. (Exact for the shapes here, where merging
    /// across unwanted batches never saves bytes.)
    fn floor(log: &[Batch], offsets: &[i64]) -> u64 {
        let mut total = 0u64;
        let mut run: Option<(usize, u32)> = None; // (first batch index, byte position of current batch start)
        let wanted: Vec<usize> = log
            .iter()
            .enumerate()
            .filter(|(_, b)| offsets.iter().any(|&o| b.base <= o && o <= b.last()))
            .map(|(i, _)| i)
            .collect();
        for (k, &i) in wanted.iter().enumerate() {
            let b = &log[i];
            let last_wanted = offsets
                .iter()
                .filter(|&&o| b.base <= o && o <= b.last())
                .max()
                .unwrap();
            let end = if b.compressed {
                b.len
            } else {
                b.ends[(last_wanted - b.base) as usize]
            };
            let continues = k > 0 && wanted[k - 1] + 1 == i;
            if !continues {
                if let Some((_, pos)) = run {
                    let _ = pos;
                }
                total += u64::from(b.len);
                run = Some((i, 0));
            } else {
                let prev = &log[wanted[k - 1]];
                // The previous batch was counted up to its last wanted record
                // (or whole, if it started the run): top it up, add this one's prefix.
                let prev_wanted = offsets
                    .iter()
                    .filter(|&&o| prev.base <= o && o <= prev.last())
                    .max()
                    .unwrap();
                let prev_end = if prev.compressed {
                    prev.len
                } else {
                    prev.ends[(prev_wanted - prev.base) as usize]
                };
                let started_run = run.is_some_and(|(s, _)| s == wanted[k - 1]);
                if !started_run {
                    total += u64::from(prev.len - prev_end);
                }
                total += u64::from(end);
            }
        }
        total
    }

    fn offsets(o: impl IntoIterator<Item = i64>) -> Vec<i64> {
        o.into_iter().collect()
    }

    #[test]
    fn table() {
        // (name, log, region offsets, max fetches, max bytes / floor)
        let dense = log(&[10; 10], 100);
        let big = log(&[100; 20], 1000);
        let huge = log(&[3, 2000, 3], 10_000);
        type Case = (&'static str, Vec<Batch>, Vec<i64>, usize, f64);
        let cases: Vec<Case> = vec![
            (
                "dense: the whole log",
                dense.clone(),
                offsets(0..100),
                1,
                1.0,
            ),
            (
                "one entry per batch, batches adjacent",
                dense.clone(),
                offsets((0..10).map(|b| b * 10 + 5)),
                1,
                1.0,
            ),
            (
                "a run spanning batches",
                dense.clone(),
                offsets(15..47),
                1,
                1.0,
            ),
            (
                "sparse in big batches",
                big.clone(),
                offsets([5, 950, 1901]),
                3,
                1.0,
            ),
            (
                "two far runs",
                big.clone(),
                offsets([100, 101, 150, 1500, 1550]),
                2,
                1.0,
            ),
            // The 8 MiB cap on one fetch splits the run: a batch more than the floor.
            (
                "a huge batch between small ones",
                huge.clone(),
                offsets([1, 1000, 2004]),
                3,
                1.001,
            ),
            ("a single entry", dense.clone(), offsets([42]), 1, 1.0),
            // The first batch comes whole anyway: reaching the next batch
            // costs no gap, however early the first entry sits.
            (
                "an entry early in a big batch, the next in the batch after",
                log(&[100, 10], 1000),
                offsets([0, 105]),
                1,
                1.0,
            ),
        ];
        for (name, log, wanted, max_fetches, max_ratio) in cases {
            let layout = Layout::from_index(&full_index(&log, 0));
            let out = replay(&log, &hinted(&log, &wanted), layout, Habit::Kafka);
            let f = floor(&log, &wanted);
            assert_eq!(out.delivered, wanted, "{name}");
            assert!(
                out.fetches <= max_fetches,
                "{name}: {} fetches",
                out.fetches
            );
            assert!(
                out.bytes as f64 <= f as f64 * max_ratio,
                "{name}: {} bytes, floor {f}",
                out.bytes
            );
        }
    }

    #[test]
    fn a_precise_limit_stops_mid_batch() {
        let log = log(&[10, 10, 10], 100);
        let wanted = [5, 12];
        let layout = Layout::from_index(&full_index(&log, 0));
        let mut planner = Planner::new(&hinted(&log, &wanted), None, layout, PlanConfig::default());
        let fetch = planner.next_fetch().unwrap();
        // From batch 0's start to the end of offset 12's record in batch 1.
        assert_eq!(
            fetch,
            PlannedFetch {
                offset: 0,
                max_bytes: log[0].len + log[1].ends[2],
                kind: FetchKind::Indexed { entries: 0..2 }
            }
        );
        assert!(planner.next_fetch().is_none());
    }

    #[test]
    fn other_writers_batches_break_runs_but_lose_nothing() {
        // Writers 0 and 1 alternate batches; the index knows writer 0's only.
        let mut log = log(&[10; 12], 100);
        for (i, b) in log.iter_mut().enumerate() {
            b.writer = (i % 2) as u8;
        }
        let wanted: Vec<i64> = (0..12).filter(|b| b % 2 == 0).map(|b| b * 10 + 3).collect();
        let layout = Layout::from_index(&full_index(&log, 0));
        let out = replay(&log, &hinted(&log, &wanted), layout, Habit::Kafka);
        assert_eq!(out.delivered, wanted);
        assert_eq!(out.fetches, 6, "one fetch per run: the gaps are unknown");
        assert_eq!(out.bytes, 6 * u64::from(log[0].len));
    }

    #[test]
    fn offsets_only_learns_the_layout() {
        let log = log(&[50; 40], 200);
        let wanted: Vec<i64> = (0..40).map(|b| b * 50 + 7).collect();
        let entries: Vec<IndexEntry> = wanted.iter().map(|&o| IndexEntry::offset_only(o)).collect();
        let out = replay(&log, &entries, Layout::new(), Habit::Kafka);
        assert_eq!(out.delivered, wanted);
        let total: u64 = log.iter().map(|b| u64::from(b.len)).sum();
        assert!(
            out.bytes <= total + u64::from(PlanConfig::default().probe_bytes),
            "{}",
            out.bytes
        );
    }

    #[test]
    fn offsets_only_reads_across_gaps_cheaper_than_the_slack_a_split_costs() {
        // ~100 KB batches, an entry every 14 offsets (~70 KB apart): more
        // than the cost model's merge gap, less than the slack two
        // estimated fetches carry between them. One fetch after the probe.
        let log = log(&[20; 60], 5000);
        let wanted: Vec<i64> = (0..60 * 20).step_by(14).collect();
        let entries: Vec<IndexEntry> = wanted.iter().map(|&o| IndexEntry::offset_only(o)).collect();
        let out = replay(&log, &entries, Layout::new(), Habit::Kafka);
        assert_eq!(out.delivered, wanted);
        let total: u64 = log.iter().map(|b| u64::from(b.len)).sum();
        assert!(out.fetches <= 3, "{} fetches", out.fetches);
        assert!(out.bytes <= total + (1 << 20), "{}", out.bytes);
    }

    #[test]
    fn offsets_only_resumes_a_cut_run_in_one_fetch() {
        // The probe is cut inside a compressed batch: its header tells
        // where the batch starts, and the next fetch starts there and goes
        // on, estimated, over every entry left.
        let mut log = log(&[10; 30], 10_000);
        for b in &mut log {
            b.compressed = true;
        }
        let wanted: Vec<i64> = (0..300).step_by(5).collect();
        let entries: Vec<IndexEntry> = wanted.iter().map(|&o| IndexEntry::offset_only(o)).collect();
        let out = replay(&log, &entries, Layout::new(), Habit::Kafka);
        assert_eq!(out.delivered, wanted);
        assert_eq!(out.fetches, 2);
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
    fn offsets_only_on_a_broker_that_skips_the_containing_batch() {
        let log = log(&[50; 40], 200);
        let wanted: Vec<i64> = (0..40).filter(|b| b % 3 == 0).map(|b| b * 50 + 7).collect();
        let entries: Vec<IndexEntry> = wanted.iter().map(|&o| IndexEntry::offset_only(o)).collect();
        let out = replay(&log, &entries, Layout::new(), Habit::SkipContaining);
        assert_eq!(out.delivered, wanted);
    }

    #[test]
    fn wrong_and_stale_hints_cost_fetches_never_records() {
        let log = log(&[10; 10], 100);
        let wanted: Vec<i64> = vec![3, 33, 34, 71, 99];
        for damage in 0..4 {
            let mut entries = hinted(&log, &wanted);
            for e in &mut entries {
                let h = e.hint.as_mut().unwrap();
                match damage {
                    0 => {
                        // too short
                        h.batch_len /= 2;
                        h.record_end = h.record_end.min(h.batch_len);
                    }
                    1 => h.record_end = 61, // ends too early
                    2 => h.batch_base = (h.batch_base - 5).max(0), // wrong batch
                    _ => h.batch_len *= 3,  // too long
                }
            }
            let mut index = WalIndex::new();
            for e in &entries {
                index.push(1, *e).unwrap();
            }
            for habit in [Habit::Kafka, Habit::NeverCut, Habit::SkipContaining] {
                let out = replay(&log, &entries, Layout::from_index(&index), habit);
                assert_eq!(out.delivered, wanted, "damage {damage} {habit:?}");
            }
        }
    }

    #[test]
    fn brokers_that_never_cut_or_skip_the_containing_batch() {
        let log = log(&[10; 10], 100);
        let wanted = offsets([3, 15, 55, 56, 90]);
        let layout = Layout::from_index(&full_index(&log, 0));
        for habit in [Habit::NeverCut, Habit::SkipContaining] {
            let out = replay(&log, &hinted(&log, &wanted), layout.clone(), habit);
            assert_eq!(out.delivered, wanted, "{habit:?}");
        }
    }

    #[test]
    fn compressed_batches_are_read_whole() {
        let mut log = log(&[10; 4], 100);
        for b in &mut log {
            b.compressed = true;
        }
        let wanted = offsets([2, 12]);
        let layout = Layout::from_index(&full_index(&log, 0));
        let out = replay(&log, &hinted(&log, &wanted), layout, Habit::Kafka);
        assert_eq!(out.delivered, wanted);
        assert_eq!((out.fetches, out.bytes), (1, 2 * u64::from(log[0].len)));
    }

    proptest::proptest! {
        /// Any log, any wanted offsets, hints or none, any broker habit:
        /// every entry is delivered, in a bounded number of fetches.
        #[test]
        fn every_entry_is_delivered_whatever_the_log(
            sizes in proptest::collection::vec(1usize..30, 1..40),
            record in 10u32..5000,
            compressed: bool,
            picks in proptest::collection::vec(0u16..1000, 1..60),
            hints: bool,
            habit in 0u8..3,
        ) {
            let mut log = log(&sizes, record);
            for b in &mut log {
                b.compressed = compressed;
            }
            let total: i64 = sizes.iter().sum::<usize>() as i64;
            let mut wanted: Vec<i64> = picks.iter().map(|&p| i64::from(p) % total).collect();
            wanted.sort_unstable();
            wanted.dedup();
            let (entries, layout) = if hints {
                (hinted(&log, &wanted), Layout::from_index(&full_index(&log, 0)))
            } else {
                let entries = wanted.iter().map(|&o| IndexEntry::offset_only(o)).collect();
                (entries, Layout::new())
            };
            let habit = [Habit::Kafka, Habit::NeverCut, Habit::SkipContaining][usize::from(habit)];
            let out = replay(&log, &entries, layout, habit);
            proptest::prop_assert_eq!(&out.delivered, &wanted);
            proptest::prop_assert!(out.fetches <= 4 * wanted.len() + 20, "{} fetches", out.fetches);
        }
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
