//! walfetch's strategy: sizing each fetch from the log's layout.

use std::ops::Range;

use super::layout::Observed;
use super::{CostModel, FetchStrategy, PlanView};

/// The chance of sharing a batch at or below which a pair of entries is
/// taken to have a batch boundary between them (see [`Plan::extend`]):
/// answers showed such pairs in one batch at most once in ten. Above it, a
/// pair merely likelier apart than together is not a boundary a fetch may
/// count on; on a mixed layout (the replay bench's `none-1w`) a higher
/// threshold made single-region replays read more.
const SEEN_APART: f64 = 0.1;

/// How far past its estimate the limit of a fetch reading a run to the
/// log's end reaches (see `Plan::to_the_end`): this many times the run's
/// estimated bytes and an average batch. The estimate comes from the few
/// batches seen, and batches vary. Measured at `8a023c9`, when the first
/// such fetch followed a one-byte probe and was sized from its one batch:
/// in the restart bench over 64 partitions with offsets only (GreptimeDB's
/// layout and `zstd-1w`), twice read 1.035–1.041× the floor in 158–159
/// fetches, four times 1.014–1.019× in 136–142, eight times the floor in
/// 126–128, the most a fetch may the floor in 126, with the peak of bytes
/// asked for and held at 22–33, 29–44, 54–67 and 367–457 MiB (before the
/// memory cap was shared out). Since `a8c1d27` the first fetch of such a
/// run, with nothing seen, asks for its budget instead, and the margin
/// sizes the fetches after it.
const TO_THE_END_MARGIN: f64 = 4.0;

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
    /// observed batches yet). Default 1: its first batch comes whole
    /// anyway (KIP-74), and is what the next fetches are sized from; more
    /// mostly reads other regions' records (docs/benchmarks.md measures
    /// 1 byte, 16 KiB and 1 MiB). Not for a run of entries at every
    /// offset to the log's end, where nothing read can be another's: that
    /// fetch asks for its budget (`PlanView::budget`).
    pub probe_bytes: u32,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            cost: CostModel::default(),
            max_fetch_bytes: 8 << 20,
            probe_bytes: 1,
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

/// Plans the fetches of a replay; see the module docs. It keeps nothing
/// but its limits: what it plans from is the core's [`PlanView`].
#[derive(Debug, Clone)]
pub struct Planner {
    config: PlanConfig,
}

impl Planner {
    /// A planner with `config`.
    pub fn new(config: PlanConfig) -> Self {
        Self { config }
    }
}

impl FetchStrategy for Planner {
    fn plan_entries(
        &mut self,
        view: &PlanView<'_>,
        run: Range<usize>,
        attempt: u32,
    ) -> PlannedFetch {
        Plan::new(view, &self.config, attempt).plan_run(run.start, run.end)
    }

    /// Every record is wanted: the largest fetch wastes least of the batch
    /// a broker cuts. Starting at the batch boundary below the first wanted
    /// offset costs nothing under Kafka's rules and is safe on brokers that
    /// skip a containing batch.
    fn plan_tail(
        &mut self,
        view: &PlanView<'_>,
        from: i64,
        _to: i64,
        attempt: u32,
    ) -> PlannedFetch {
        let offset = match view.layout.containing(from) {
            Some((base, _)) => base,
            None => view.start_for(from, attempt),
        };
        PlannedFetch {
            offset,
            max_bytes: self.config.max_fetch_bytes.min(view.budget),
            kind: FetchKind::Tail { from },
        }
    }

    fn set_cost_model(&mut self, cost: CostModel) {
        self.config.cost = cost;
    }

    fn name(&self) -> &'static str {
        "walfetch"
    }
}

/// One fetch being planned: the view, the limits, the attempt.
struct Plan<'a> {
    view: &'a PlanView<'a>,
    config: &'a PlanConfig,
    /// The most the fetch may ask for: the cap, or less where the replay's
    /// memory is short ([`PlanView::budget`]).
    max_fetch: u32,
    observed: Observed,
    attempt: u32,
}

impl<'a> Plan<'a> {
    fn new(view: &'a PlanView<'a>, config: &'a PlanConfig, attempt: u32) -> Self {
        Self {
            view,
            config,
            // A fetch asks for at least a byte (a zero limit or budget
            // would leave no room between 1 and the most).
            max_fetch: config.max_fetch_bytes.min(view.budget).max(1),
            observed: view.layout.observed(),
            attempt,
        }
    }

    /// Where entry `i` is known to sit.
    fn locate(&self, i: usize) -> Option<Located> {
        let entry = self.view.entries[i];
        if let Some((base, extent)) = self.view.layout.containing(entry.offset) {
            // A hint for this very batch also knows where the record ends;
            // a compressed batch or an observed-only one is read whole, and
            // so is every batch when cut records cannot be used.
            let end = entry
                .hint
                .filter(|h| {
                    self.view.cut_records && h.batch_base == base && h.batch_len == extent.len
                })
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
        if let Some(fetch) = self.to_the_end(start, end) {
            return fetch;
        }
        let first = self.locate(start);
        if first.is_none() && self.observed.bytes_per_offset().is_none() {
            return self.probe(start, end);
        }
        let max = f64::from(self.max_fetch);
        let mut alone_first = false;
        let (offset, at) = match first {
            // The first batch comes whole regardless (KIP-74), so reaching
            // into the rest of it costs nothing.
            Some(l) => (l.base, Position::in_batch(l.base, 0.0, l.batch_len, false)),
            None => {
                let offset = self
                    .view
                    .start_for(self.view.entries[start].offset, self.attempt);
                // The response starts at the batch holding `offset`: on
                // average half a batch before it; on a broker that skips
                // that batch, at the next one, half a batch after it.
                let per_offset = self.observed.bytes_per_offset().unwrap_or(1.0);
                let lead = (self.view.entries[start].offset - offset) as f64 * per_offset;
                let half = self.observed.average_batch() / 2.0;
                let pos = match self.view.misaligned {
                    Some(_) if offset < self.view.entries[start].offset => (lead - half).max(0.0),
                    _ => lead + half,
                };
                // From the entry itself, the batch holding it comes first,
                // whole whatever the limit (KIP-74): the limit pays only
                // for entries past that batch.
                alone_first = self.attempt == 0 && offset == self.view.entries[start].offset;
                (offset, Position::record(pos, per_offset))
            }
        };
        // The first batch comes whole whatever the cap: every entry in it
        // is had in this fetch.
        let cap = max.max(first.map_or(0.0, |l| f64::from(l.batch_len)));
        let fetch = self.extend(start, end, offset, at, cap, alone_first);
        // Starting at the small batch before the first entry's large one
        // instead: that batch comes whole, the large one can then be cut.
        match self.starting_before(start, end) {
            Some(cut) if cut.kind == fetch.kind && cut.max_bytes < fetch.max_bytes => cut,
            _ => fetch,
        }
    }

    /// A run of entries at every offset from its first to the log's end
    /// (a partition only the replayed regions wrote past their
    /// checkpoints; on GreptimeDB's default of a topic per region, every
    /// partition of a restart): every byte from the first entry's batch on
    /// is wanted, and nothing past the run can come, so one fetch claims
    /// the whole run with a limit well past what it is estimated to hold
    /// ([`TO_THE_END_MARGIN`], at most the budget); what the limit cuts
    /// off is asked for again from where it ended. With nothing seen to
    /// estimate from, the limit is the budget: the partition's share of
    /// the replay's memory cap (`crate::replay::Room`). Not the budget
    /// always: a fetch's limit is memory the replay keeps for its answer,
    /// and the estimate keeps most of it free.
    ///
    /// Only where the run's end must be estimated: where the last entry's
    /// batch is known (hints), the usual plan ends the fetch exactly. The
    /// fetch starts at the first entry's batch where it is known, else at
    /// the first entry itself ([`PlanView::start_for`] on a broker seen to
    /// skip the batch holding a mid-batch offset). Kafka answers with the
    /// batch holding it; a broker that skips that batch (Tansu 0.6) sends
    /// the batches after it, which are read as usual, and the entries of
    /// the skipped one are fetched again, from a little lower.
    fn to_the_end(&self, start: usize, end: usize) -> Option<PlannedFetch> {
        let run = self.view.entries.get(start..end)?;
        let (first, last) = (run.first()?, run.last()?);
        let span = last.offset.checked_sub(first.offset)?.checked_add(1)?;
        if last.offset.checked_add(1) != Some(self.view.log_end)
            || span != run.len() as i64
            || self.locate(end - 1).is_some()
        {
            return None;
        }
        let offset = match self.locate(start) {
            Some(l) => l.base,
            None => self.view.start_for(first.offset, self.attempt),
        };
        let max = f64::from(self.max_fetch);
        let limit = self.observed.bytes_per_offset().map_or(max, |per_offset| {
            TO_THE_END_MARGIN * (span as f64 * per_offset + self.observed.average_batch())
        });
        Some(PlannedFetch {
            offset,
            max_bytes: limit.clamp(1.0, max) as u32,
            kind: FetchKind::Indexed {
                entries: start..end,
            },
        })
    }

    /// The run from `start` planned to begin at the known batch right
    /// before the first entry's, which holds nothing still wanted: it comes
    /// whole (KIP-74), and the first entry's batch can then be cut after
    /// the entries wanted of it instead of coming whole. `None` where that
    /// cannot apply (cut records unusable, the batch before unknown or not
    /// adjacent, below the log start, larger than a fetch), and on a
    /// second attempt: a broker that does not cut batches, nor send one
    /// past the byte limit, answers such a fetch with the batch before
    /// only, and a fetch from the first entry's own batch always gets it.
    fn starting_before(&self, start: usize, end: usize) -> Option<PlannedFetch> {
        let l = self.locate(start)?;
        if self.attempt > 0 || !self.view.cut_records || l.record_end >= l.batch_len {
            return None;
        }
        let (previous, extent) = self.view.layout.containing(l.base.checked_sub(1)?)?;
        let adjacent = self.view.layout.next_adjacent(previous).map(|(b, _)| b) == Some(l.base);
        let len = f64::from(extent.len);
        let max = f64::from(self.max_fetch);
        if !adjacent || previous < self.view.log_start || len + f64::from(l.record_end) > max {
            return None;
        }
        let at = Position::in_batch(l.base, len, l.record_end, false);
        Some(self.extend(start, end, previous, at, max, false))
    }

    /// Extends a fetch from `offset`, whose first entry (`start`) sits at
    /// `at`, over the entries after it while that pays; `cap`: the bytes
    /// it may reach. `first_batch`: the fetch starts at the first entry,
    /// in a batch not known, which comes whole whatever the limit: the
    /// entries after it most likely in that batch too (as far as seen,
    /// see [`super::Neighbours`]) cost no bytes, and a fetch of only
    /// those asks for one byte; past them, it goes on only where reading
    /// what lies between costs less than another fetch.
    fn extend(
        &self,
        start: usize,
        end: usize,
        offset: i64,
        mut at: Position,
        cap: f64,
        first_batch: bool,
    ) -> PlannedFetch {
        let batch = self.observed.average_batch();
        let gap_limit = self.config.cost.merge_gap_bytes() as f64;
        let max = f64::from(self.max_fetch);
        let mut last = start;
        // The chance that every entry claimed so far is in the first
        // batch, while it is the likelier; and the last entry claimed so.
        let mut chance = first_batch.then_some(1.0);
        let mut in_first_through = first_batch.then_some(start);
        // The fetch as it was before its latest batch was entered: where it
        // goes back to when the cap cuts that batch short of its wanted
        // entries, whose fetch must then start at that batch's first byte
        // anyway (a prefix of it read here would be read twice).
        let mut before_batch: Option<(Position, usize)> = None;
        for i in start + 1..end {
            // Whether entry `i` is the first one likelier outside the first
            // batch than in it; and whether answers showed pairs like `i`
            // and the entry before it (nearly) never sharing a batch: the
            // first batch then ends between the two.
            let mut leaving_first = false;
            let mut ends_between = false;
            let rest = self.unread_rest(i, end, at.batch.map(|b| b.base));
            let Some(next) = self.position(i, &at, at.end + gap_limit + rest) else {
                break;
            };
            if let Some(c) = chance {
                let d = self.view.entries[i].offset - self.view.entries[i - 1].offset;
                let pair = self.together(d, self.view.one_region(i));
                let c = c * pair;
                if c >= 0.5 {
                    chance = Some(c);
                    at = Position {
                        end: at.end.max(next.end),
                        ..next
                    };
                    (last, in_first_through) = (i, Some(i));
                    continue;
                }
                chance = None;
                leaving_first = true;
                ends_between = pair <= SEEN_APART;
            }
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
            // Up to here the fetch asks for one byte and gets exactly its
            // first batch. Going on reads what lies between that batch and
            // entry `i`'s (the gap less the rest of the first batch and the
            // part of `i`'s before its record, half a batch each on
            // average; both come whole either way) and gives the fetch an
            // estimated end, with its slack; stopping costs one fetch.
            // Where the first batch ends between the entry before `i` and
            // `i` (two regions' adjacent entries on a log written a region
            // per batch), those two parts lie within the gap, and what lies
            // between is never less than nothing. Where only the doubts of
            // many pairs added up, `i` may well be in the first batch still,
            // which stopping would read again: the difference is left to go
            // below nothing, and the fetch reads on.
            if leaving_first {
                let mut between = gap - batch / 2.0 - unknown_start;
                if ends_between {
                    between = between.max(0.0);
                }
                if between + self.estimated_end_slack(batch) > gap_limit {
                    break;
                }
            }
            if !same_batch && gap > allowance {
                break;
            }
            if next.end > cap {
                if next.estimated {
                    return PlannedFetch {
                        offset,
                        max_bytes: self.max_fetch,
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
        let limit = match at.batch {
            // Only the first batch is needed, and it comes whole anyway.
            _ if in_first_through == Some(last) => 1.0,
            // A broker that adds whole batches while it has counted less
            // than the limit: with the limit one byte into the last wanted
            // batch, it adds that batch (it counts no more than the bytes
            // before it) and, that batch counted too, stops; with the
            // limit at the batch's end it would add the next. Tansu counts
            // each batch without its 61-byte header, so it stops there
            // unless the last batch is no longer than 61 bytes for each
            // batch the fetch reads.
            Some(b) if self.view.overshoots && !at.estimated => b.start + 1.0,
            _ => at.end + self.end_slack(&at, batch),
        };
        PlannedFetch {
            offset,
            max_bytes: limit.clamp(1.0, max) as u32,
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
        let per_offset = self.observed.bytes_per_offset()?;
        let (from, from_pos) = match at.batch {
            Some(b) => {
                let (_, extent) = self.view.layout.containing(b.base)?;
                (extent.last_known + 1, b.start + f64::from(extent.len))
            }
            None => (self.view.entries[i - 1].offset + 1, at.end),
        };
        let at_offset = |o: i64| from_pos + (o - from).max(0) as f64 * per_offset;
        Some(match located {
            // Its batch is known: only the bytes before it are estimated.
            Some(l) => Position::in_batch(l.base, at_offset(l.base), l.record_end, true),
            None => Position::record(at_offset(self.view.entries[i].offset), per_offset),
        })
    }

    /// Follows known adjacent batches from `from` (at byte `pos`) to the
    /// batch at `to`; its position, unless the chain breaks or passes `limit`.
    fn walk(&self, from: i64, mut pos: u64, to: i64, limit: u64) -> Option<u64> {
        let mut base = from;
        let mut len = u64::from(self.view.layout.containing(from)?.1.len);
        while base < to {
            let (next, extent) = self.view.layout.next_adjacent(base)?;
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
            offset: self
                .view
                .start_for(self.view.entries[start].offset, self.attempt),
            max_bytes: self.config.probe_bytes,
            kind: FetchKind::Indexed {
                entries: start
                    ..self.entries_within(start, end, u64::from(self.config.probe_bytes), 1.0),
            },
        }
    }

    /// The chance that a wanted entry `d` offsets after another shares its
    /// batch: as seen so far; before that, for the next offset, one writer's
    /// next append, sure (a batch boundary between them is what answers
    /// show, and cheaply: the rest of a fetch claimed in vain is asked for
    /// again, one round trip later, no byte lost); further, even odds up
    /// to the most offsets a batch was seen to span, none past it.
    fn together(&self, d: i64, one_region: bool) -> f64 {
        let within = u64::try_from(d).is_ok_and(|d| d <= self.observed.widest);
        let prior = match d {
            _ if !within => 0.0,
            1 => 1.0,
            _ => 0.5,
        };
        self.view.layout.neighbours().together(d, one_region, prior)
    }

    /// Bytes a fetch ending at `at` reads past it: where the end is
    /// estimated, room for the estimate's error, more when records arrive
    /// only with their whole (compressed) batch.
    fn end_slack(&self, at: &Position, batch: f64) -> f64 {
        match at.estimated {
            true => self.estimated_end_slack(batch),
            false => 0.0,
        }
    }

    /// Bytes a fetch whose end is estimated reads past it (see
    /// [`Plan::end_slack`]).
    fn estimated_end_slack(&self, batch: f64) -> f64 {
        match self.observed.mostly_compressed() {
            true => batch,
            false => batch / 2.0,
        }
    }

    /// How many entries from `start` a fetch of `bytes` might reach, given
    /// `per_offset` bytes per offset; at least one.
    fn entries_within(&self, start: usize, end: usize, bytes: u64, per_offset: f64) -> usize {
        let first = self.view.entries[start].offset;
        let reach = first.saturating_add((bytes as f64 / per_offset.max(1.0)) as i64);
        let n = self.view.entries[start..end].partition_point(|e| e.offset <= reach);
        start + n.max(1)
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
    use crate::plan::{Layout, SeenBatch};

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

    /// The fetches planned one after another for `wanted` of `log` (with
    /// the writer's hints), each for the entries the last did not claim.
    fn plan_all(log: &[Batch], wanted: &[i64], config: PlanConfig) -> Vec<PlannedFetch> {
        let entries = hinted(log, wanted);
        let layout = layout(log);
        plan_entries_in(&entries, &layout, config)
    }

    fn plan_entries_in(
        entries: &[IndexEntry],
        layout: &Layout,
        config: PlanConfig,
    ) -> Vec<PlannedFetch> {
        let mut planner = Planner::new(config);
        let mut fetches = Vec::new();
        let mut start = 0;
        while start < entries.len() {
            let fetch =
                planner.plan_entries(&PlanView::of(entries, layout), start..entries.len(), 0);
            let FetchKind::Indexed { entries: claimed } = &fetch.kind else {
                panic!("an indexed run planned as {fetch:?}");
            };
            assert_eq!(claimed.start, start);
            assert!(claimed.end > start);
            start = claimed.end;
            fetches.push(fetch);
        }
        fetches
    }

    #[test]
    fn a_precise_limit_stops_mid_batch() {
        let log = log(&[10, 10, 10], 100);
        let fetches = plan_all(&log, &[5, 12], PlanConfig::default());
        // From batch 0's start to the end of offset 12's record in batch 1.
        assert_eq!(
            fetches,
            [PlannedFetch {
                offset: 0,
                max_bytes: log[0].len() + log[1].end(2),
                kind: FetchKind::Indexed { entries: 0..2 }
            }]
        );
    }

    /// A small batch before a large one holding an early wanted record:
    /// start at the small one (it comes whole) and cut the large one, as
    /// the floor does; not when cut records cannot be used, nor when the
    /// batch before is as large.
    #[test]
    fn a_small_batch_before_a_large_one_lets_the_fetch_cut_it() {
        let log = vec![
            Batch {
                base: 0,
                n: 1,
                record: 100,
            },
            Batch {
                base: 1,
                n: 50,
                record: 100,
            },
        ];
        let fetches = plan_all(&log, &[2], PlanConfig::default());
        assert_eq!(
            fetches,
            [PlannedFetch {
                offset: 0,
                max_bytes: log[0].len() + log[1].end(1),
                kind: FetchKind::Indexed { entries: 0..1 }
            }]
        );
        // Cut records unusable: the large batch whole.
        let entries = hinted(&log, &[2]);
        let layout = layout(&log);
        let whole = PlanView {
            cut_records: false,
            ..PlanView::of(&entries, &layout)
        };
        let fetch = Planner::new(PlanConfig::default()).plan_entries(&whole, 0..1, 0);
        assert_eq!((fetch.offset, fetch.max_bytes), (1, log[1].len()));
        // A wanted record late in the large batch: cutting saves less than
        // the batch before costs.
        let fetch = plan_all(&log, &[50], PlanConfig::default()).remove(0);
        assert_eq!((fetch.offset, fetch.max_bytes), (1, log[1].len()));
    }

    /// On a broker seen adding whole batches while it has counted less than
    /// the limit, a fetch's limit reaches one byte into its last wanted
    /// batch: a limit at that batch's end would get the next one too.
    #[test]
    fn a_broker_that_overshoots_gets_a_limit_within_the_last_wanted_batch() {
        // Fetches free: no gap is read through.
        let log = log(&[10, 10, 10, 1, 50], 100);
        let entries = hinted(&log, &[5, 12, 32]);
        let config = PlanConfig {
            cost: CostModel {
                round_trip: Duration::ZERO,
                ..CostModel::default()
            },
            ..PlanConfig::default()
        };
        let layout = layout(&log);
        // Such a broker does not cut batches either: the core plans whole
        // ones.
        let overshoots = PlanView {
            overshoots: true,
            cut_records: false,
            ..PlanView::of(&entries, &layout)
        };
        let mut planner = Planner::new(config);
        let fetch = planner.plan_entries(&overshoots, 0..3, 0);
        assert_eq!(
            fetch,
            PlannedFetch {
                offset: 0,
                max_bytes: log[0].len() + 1,
                kind: FetchKind::Indexed { entries: 0..2 }
            }
        );
        // One batch: a limit of one byte, which any broker answers with
        // that batch alone. Not from the small batch before it.
        let fetch = planner.plan_entries(&overshoots, 2..3, 0);
        assert_eq!((fetch.offset, fetch.max_bytes), (31, 1));
        // On Kafka's rules, reading through batches 2 and 3 to cut batch 4
        // after its wanted record costs less than batch 4 whole.
        let fetch = planner.plan_entries(&PlanView::of(&entries, &layout), 0..3, 0);
        let through: u32 = log[..4].iter().map(|b| b.len()).sum();
        assert_eq!(
            (fetch.max_bytes, fetch.kind),
            (
                through + log[4].end(1),
                FetchKind::Indexed { entries: 0..3 }
            )
        );
        // And from the small batch before, alone.
        let fetch = planner.plan_entries(&PlanView::of(&entries, &layout), 2..3, 0);
        assert_eq!(
            (fetch.offset, fetch.max_bytes),
            (30, log[3].len() + log[4].end(1))
        );
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
        let fetch = plan_all(&log, &wanted, config).remove(0);
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
        let mut fetches = plan_all(&log, &[5, 12, 18], config).into_iter();
        let first = fetches.next().unwrap();
        assert_eq!(
            (first.offset, first.max_bytes, first.kind),
            (0, log[0].len(), FetchKind::Indexed { entries: 0..1 })
        );
        let second = fetches.next().unwrap();
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
        let fetch = plan_all(&log, &[9, 11], config).remove(0);
        assert_eq!(
            (fetch.max_bytes, fetch.kind),
            (
                log[0].len() + log[1].len() + log[2].end(0),
                FetchKind::Indexed { entries: 0..2 }
            )
        );
        // Its last record too: the split fetch reads no more of batch 2,
        // and saves batch 1.
        let fetch = plan_all(&log, &[9, 11, 20], config).remove(0);
        assert_eq!(fetch.kind, FetchKind::Indexed { entries: 0..1 });
    }

    /// `batches` observed batches of ten offsets from offset 0, `len`
    /// bytes each, compressed or not.
    fn observed(batches: i64, len: u32, compressed: bool) -> Layout {
        let mut layout = Layout::new();
        for b in 0..batches {
            layout.observe_batch(&SeenBatch {
                base: b * 10,
                last: b * 10 + 9,
                len,
                compressed,
            });
        }
        layout
    }

    #[test]
    fn an_estimated_end_leaves_a_whole_batch_when_batches_are_compressed() {
        let limit = |compressed: bool| {
            // 150 offsets apart: in different batches of 10 offsets.
            let entries = [IndexEntry::offset_only(500), IndexEntry::offset_only(650)];
            let fetches = plan_entries_in(
                &entries,
                &observed(10, 1000, compressed),
                PlanConfig::default(),
            );
            assert_eq!(fetches[0].kind, FetchKind::Indexed { entries: 0..2 });
            fetches[0].max_bytes
        };
        // Half a batch before the first record (the batch holding it
        // starts there on average), that record (100 B per offset), the
        // 149 offsets to the second and its record, then half a batch of
        // room, or a whole one when compressed.
        assert_eq!(limit(false), 500 + 100 + 149 * 100 + 100 + 500);
        assert_eq!(limit(true), 500 + 100 + 149 * 100 + 100 + 1000);
    }

    /// From an entry whose batch is unknown, that batch comes first and
    /// whole whatever the limit (KIP-74): a fetch of it alone asks for one
    /// byte, and so does one whose later entries were mostly seen sharing
    /// a batch with the entry before them.
    #[test]
    fn a_fetch_of_an_unknown_batch_alone_asks_for_one_byte() {
        // The last far past the cost model's merge gap (56 KB).
        let entries: Vec<IndexEntry> = [500, 501, 502, 5000]
            .into_iter()
            .map(IndexEntry::offset_only)
            .collect();
        let plan = |layout: &Layout, run: Range<usize>| {
            Planner::new(PlanConfig::default()).plan_entries(
                &PlanView::of(&entries, layout),
                run,
                0,
            )
        };
        let mut layout = observed(10, 1000, true);
        let alone = plan(&layout, 3..4);
        assert_eq!(
            (alone.offset, alone.max_bytes, alone.kind),
            (5000, 1, FetchKind::Indexed { entries: 3..4 })
        );
        // The next offset is taken to share the batch before any pair was
        // seen: the run to 502, one byte.
        let run = plan(&layout, 0..4);
        assert_eq!(
            (run.offset, run.max_bytes, run.kind),
            (500, 1, FetchKind::Indexed { entries: 0..3 })
        );
        // And after pairs one offset apart were seen in one batch.
        for _ in 0..10 {
            layout.observe_neighbours(1, true, true);
        }
        let run = plan(&layout, 0..4);
        assert_eq!(
            (run.offset, run.max_bytes, run.kind),
            (500, 1, FetchKind::Indexed { entries: 0..3 })
        );
        // Seen apart: the limit reaches for the next entries by estimate.
        let mut apart = observed(10, 1000, true);
        for _ in 0..10 {
            apart.observe_neighbours(1, true, false);
        }
        let run = plan(&apart, 0..4);
        assert!(run.max_bytes > 1000, "{run:?}");
        // Not on a second attempt (a broker may have skipped the batch).
        let again = Planner::new(PlanConfig::default()).plan_entries(
            &PlanView::of(&entries, &layout),
            3..4,
            1,
        );
        assert!(again.max_bytes > 1, "{again:?}");
    }

    /// A recovery's entries are several regions'. Where answers showed two
    /// regions' adjacent entries never sharing a batch (a region per
    /// batch), a fetch of the first region's entries stops at the next
    /// region's: it asks for one byte and gets that batch exactly, rather
    /// than reading on with an estimated end and a compressed batch of
    /// slack, more than a fetch costs at 64 in flight.
    #[test]
    fn a_fetch_stops_where_another_region_begins_on_a_region_per_batch() {
        let entries: Vec<IndexEntry> = [500, 501, 502, 503, 504]
            .into_iter()
            .map(IndexEntry::offset_only)
            .collect();
        let regions = [7, 7, 7, 9, 9];
        let mut layout = observed(10, 10_000, true);
        for _ in 0..40 {
            layout.observe_neighbours(1, true, true);
            layout.observe_neighbours(1, false, false);
        }
        let mut config = PlanConfig::default();
        config.cost.in_flight = 64;
        let plan = |regions: &[usize]| {
            let view = PlanView {
                regions,
                ..PlanView::of(&entries, &layout)
            };
            Planner::new(config).plan_entries(&view, 0..entries.len(), 0)
        };
        let fetch = plan(&regions);
        assert_eq!(
            (fetch.offset, fetch.max_bytes, fetch.kind),
            (500, 1, FetchKind::Indexed { entries: 0..3 })
        );
        // Not told the regions, the pairs look like one region's, which
        // share batches: the fetch claims them all in its first batch.
        let fetch = plan(&[]);
        assert_eq!(
            (fetch.offset, fetch.max_bytes, fetch.kind),
            (500, 1, FetchKind::Indexed { entries: 0..5 })
        );
    }

    #[test]
    fn a_run_at_every_offset_to_the_logs_end_is_one_fetch_from_its_first_entry() {
        // Offsets only, a batch seen ending at 99: entries 100..200 of a
        // log ending at 200 are one fetch, claiming them all.
        let entries: Vec<IndexEntry> = (100..200).map(IndexEntry::offset_only).collect();
        let mut layout = Layout::new();
        layout.observe_batch(&SeenBatch {
            base: 90,
            last: 99,
            len: 1000,
            compressed: true,
        });
        let config = PlanConfig::default();
        let plan = |log_end: i64, entries: &[IndexEntry], layout: &Layout| {
            let view = PlanView {
                log_end,
                ..PlanView::of(entries, layout)
            };
            Planner::new(config).plan_entries(&view, 0..entries.len(), 0)
        };
        // 100 offsets of 100 bytes each seen: four times that and four
        // batches.
        let all = PlannedFetch {
            offset: 100,
            max_bytes: 4 * (100 * 100 + 1000),
            kind: FetchKind::Indexed { entries: 0..100 },
        };
        assert_eq!(plan(200, &entries, &layout), all);
        // A record after the last entry, or a gap between two: what
        // follows the run, or lies within it, may not be wanted.
        assert_ne!(plan(201, &entries, &layout), all);
        let gapped: Vec<IndexEntry> = (100..200)
            .filter(|&o| o != 150)
            .map(IndexEntry::offset_only)
            .collect();
        assert_ne!(plan(200, &gapped, &layout).max_bytes, all.max_bytes);
        // The last entry's batch known: the usual plan knows where the
        // run ends.
        let mut known_end = layout.clone();
        known_end.observe_batch(&SeenBatch {
            base: 190,
            last: 199,
            len: 1000,
            compressed: true,
        });
        assert_ne!(plan(200, &entries, &known_end), all);
        // Nothing seen: one fetch from the first entry, as large as a
        // fetch may be (the budget, here the configured most).
        let unseen = PlannedFetch {
            max_bytes: config.max_fetch_bytes,
            ..all.clone()
        };
        assert_eq!(plan(200, &entries, &Layout::new()), unseen);
        // On a broker seen to skip the batch holding a mid-batch offset,
        // from a little lower: it sends the batch after the one it skips.
        let mut far = Layout::new();
        far.observe_batch(&SeenBatch {
            base: 0,
            last: 9,
            len: 1000,
            compressed: true,
        });
        let skipping = PlanView {
            log_end: 200,
            misaligned: Some(0),
            ..PlanView::of(&entries, &far)
        };
        let fetch = Planner::new(config).plan_entries(&skipping, 0..entries.len(), 0);
        assert_eq!(fetch.kind, all.kind);
        assert!(fetch.offset < 100, "{fetch:?}");
    }

    #[test]
    fn a_zero_fetch_limit_or_budget_plans_one_byte_fetches() {
        let entries: Vec<IndexEntry> = (0..50).map(IndexEntry::offset_only).collect();
        let layout = observed(10, 1000, false);
        let config = PlanConfig {
            max_fetch_bytes: 0,
            ..PlanConfig::default()
        };
        let fetch = Planner::new(config).plan_entries(&PlanView::of(&entries, &layout), 0..50, 0);
        assert_eq!(fetch.max_bytes, 1);
        let no_budget = PlanView {
            budget: 0,
            ..PlanView::of(&entries, &layout)
        };
        let fetch = Planner::new(PlanConfig::default()).plan_entries(&no_budget, 0..50, 0);
        assert_eq!(fetch.max_bytes, 1);
    }

    #[test]
    fn a_full_estimated_fetch_claims_every_entry() {
        // 1000 B per offset seen; 19 MB of wanted offsets: more than one
        // fetch can take.
        let entries: Vec<IndexEntry> = (1000..20_000).map(IndexEntry::offset_only).collect();
        let mut layout = observed(100, 10_000, false);
        // As the answers that showed those batches would have: every
        // wanted offset's next in its batch but the last.
        for k in 0..1000 {
            layout.observe_neighbours(1, true, k % 10 < 9);
        }
        let first = Planner::new(PlanConfig::default()).plan_entries(
            &PlanView::of(&entries, &layout),
            0..entries.len(),
            0,
        );
        assert_eq!(first.max_bytes, PlanConfig::default().max_fetch_bytes);
        assert_eq!(
            first.kind,
            FetchKind::Indexed {
                entries: 0..entries.len()
            },
            "where its response ends is unknown: it claims every entry, and \
             the core hands back what it did not deliver"
        );
    }

    #[test]
    fn a_scan_fetch_starts_at_the_known_batch_below_and_takes_the_most() {
        let log = log(&[10, 10], 100);
        let layout = layout(&log);
        let mut planner = Planner::new(PlanConfig::default());
        let tail = planner.plan_tail(&PlanView::of(&[], &layout), 14, 300, 0);
        assert_eq!((tail.offset, tail.kind), (10, FetchKind::Tail { from: 14 }));
        assert_eq!(tail.max_bytes, PlanConfig::default().max_fetch_bytes);
        // Past the known batches: from the offset itself.
        assert_eq!(
            planner
                .plan_tail(&PlanView::of(&[], &layout), 25, 300, 0)
                .offset,
            25
        );
    }
}
