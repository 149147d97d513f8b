//! Sizing one fetch over a run of entries: where it starts, how far it
//! extends while reading the gap costs less than another fetch, and its
//! byte limit.

use super::position::Position;
use super::{FetchKind, PlanConfig, PlannedFetch};
use crate::plan::layout::Observed;
use crate::plan::PlanView;

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

/// One fetch being planned: the view, the limits, the attempt.
pub(super) struct Plan<'a> {
    pub(super) view: &'a PlanView<'a>,
    pub(super) config: &'a PlanConfig,
    /// The most the fetch may ask for: the cap, or less where the replay's
    /// memory is short ([`PlanView::budget`]).
    pub(super) max_fetch: u32,
    pub(super) observed: Observed,
    pub(super) attempt: u32,
}

impl<'a> Plan<'a> {
    pub(super) fn new(view: &'a PlanView<'a>, config: &'a PlanConfig, attempt: u32) -> Self {
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
    pub(super) fn plan_run(&self, start: usize, end: usize) -> PlannedFetch {
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
    /// see [`crate::plan::Neighbours`]) cost no bytes, and a fetch of only
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
}
