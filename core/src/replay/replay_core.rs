//! The [`ReplayCore`] itself: the state of one partition's replay, its
//! construction and what a driver may ask of it; the handling of fetches
//! and answers is in `planning`, `settle` and `deliver`.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::absorb::Taken;
use super::queue::WorkQueue;
use super::{
    CutRecords, Decoded, Entry, FetchAnswer, FetchId, RegionRange, RegionStats, ReplayOptions,
    ReplayStats, ResponseDecoder, StrategyKind,
};
use crate::error::Error;
use crate::fetch::FetchedPartition;
use crate::index::{IndexEntry, WalIndex};
use crate::plan::{
    floor_from_layout, EstimatePlanner, FetchRules, FetchStrategy, Layout, PlannedFetch, Planner,
};

/// A fetch is planned within the memory left under the cap only where that
/// is at least this part of its share of the cap (`1/SMALLEST_CUT`, see
/// [`Room::share`](super::Room::share)); with less left it waits for
/// room (but the fetch that keeps a partition going): the crumbs freed
/// as answers are taken would otherwise go out as many small fetches, a
/// round trip each, while large ones hold the rest.
pub(super) const SMALLEST_CUT: u64 = 16;

/// How much an answer is taken to grow once taken before one has shown it:
/// the records of a compressed batch are held decompressed, and batches
/// of WAL entries commonly shrink several times under lz4 or zstd. The
/// fetches sent before the first answer each ask for no more than this
/// part of the memory left; from an answer on, fetches are sized by how
/// much the answers taken grew.
pub(super) const FIRST_GROWTH: u64 = 8;

/// A region as the core tracks it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Region {
    pub(super) range: RegionRange,
    /// Where its records stop being indexed and the scan takes over.
    pub(super) tail_from: i64,
}

/// Where each indexed entry stands.
#[derive(Debug)]
pub(super) enum Slot {
    Pending,
    Ready(Taken),
    Lost,
    Done,
}

/// A fetch in flight: what it was for and its round trip (see
/// [`ReplayStats::round_trips`]).
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) fetch: PlannedFetch,
    /// How long the broker was allowed to wait for its records.
    pub(super) wait: Duration,
    pub(super) round_trip: u64,
    /// The bytes counted in flight for it: its limit, or the batch it
    /// starts in if that is larger (it comes whole, KIP-74).
    pub(super) asked: u64,
    /// What its answer is expected to hold once taken, counted against
    /// the memory cap meanwhile (see [`ReplayCore::held_for`]).
    pub(super) reserved: u64,
}

/// One partition's replay of a set of regions; see the module docs.
pub struct ReplayCore<C = Infallible> {
    pub(super) topic: String,
    pub(super) partition: i32,
    pub(super) regions: Vec<Region>,
    /// The indexed entries wanted, in offset order: the union of the
    /// regions' (shared with the [`ResponseDecoder`]s handed out).
    pub(super) entries: Arc<[IndexEntry]>,
    /// For each entry, its region (an index into `regions`).
    pub(super) entry_regions: Vec<usize>,
    /// What is still to be fetched.
    pub(super) queue: WorkQueue,
    pub(super) end: i64,
    pub(super) options: ReplayOptions,
    pub(super) strategy: Box<dyn FetchStrategy>,
    pub(super) in_flight: BTreeMap<FetchId, InFlight>,
    pub(super) next_id: FetchId,
    pub(super) in_flight_bytes: u64,
    /// What the answers to the fetches in flight are expected to hold.
    pub(super) in_flight_held: u64,
    pub(super) slots: Vec<Slot>,
    pub(super) next_yield: usize,
    pub(super) tail: VecDeque<(usize, Taken)>,
    /// What the records ready to be yielded keep alive (see
    /// [`absorb::hold`](super::absorb::hold)).
    pub(super) buffered_bytes: u64,
    /// What the records taken from answers so far held when taken, and
    /// the bytes of records those answers carried: how much an answer
    /// grows once taken (decompressed), which sizes fetches.
    pub(super) taken_held: u64,
    pub(super) taken_bytes: u64,
    pub(super) stalls: u32,
    pub(super) stats: ReplayStats,
    pub(super) region_stats: Vec<RegionStats>,
    pub(super) started: Instant,
    /// The error that ended the replay, until [`ReplayCore::poll_entry`]
    /// hands it out.
    pub(super) error: Option<Error<C>>,
    pub(super) failed: bool,
    /// Set once the strategy has nothing more to send and nothing is in
    /// flight.
    pub(super) drained: bool,
    /// The log's layout: the batches the index's hints describe (for the
    /// strategy that uses them) and every batch a response showed. The
    /// strategy plans from it and the floor is computed from it.
    pub(super) layout: Layout,
    /// Where each yielded record ends in its batch, for the floor.
    pub(super) yielded_ends: Vec<(i64, Option<u32>)>,
    /// No fetch starts below the log start.
    pub(super) log_start: i64,
    /// Set once the broker skipped the batch containing a mid-batch fetch
    /// offset: the log start it reported (see [`crate::plan::PlanView::misaligned`]).
    pub(super) misaligned: Option<i64>,
    /// Whether each indexed entry is checked to be of its region by
    /// `options.region_rule` when yielded (the rule is known).
    pub(super) verify_entries: bool,
    /// Whether the records of a batch cut at the byte limit can be used:
    /// the policy allows it and, under [`CutRecords::Checked`], no record
    /// without a per-record checksum was met. When not, the strategy plans
    /// whole batches (see [`crate::plan::PlanView::cut_records`]).
    pub(super) cut_usable: bool,
    /// The broker answered a fetch with whole batches past its byte limit
    /// (see [`crate::plan::PlanView::overshoots`]).
    pub(super) overshoots: bool,
    /// A fetch of this replay was answered.
    pub(super) answered: bool,
    /// The highest log end this replay has evidence of: past the index's
    /// last indexed offset (the writer indexes an entry once the broker
    /// acknowledged it) and every high watermark and log end answers
    /// reported. An answer whose high watermark is below it comes from a
    /// replica whose high watermark lags (a follower under KIP-392, a
    /// leader just elected): its empty answer is not the log's end, and
    /// its entries are not lost.
    pub(super) known_end: i64,
    /// The last answer came from such a replica: the next fetch may wait
    /// at the broker for its high watermark to pass.
    pub(super) lagging: bool,
    /// Since the last answer that made progress, one was empty for a
    /// `read_committed` fetch at or past its last stable offset and below
    /// its high watermark: records written, held back by a transaction
    /// still open; the next fetch may wait at the broker for the last
    /// stable offset to pass. That offset, and the first the fetch wanted.
    pub(super) held_back: Option<(i64, i64)>,
    /// The last answer had no records although its fetch offset was below
    /// the readable end, from a replica whose high watermark does not lag:
    /// the broker could not read them within the wait (or skipped the
    /// batch holding the offset, see `misaligned`). The next fetch may wait
    /// at the broker (see
    /// [`OutgoingFetch::max_wait`](super::OutgoingFetch::max_wait)).
    pub(super) unready: bool,
    /// Since the last answer with records, one to a fetch that was allowed
    /// to wait had none below the readable end: the wait was too short.
    pub(super) waited_in_vain: bool,
    /// The wait that got records after a shorter one did not: the broker
    /// needs it, and every later fetch is allowed it (see
    /// [`OutgoingFetch::max_wait`](super::OutgoingFetch::max_wait)).
    pub(super) needed_wait: Duration,
    /// The lowest log end the leader reported below offsets known to have
    /// been written: the log was truncated there (see
    /// `ReplayCore::settle_out_of_range`).
    pub(super) truncated_to: Option<i64>,
}

impl<C> std::fmt::Debug for ReplayCore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayCore")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("regions", &self.regions.len())
            .field("strategy", &self.strategy.name())
            .field("next_yield", &self.next_yield)
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl<C> ReplayCore<C> {
    /// A replay of `regions` of `topic`/`partition` with `index` (the
    /// partition's). `end` is the partition's end offset for regions whose
    /// range runs to the log's end; `now` starts the clock of
    /// [`ReplayStats::time_to_first`].
    ///
    /// Errors: no region, a region asked for twice, a negative or inverted
    /// range, or an index that gives one offset to two regions; an index
    /// that does not match ([`Error::IndexMismatch`]): it records another
    /// topic or partition, a region starts below its first offset, or the
    /// options' rule differs from its own without
    /// [`ReplayOptions::force_rule`]. With the rule known, an entry read at
    /// an indexed offset that is not of its region ends the replay with
    /// that error when its turn to be yielded comes.
    pub fn new(
        topic: impl Into<String>,
        partition: i32,
        index: &WalIndex,
        regions: &[RegionRange],
        mut options: ReplayOptions,
        now: Instant,
    ) -> Result<Self, Error<C>> {
        let topic = topic.into();
        let invalid = |what: String| {
            Error::InvalidArgument(format!("topic {topic:?} partition {partition}: {what}"))
        };
        if regions.is_empty() {
            return Err(invalid("no region to replay".to_owned()));
        }
        let mut tracked: Vec<Region> = Vec::with_capacity(regions.len());
        for r in regions {
            if r.from < 0 || r.to < r.from {
                return Err(invalid(format!(
                    "region {}: the range {}..{} is {}",
                    r.region,
                    r.from,
                    r.to,
                    if r.from < 0 { "negative" } else { "inverted" }
                )));
            }
            if tracked.iter().any(|t| t.range.region == r.region) {
                return Err(invalid(format!("region {} is asked for twice", r.region)));
            }
            // The index covers offsets up to `last_index`; past it, scan.
            let tail_from = index
                .last_index()
                .map_or(r.from, |l| l.saturating_add(1).clamp(r.from, r.to));
            tracked.push(Region {
                range: *r,
                tail_from,
            });
        }
        let bound =
            super::bind::bind(&topic, partition, index, regions, &options).map_err(|mismatch| {
                Error::IndexMismatch {
                    topic: topic.clone(),
                    partition,
                    mismatch,
                }
            })?;
        options.region_rule = Some(bound.rule);
        let end = tracked.iter().map(|r| r.range.to).max().unwrap_or(0);
        // The union of the regions' indexed entries, in offset order.
        let mut union: Vec<(IndexEntry, usize)> = Vec::new();
        for (k, r) in tracked.iter().enumerate() {
            if let Some(region) = index.region(r.range.region) {
                union.extend(
                    region
                        .range(r.range.from, r.tail_from)
                        .iter()
                        .map(|&e| (e, k)),
                );
            }
        }
        union.sort_unstable_by_key(|(e, _)| e.offset);
        if let Some(w) = union.windows(2).find(|w| w[0].0.offset == w[1].0.offset) {
            return Err(invalid(format!(
                "the index gives offset {} to both region {} and region {}",
                w[0].0.offset, tracked[w[0].1].range.region, tracked[w[1].1].range.region
            )));
        }
        let tail = tracked
            .iter()
            .filter(|r| r.tail_from < r.range.to)
            .map(|r| r.tail_from)
            .min()
            .map(|from| from..end);
        let (entries, entry_regions, tail): (Vec<IndexEntry>, Vec<usize>, _) =
            if options.strategy == StrategyKind::Scan {
                // A scan knows nothing of the index: every region's records
                // come from the scan, split by the region rule.
                let from = tracked.iter().map(|r| r.range.from).min().unwrap_or(0);
                for r in &mut tracked {
                    r.tail_from = r.range.from;
                }
                (Vec::new(), Vec::new(), Some(from..end))
            } else {
                let (entries, regions) = union.into_iter().unzip();
                (entries, regions, tail)
            };
        let strategy: Box<dyn FetchStrategy> = match options.strategy {
            StrategyKind::Estimate => Box::new(EstimatePlanner::new()),
            StrategyKind::Index | StrategyKind::Scan => Box::new(Planner::new(options.plan)),
        };
        // The index's hints are for walfetch's planner; the estimate
        // strategy and the scan plan without them, as their originals do.
        let layout = match options.strategy {
            StrategyKind::Index => Layout::from_index(index),
            StrategyKind::Estimate | StrategyKind::Scan => Layout::new(),
        };
        let slots = (0..entries.len()).map(|_| Slot::Pending).collect();
        // A scan reads no index, so takes nothing from it.
        let known_end = match options.strategy {
            StrategyKind::Scan => 0,
            _ => index.last_index().map_or(0, |l| l.saturating_add(1)),
        };
        let queue = WorkQueue::new(entries.len(), tail);
        let region_stats = vec![RegionStats::default(); tracked.len()];
        let cut_usable = options.cut_records != CutRecords::Never;
        Ok(Self {
            topic,
            partition,
            regions: tracked,
            entries: entries.into(),
            entry_regions,
            queue,
            end,
            options,
            strategy,
            in_flight: BTreeMap::new(),
            next_id: 0,
            in_flight_bytes: 0,
            in_flight_held: 0,
            slots,
            next_yield: 0,
            tail: VecDeque::new(),
            buffered_bytes: 0,
            taken_held: 0,
            taken_bytes: 0,
            stalls: 0,
            stats: ReplayStats::default(),
            region_stats,
            started: now,
            error: None,
            failed: false,
            drained: false,
            layout,
            yielded_ends: Vec::new(),
            log_start: 0,
            misaligned: None,
            verify_entries: bound.verify,
            cut_usable,
            overshoots: false,
            answered: false,
            known_end,
            lagging: false,
            held_back: None,
            unready: false,
            waited_in_vain: false,
            needed_wait: Duration::ZERO,
            truncated_to: None,
        })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// Tells the replay the partition's log end as looked up before it
    /// (its high watermark, or last stable offset under `read_committed`):
    /// the offsets below it were written, so an answer reporting a lower
    /// high watermark comes from a replica that lags (a follower, a leader
    /// just elected), and its empty answer is neither the log's end nor a
    /// loss: the next fetch waits at the broker for it to catch up (see
    /// [`OutgoingFetch::max_wait`](super::OutgoingFetch::max_wait)).
    /// `walfetch::consumer::Recovery` calls it with the end it looks up
    /// for ranges that run to the log's end.
    pub fn note_log_end(&mut self, log_end: i64) {
        self.known_end = self.known_end.max(log_end);
    }

    /// The end offset (exclusive) of the replay: the largest of its
    /// regions' ends.
    pub fn end_offset(&self) -> i64 {
        self.end
    }

    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        self.strategy.name()
    }

    /// Fetches answered so far: [`ReplayStats::fetches`] without working
    /// out the rest of [`ReplayCore::stats`] (the floor).
    pub fn fetches(&self) -> u64 {
        self.stats.fetches
    }

    /// Fetches in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The byte limits of fetches in flight.
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// Bytes held: what the buffered records keep alive (for records of
    /// a compressed batch, its decompressed records, unless they were
    /// copied out of them) plus what the answers to the fetches in flight
    /// are expected to hold (their byte limits, grown as answers taken so
    /// far grew once decompressed).
    pub fn held_bytes(&self) -> u64 {
        self.buffered_bytes + self.in_flight_held
    }

    /// Whether the replay has no fetch left to send (it may still have
    /// fetches in flight and entries to yield).
    pub fn is_drained(&self) -> bool {
        self.drained || self.failed || self.error.is_some()
    }

    /// Whether the replay is over: everything yielded (or the error handed
    /// out), nothing in flight.
    pub fn is_finished(&self) -> bool {
        self.failed
            || (self.drained
                && self.in_flight.is_empty()
                && self.next_yield == self.slots.len()
                && self.tail.is_empty())
    }

    /// Ends an unfinished replay that its driver found making no progress
    /// (nothing in flight, nothing to send, nothing to yield) with
    /// [`Error::Stalled`] at the first entry not yet yielded.
    pub fn fail_stalled(&mut self) {
        if self.is_finished() || self.error.is_some() {
            return;
        }
        let offset = self
            .entries
            .get(self.next_yield)
            .map_or(self.end, |e| e.offset);
        self.error = Some(self.stalled_at(offset));
    }

    /// The replay gave up at `offset`, after the fetches counted so far.
    pub(super) fn stalled_at(&self, offset: i64) -> Error<C> {
        Error::Stalled {
            topic: self.topic.clone(),
            partition: self.partition,
            offset,
            attempts: self.stalls,
        }
    }

    /// Plans from now on with `cost`: what a fetch costs on this
    /// partition's link, as the driver learned it (see
    /// [`LinkEstimator`](super::LinkEstimator)), unless the options fix
    /// the cost model.
    pub fn set_cost_model(&mut self, cost: crate::plan::CostModel) {
        if self.options.learn_link {
            self.strategy.set_cost_model(cost);
        }
    }

    /// The round trip a fetch in flight belongs to, if it is in flight.
    pub fn round_trip_of(&self, id: FetchId) -> Option<u64> {
        self.in_flight.get(&id).map(|f| f.round_trip)
    }

    /// Takes in the answer to fetch `id`. An unknown id is ignored.
    pub fn handle_response(&mut self, id: FetchId, answer: FetchAnswer) {
        self.handle_decoded(id, answer, None);
    }

    /// A decoder of the answer to fetch `id`, while it is in flight, for a
    /// driver that decodes answers away from the core (see
    /// [`ResponseDecoder`]).
    pub fn decoder(&self, id: FetchId) -> Option<ResponseDecoder> {
        let fetch = &self.in_flight.get(&id)?.fetch;
        Some(ResponseDecoder {
            id,
            entries: Arc::clone(&self.entries),
            fetch: fetch.clone(),
            options: self.absorb_options(),
        })
    }

    /// Takes in the answer to fetch `id` with what its decoder made of it,
    /// if anything: [`ReplayCore::handle_response`] without reading the
    /// answer again (unless the decoder's reading does not hold, see
    /// [`ResponseDecoder::decode`]). An unknown id is ignored.
    pub fn handle_decoded(&mut self, id: FetchId, answer: FetchAnswer, decoded: Option<Decoded>) {
        let Some(InFlight {
            fetch,
            wait,
            round_trip,
            ..
        }) = self.take_in_flight(id)
        else {
            return;
        };
        self.stats.round_trips = self.stats.round_trips.max(round_trip);
        if self.failed || self.error.is_some() {
            return;
        }
        // A reading of another fetch's answer is not used.
        let decoded = decoded.filter(|d| d.id == id);
        if let Err(err) = self.settle(fetch, wait, answer, decoded) {
            self.error = Some(err);
        }
    }

    /// Fetch `id` failed (after the client's retries): the replay ends
    /// with `error` (the client's error, or what it converts to).
    pub fn handle_error(&mut self, id: FetchId, error: impl Into<Error<C>>) {
        if self.take_in_flight(id).is_some() && !self.failed && self.error.is_none() {
            self.error = Some(error.into());
        }
    }

    /// Counts a fetch answered outside the core (the one confirming the
    /// log's end before the replay starts).
    pub fn count_fetch(&mut self, fetched: &FetchedPartition) {
        self.stats.fetches += 1;
        self.stats.round_trips += 1;
        self.stats.wire_bytes += fetched.wire_bytes as u64;
        self.stats.records_bytes += fetched.records.len() as u64;
        self.stats.throttle_time +=
            std::time::Duration::from_millis(u64::try_from(fetched.throttle_time_ms).unwrap_or(0));
    }

    /// The next entry in offset order, if it is here; or the error that
    /// ended the replay, once, after every entry before it.
    pub fn poll_entry(&mut self, now: Instant) -> Option<Result<Entry, Error<C>>> {
        if self.failed {
            return None;
        }
        if let Some(item) = self.pop_ready(now) {
            self.failed = item.is_err();
            return Some(item);
        }
        let error = self.error.take()?;
        self.failed = true;
        Some(Err(error))
    }

    /// The counters so far, with the floor of what was yielded and each
    /// region's figures. The floor is worked out on each call from every
    /// batch seen, in time that grows with them.
    pub fn stats(&self) -> ReplayStats {
        let mut stats = self.stats.clone();
        stats.floor_bytes = floor_from_layout(
            &self.layout,
            self.yielded_ends.iter().copied(),
            FetchRules::Kafka,
        );
        stats.regions = self
            .regions
            .iter()
            .zip(&self.region_stats)
            .map(|(r, s)| (r.range.region, s.clone()))
            .collect();
        stats
    }
}
