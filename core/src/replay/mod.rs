//! The replay core: one partition's replay of any set of regions, as a
//! plain state machine with no IO and no clock (in the style of
//! `quinn-proto`). A driver — `walfetch::consumer::Consumer` for one region,
//! `walfetch::consumer::Recovery` for many regions over many partitions —
//! moves fetches between it and the network:
//!
//! - [`ReplayCore::poll_fetch`] gives the next fetch to send, if the
//!   strategy has one and the limits allow (its offset, byte limit,
//!   isolation and how long the broker may hold it,
//!   [`OutgoingFetch::max_wait`]);
//! - [`ReplayCore::handle_response`] and [`ReplayCore::handle_error`] take
//!   back what became of it ([`ReplayCore::decoder`] and
//!   [`ReplayCore::handle_decoded`] let a driver decode the answer
//!   elsewhere first, on another thread);
//! - [`ReplayCore::poll_entry`] gives the next entry in offset order,
//!   tagged with its region, or the error that ended the replay;
//! - [`ReplayCore::stats`] tells what it cost.
//!
//! Within a partition the plan covers the union of the regions' indexed
//! offsets, so a batch that holds entries of several regions is fetched
//! once. Past `last_index` the partition is scanned once and each record is
//! given to its region by the region rule; records of regions not asked
//! for are never yielded.
//!
//! The core owns what a replay must never get wrong whatever the strategy:
//! which offsets are wanted, checking each response (see `absorb`), what is
//! still to be fetched (see `queue`: what a response did not deliver is
//! asked for again first), the one layout of the log (the index's hints and
//! every batch a response showed; the floor is computed from it), the log
//! start, lost offsets, the back-off on brokers that skip the batch
//! containing a mid-batch offset, stall counting, and the order entries
//! come out in. Strategies ([`crate::plan::Planner`],
//! [`crate::plan::EstimatePlanner`], a scan) only size the next fetch for
//! the run or scan position the core hands them, from a
//! [`crate::plan::PlanView`].
//!
//! # References
//! - Kafka protocol guide, Fetch API; KIP-74 (the first batch comes whole,
//!   the rest is cut at the byte limit); KIP-98 (`read_committed`).

mod absorb;
// Shared with `walfetch`'s recovery builder, not a user's API.
#[doc(hidden)]
pub mod bind;
mod deliver;
mod link;
mod options;
mod planning;
mod queue;
mod settle;
mod stats;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use walfetch_codec::{Error as CodecError, Record};

#[doc(hidden)]
pub use link::LinkEstimator;
pub use link::LinkStats;
#[doc(hidden)]
pub use link::LEARNING_IN_FLIGHT;
pub use options::{CutRecords, LostPolicy, ReplayOptions, StrategyKind};
pub use stats::{RegionStats, ReplayStats};

use std::convert::Infallible;

use crate::error::Error;
use crate::fetch::{FetchedPartition, IsolationLevel};
use crate::index::{IndexEntry, RegionId, WalIndex};
use crate::plan::{
    floor_from_layout, EstimatePlanner, FetchRules, FetchStrategy, Layout, PlannedFetch, Planner,
};
use absorb::{absorb, AbsorbOptions, Absorbed, Response, Taken};
use queue::WorkQueue;

/// A fetch is planned within the memory left under the cap only where that
/// is at least this part of its share of the cap (`1/SMALLEST_CUT`, see
/// [`Room::share`]); with less left it waits for room (but the fetch that
/// keeps a partition going): the crumbs freed as answers are taken would
/// otherwise go out as many small fetches, a round trip each, while large
/// ones hold the rest.
const SMALLEST_CUT: u64 = 16;

/// How much an answer is taken to grow once taken before one has shown it:
/// the records of a compressed batch are held decompressed, and batches
/// of WAL entries commonly shrink several times under lz4 or zstd. A
/// replay's first fetch (which goes alone) asks for no more than this part
/// of the memory left; from its answer on, fetches are sized by how much
/// the answers taken grew.
const FIRST_GROWTH: u64 = 8;

/// How long a fetch may wait at the broker after an answer from a replica
/// whose high watermark lags, or one that held back records past the last
/// stable offset (see [`OutgoingFetch::max_wait`]): librdkafka's default
/// `fetch.wait.max.ms`. With [`ReplayOptions::max_attempts`] answers in a
/// row that still lag, the replay ends stalled ([`Error::Stalled`], or
/// [`Error::Unstable`] past the last stable offset).
pub const LAGGING_WAIT: Duration = Duration::from_millis(500);

/// How long a fetch may wait at the broker after an answer with no records
/// below the readable end (see [`OutgoingFetch::max_wait`]); each such
/// answer in a row doubles it, up to [`LAGGING_WAIT`].
pub const UNREADY_FIRST_WAIT: Duration = Duration::from_millis(10);

/// The wait to allow after `answers` answers in a row with no records below
/// the readable end (none: no wait): [`UNREADY_FIRST_WAIT`], doubled after
/// each further one, up to [`LAGGING_WAIT`].
#[doc(hidden)]
pub fn unready_wait(answers: u32) -> Duration {
    crate::patience::growing_wait(answers, UNREADY_FIRST_WAIT, LAGGING_WAIT)
}

/// One region to replay from a partition: its entries in `from..to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionRange {
    /// The region.
    pub region: RegionId,
    /// First offset (a checkpoint).
    pub from: i64,
    /// End offset, exclusive.
    pub to: i64,
}

/// Names a fetch handed out by [`ReplayCore::poll_fetch`].
pub type FetchId = u64;

/// A fetch to send: the partition's fetch offset and byte limit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutgoingFetch {
    /// Hand it back with the answer.
    pub id: FetchId,
    /// The fetch offset.
    pub offset: i64,
    /// The partition's byte limit.
    pub max_bytes: u32,
    /// The isolation level to fetch with.
    pub isolation: IsolationLevel,
    /// How long the broker may hold the fetch until records come
    /// (`max_wait_ms`): zero, unless the partition's last answer came from
    /// a replica whose high watermark lags behind offsets this replay
    /// knows were written (a follower, or a leader just elected; see
    /// [`OutgoingFetch::lagging`]), or held back, under `read_committed`,
    /// records written past the last stable offset (a transaction still
    /// open), when it is [`LAGGING_WAIT`]: Kafka answers such a fetch as
    /// soon as its high watermark (last stable offset) passes the offset.
    /// After an answer with no records and no error although the fetch
    /// offset was below the readable end (storage that could not be read
    /// within the wait: the protocol allows it, and Kafka answers so when a
    /// read from tiered storage outlasts `remote.fetch.max.wait.ms`), it is
    /// [`UNREADY_FIRST_WAIT`], doubled after each such answer in a row up
    /// to [`LAGGING_WAIT`]; Kafka answers it as soon as records are read.
    /// One fetch at a time is sent then, and an empty answer to a fetch
    /// that could not wait is not counted as a try. Once a wait got records
    /// where a shorter one had not, every later fetch of the partition is
    /// allowed that wait (on Kafka it costs nothing while records are
    /// there to read).
    pub max_wait: Duration,
    /// The partition's last answer came from a replica whose high
    /// watermark lags behind offsets this replay knows were written. An
    /// answer to this fetch with nothing at or past its high watermark is
    /// then to be checked against the leader's offsets (the log may have
    /// been truncated there, see [`FetchAnswer::OutOfRange`]).
    pub lagging: bool,
    /// Whether the fetch may share a request with other partitions' fetches:
    /// it starts at a known batch whose length is within its limit, so it
    /// needs no first batch returned whole past the limit (which a broker
    /// does for the first partition of a response only), the last fetch
    /// of this partition made progress, and it may not wait (`max_wait`
    /// zero: a shared request waits as long as its first fetch allows).
    pub shareable: bool,
}

/// What a driver's limits leave for the next fetch: memory and bytes in
/// flight over every partition it drives, and the fetch's share of the
/// cap. See [`ReplayCore::poll_fetch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes left under the memory cap
    /// ([`ReplayOptions::max_buffered_bytes`]: buffered records plus the
    /// byte limits of fetches in flight). A fetch asks for no more.
    pub memory: u64,
    /// Byte limits still allowed in flight
    /// ([`ReplayOptions::max_in_flight_bytes`]). A pacing limit: with none
    /// left no fetch is given (but the one that keeps a partition going),
    /// and a fetch given is not made smaller for it.
    pub in_flight: u64,
    /// The most one fetch may ask for: the memory cap split evenly over
    /// the partitions still fetching, so that the first of many do not
    /// take it all (`u64::MAX`: not split).
    pub share: u64,
}

impl Room {
    /// No limit.
    pub const UNLIMITED: Self = Self {
        memory: u64::MAX,
        in_flight: u64::MAX,
        share: u64::MAX,
    };

    /// `bytes` of memory left, no in-flight limit, the cap not split.
    pub fn of_memory(bytes: u64) -> Self {
        Self {
            memory: bytes,
            ..Self::UNLIMITED
        }
    }
}

/// What became of a fetch.
#[derive(Debug, Clone)]
pub enum FetchAnswer {
    /// The broker answered with records (possibly none).
    Fetched(FetchedPartition),
    /// The broker answered `OFFSET_OUT_OF_RANGE`, or, to a fetch that
    /// waited for a replica whose high watermark lags
    /// ([`OutgoingFetch::lagging`]), with no records
    /// at or past its high watermark: the partition's offsets, looked up
    /// from the leader after (its high watermark, whatever the isolation).
    /// A log end below offsets known to have been written and at or below
    /// the fetch offset means the log was truncated there (an unclean
    /// leader election): the wanted entries past it are lost.
    OutOfRange {
        /// The log start offset.
        log_start: i64,
        /// The log end offset (high watermark).
        log_end: i64,
    },
}

/// Checks and decodes the answer to one fetch the way the core would, with
/// nothing of the core's state: the CPU-heavy part of taking in a response
/// (batch CRCs, decompression, picking out the wanted records), which a
/// driver may run on another thread while the core goes on. Get one with
/// [`ReplayCore::decoder`] when the fetch is sent; hand what it gives to
/// [`ReplayCore::handle_decoded`] with the answer.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    id: FetchId,
    entries: Arc<[IndexEntry]>,
    fetch: PlannedFetch,
    options: AbsorbOptions,
}

/// A fetch's answer as a [`ResponseDecoder`] read it.
#[derive(Debug)]
pub struct Decoded {
    /// The fetch, and the records read (held, so that no other answer's
    /// can be where they are): a reading handed over with another fetch's
    /// answer is not used.
    id: FetchId,
    records: Bytes,
    result: Result<Absorbed, CodecError>,
}

impl ResponseDecoder {
    /// Reads `answer`; nothing for an `OFFSET_OUT_OF_RANGE` answer.
    ///
    /// It takes the fetch offset to be known not to fall inside a batch,
    /// which only the core can tell: where that matters (the response
    /// starts above the first wanted offset, or failed to decode) and does
    /// not hold, the core reads the answer again itself.
    pub fn decode(&self, answer: &FetchAnswer) -> Option<Decoded> {
        let FetchAnswer::Fetched(fetched) = answer else {
            return None;
        };
        let response = Response::of(fetched, true);
        Some(Decoded {
            id: self.id,
            records: fetched.records.clone(),
            result: absorb(&self.entries, &self.fetch, &response, &self.options),
        })
    }
}

impl Decoded {
    /// Whether this reading stands for the answer `fetched`, to a fetch
    /// whose offset is `aligned` (see [`ResponseDecoder::decode`]).
    fn holds(&self, fetched: &FetchedPartition, aligned: bool) -> bool {
        let same = |a: &Bytes, b: &Bytes| a.as_ptr() == b.as_ptr() && a.len() == b.len();
        same(&self.records, &fetched.records)
            && (aligned || self.result.as_ref().is_ok_and(|a| !a.starts_above))
    }
}

/// One entry of a replay: a record and the region it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The region.
    pub region: RegionId,
    /// The record, its key, value and headers slices of the response.
    pub record: Record,
}

/// A region as the core tracks it.
#[derive(Debug, Clone, Copy)]
struct Region {
    range: RegionRange,
    /// Where its records stop being indexed and the scan takes over.
    tail_from: i64,
}

/// Where each indexed entry stands.
#[derive(Debug)]
enum Slot {
    Pending,
    Ready(Taken),
    Lost,
    Done,
}

/// A fetch in flight: what it was for and its round trip (see
/// [`ReplayStats::round_trips`]).
#[derive(Debug)]
struct InFlight {
    fetch: PlannedFetch,
    /// How long the broker was allowed to wait for its records.
    wait: Duration,
    round_trip: u64,
    /// The bytes counted in flight for it: its limit, or the batch it
    /// starts in if that is larger (it comes whole, KIP-74).
    asked: u64,
    /// What its answer is expected to hold once taken, counted against
    /// the memory cap meanwhile (see [`ReplayCore::held_for`]).
    reserved: u64,
}

/// One partition's replay of a set of regions; see the module docs.
pub struct ReplayCore<C = Infallible> {
    topic: String,
    partition: i32,
    regions: Vec<Region>,
    /// The indexed entries wanted, in offset order: the union of the
    /// regions' (shared with the [`ResponseDecoder`]s handed out).
    entries: Arc<[IndexEntry]>,
    /// For each entry, its region (an index into `regions`).
    entry_regions: Vec<usize>,
    /// What is still to be fetched.
    queue: WorkQueue,
    end: i64,
    options: ReplayOptions,
    strategy: Box<dyn FetchStrategy>,
    in_flight: BTreeMap<FetchId, InFlight>,
    next_id: FetchId,
    in_flight_bytes: u64,
    /// What the answers to the fetches in flight are expected to hold.
    in_flight_held: u64,
    slots: Vec<Slot>,
    next_yield: usize,
    tail: VecDeque<(usize, Taken)>,
    /// What the records ready to be yielded keep alive (see
    /// [`absorb::hold`]).
    buffered_bytes: u64,
    /// What the records taken from answers so far held when taken, and
    /// the bytes of records those answers carried: how much an answer
    /// grows once taken (decompressed), which sizes fetches.
    taken_held: u64,
    taken_bytes: u64,
    stalls: u32,
    stats: ReplayStats,
    region_stats: Vec<RegionStats>,
    started: Instant,
    /// The error that ended the replay, until [`ReplayCore::poll_entry`]
    /// hands it out.
    error: Option<Error<C>>,
    failed: bool,
    /// Set once the strategy has nothing more to send and nothing is in
    /// flight.
    drained: bool,
    /// The log's layout: the batches the index's hints describe (for the
    /// strategy that uses them) and every batch a response showed. The
    /// strategy plans from it and the floor is computed from it.
    layout: Layout,
    /// Where each yielded record ends in its batch, for the floor.
    yielded_ends: Vec<(i64, Option<u32>)>,
    /// No fetch starts below the log start.
    log_start: i64,
    /// Set once the broker skipped the batch containing a mid-batch fetch
    /// offset: the log start it reported (see [`crate::plan::PlanView::misaligned`]).
    misaligned: Option<i64>,
    /// Whether each indexed entry is checked to be of its region by
    /// `options.region_rule` when yielded (the rule is known).
    verify_entries: bool,
    /// Whether the records of a batch cut at the byte limit can be used:
    /// the policy allows it and, under [`CutRecords::Checked`], no record
    /// without a per-record checksum was met. When not, the strategy plans
    /// whole batches (see [`crate::plan::PlanView::cut_records`]).
    cut_usable: bool,
    /// The broker answered a fetch with whole batches past its byte limit
    /// (see [`crate::plan::PlanView::overshoots`]).
    overshoots: bool,
    /// A fetch of this replay was answered.
    answered: bool,
    /// The highest log end this replay has evidence of: past the index's
    /// last indexed offset (the writer indexes an entry once the broker
    /// acknowledged it) and every high watermark and log end answers
    /// reported. An answer whose high watermark is below it comes from a
    /// replica whose high watermark lags (a follower under KIP-392, a
    /// leader just elected): its empty answer is not the log's end, and
    /// its entries are not lost.
    known_end: i64,
    /// The last answer came from such a replica: the next fetch may wait
    /// at the broker for its high watermark to pass.
    lagging: bool,
    /// Since the last answer that made progress, one was empty for a
    /// `read_committed` fetch at or past its last stable offset and below
    /// its high watermark: records written, held back by a transaction
    /// still open; the next fetch may wait at the broker for the last
    /// stable offset to pass. That offset, and the first the fetch wanted.
    held_back: Option<(i64, i64)>,
    /// The last answer had no records although its fetch offset was below
    /// the readable end, from a replica whose high watermark does not lag:
    /// the broker could not read them within the wait (or skipped the
    /// batch holding the offset, see `misaligned`). The next fetch may wait
    /// at the broker (see [`OutgoingFetch::max_wait`]).
    unready: bool,
    /// Since the last answer with records, one to a fetch that was allowed
    /// to wait had none below the readable end: the wait was too short.
    waited_in_vain: bool,
    /// The wait that got records after a shorter one did not: the broker
    /// needs it, and every later fetch is allowed it (see
    /// [`OutgoingFetch::max_wait`]).
    needed_wait: Duration,
    /// The lowest log end the leader reported below offsets known to have
    /// been written: the log was truncated there (see
    /// `ReplayCore::settle_out_of_range`).
    truncated_to: Option<i64>,
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
            bind::bind(&topic, partition, index, regions, &options).map_err(|mismatch| {
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
    /// [`OutgoingFetch::max_wait`]). `walfetch::consumer::Recovery` calls
    /// it with the end it looks up for ranges that run to the log's end.
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
    fn stalled_at(&self, offset: i64) -> Error<C> {
        Error::Stalled {
            topic: self.topic.clone(),
            partition: self.partition,
            offset,
            attempts: self.stalls,
        }
    }

    /// Plans from now on with `cost`: what a fetch costs on this
    /// partition's link, as the driver learned it (see [`LinkEstimator`]),
    /// unless the options fix the cost model.
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

#[cfg(test)]
mod tests {
    use walfetch_codec::{BatchBuilder, NewRecord};

    use super::*;
    use crate::error_code::ErrorCode;

    const REGION: RegionId = 7;

    /// A batch of `REGION`'s records at `base..base + 5`.
    fn batch(base: i64) -> Bytes {
        let records: Vec<NewRecord> = (0..5)
            .map(|i| NewRecord {
                key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
                ..NewRecord::value(i, format!("record {}", base + i64::from(i)))
            })
            .collect();
        BatchBuilder::new(base)
            .encode(&records)
            .expect("encode")
            .bytes
    }

    fn answer(records: Bytes) -> FetchAnswer {
        FetchAnswer::Fetched(FetchedPartition {
            wire_bytes: records.len(),
            records,
            high_watermark: 10,
            last_stable_offset: 10,
            log_start_offset: 0,
            aborted_transactions: Vec::new(),
            error_code: ErrorCode::None,
            broker: "test:9092".to_owned(),
            version: 12,
            throttle_time_ms: 0,
            preferred_read_replica: -1,
        })
    }

    /// A core replaying `REGION`'s offsets 0..10, and its first fetch.
    fn core() -> (ReplayCore, OutgoingFetch) {
        core_of(&(0..10).collect::<Vec<_>>())
    }

    /// A core replaying `REGION`'s `offsets` (offsets only, the index
    /// complete to the last), and its first fetch.
    fn core_of(offsets: &[i64]) -> (ReplayCore, OutgoingFetch) {
        core_with(offsets, ReplayOptions::default())
    }

    /// [`core_of`] with `options`.
    fn core_with(offsets: &[i64], options: ReplayOptions) -> (ReplayCore, OutgoingFetch) {
        let mut index = WalIndex::new();
        for &offset in offsets {
            index
                .push(REGION, IndexEntry::offset_only(offset))
                .expect("push");
        }
        let last = offsets.last().copied().unwrap_or(0);
        index.set_last_index(last);
        let range = RegionRange {
            region: REGION,
            from: 0,
            to: last + 1,
        };
        let mut core =
            ReplayCore::new("t", 0, &index, &[range], options, Instant::now()).expect("core");
        let fetch = core.poll_fetch(Room::UNLIMITED, 0).expect("a first fetch");
        (core, fetch)
    }

    fn yielded(core: &mut ReplayCore) -> Vec<i64> {
        std::iter::from_fn(|| core.poll_entry(Instant::now()))
            .map(|e| e.expect("an entry").record.offset())
            .collect()
    }

    #[test]
    fn a_decoded_answer_is_taken_as_the_core_would_take_it() {
        let both: Bytes = [batch(0), batch(5)].concat().into();
        let (mut direct, fetch) = core();
        direct.handle_response(fetch.id, answer(both.clone()));
        let (mut apart, fetch) = core();
        let reply = answer(both);
        let decoded = apart.decoder(fetch.id).and_then(|d| d.decode(&reply));
        assert!(decoded.is_some());
        apart.handle_decoded(fetch.id, reply, decoded);
        assert_eq!(yielded(&mut apart), (0..10).collect::<Vec<_>>());
        assert_eq!(yielded(&mut direct), (0..10).collect::<Vec<_>>());
    }

    /// The first batch (offsets 0..5) shows the layout that each of
    /// entries 0..4 has its next entry in its batch, and entry 4 not
    /// (entry 5 starts the next batch), whether or not the answer carried
    /// that batch.
    #[test]
    fn an_answer_teaches_which_wanted_entries_share_a_batch() {
        let (mut core, fetch) = core();
        core.handle_response(fetch.id, answer(batch(0)));
        // Four pairs one offset apart in one batch, one not: 4 of 5 seen,
        // after a prior worth two pairs (here 0).
        let n = core.layout.neighbours();
        assert!((n.together(1, true, 0.0) - 4.0 / 7.0).abs() < 1e-9, "{n:?}");
    }

    /// A fetch asking for one byte gets its first batch whole (KIP-74):
    /// the bytes counted in flight for it are those of a batch as seen.
    #[test]
    fn a_fetch_of_one_byte_counts_a_batch_in_flight() {
        // Not a run to the log's end, which would be claimed whole.
        let (mut core, fetch) = core_of(&[0, 500, 5_000_000]);
        core.handle_response(fetch.id, answer(batch(0)));
        let next = core
            .poll_fetch(Room::UNLIMITED, 1)
            .expect("a fetch for 500");
        assert_eq!((next.offset, next.max_bytes), (500, 1));
        assert_eq!(
            core.in_flight_bytes(),
            batch(0).len() as u64,
            "one batch as large as the one seen"
        );
    }

    /// A fetch asks for no more memory than is left under the cap, nor
    /// more than its share of it, and waits for room where little is left;
    /// with too little, only a partition that can yield nothing and has
    /// nothing in flight sends one, of one byte. The in-flight limit only
    /// paces.
    #[test]
    fn a_fetch_asks_for_no_more_than_the_memory_left() {
        // Offsets 0..5 answered, 5..10 (the log's end) still wanted, under
        // a cap of 1600 bytes: fetches are cut to no less than 100.
        let answered = || {
            let options = ReplayOptions::default().with_max_buffered_bytes(1600);
            let (mut core, fetch) = core_with(&(0..10).collect::<Vec<_>>(), options);
            core.handle_response(fetch.id, answer(batch(0)));
            core
        };
        let planned = answered()
            .poll_fetch(Room::UNLIMITED, 1)
            .expect("a fetch for 5..10")
            .max_bytes;
        assert!(planned > 100, "{planned}");
        let mut core = answered();
        let fetch = core.poll_fetch(Room::of_memory(100), 1).expect("a fetch");
        assert_eq!((fetch.offset, fetch.max_bytes), (5, 100));
        // Less left, or none: entries 0..5 wait to be yielded, no fetch.
        let mut core = answered();
        assert_eq!(core.poll_fetch(Room::of_memory(99), 1), None);
        assert_eq!(core.poll_fetch(Room::of_memory(0), 1), None);
        // Once they are yielded the partition can yield nothing more: one
        // fetch of one byte (its first batch whole) keeps it going.
        assert_eq!(yielded(&mut core), (0..5).collect::<Vec<_>>());
        let fetch = core
            .poll_fetch(Room::of_memory(0), 1)
            .expect("a fetch to go on");
        assert_eq!((fetch.offset, fetch.max_bytes), (5, 1));
        // The in-flight limit reached: that fetch goes as planned.
        let mut core = answered();
        yielded(&mut core);
        let paced = Room {
            in_flight: 0,
            ..Room::UNLIMITED
        };
        let fetch = core.poll_fetch(paced, 1).expect("a fetch to go on");
        assert_eq!((fetch.offset, fetch.max_bytes), (5, planned));
        // The cap split over partitions: a fetch asks for its share.
        let shared = Room {
            share: 120,
            ..Room::UNLIMITED
        };
        let fetch = answered().poll_fetch(shared, 1).expect("a fetch");
        assert_eq!((fetch.offset, fetch.max_bytes), (5, 120));
    }

    /// What a record of a compressed batch holds: a slice of the batch's
    /// decompressed records, it keeps them all alive. A few records of a
    /// batch are copied out and held for their own bytes; most of one
    /// keep the batch, held for all of it (once charged only for their
    /// own bytes, however much more they kept).
    #[test]
    fn records_of_a_compressed_batch_are_held_for_what_they_keep_alive() {
        let records: Vec<NewRecord> = (0..100)
            .map(|i| NewRecord {
                key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
                ..NewRecord::value(i, vec![b'x'; 1000])
            })
            .collect();
        let encoded = BatchBuilder::new(0)
            .compression(walfetch_codec::Compression::Lz4)
            .encode(&records)
            .expect("encode");
        let whole: u64 = walfetch_codec::Batches::new(encoded.bytes.clone(), Default::default())
            .flat_map(|b| b.expect("batch").records().expect("records"))
            .map(|r| r.expect("record").wire_len() as u64)
            .sum();
        let answer = FetchAnswer::Fetched(FetchedPartition {
            high_watermark: 100,
            last_stable_offset: 100,
            ..match answer(encoded.bytes.clone()) {
                FetchAnswer::Fetched(f) => f,
                FetchAnswer::OutOfRange { .. } => unreachable!(),
            }
        });
        let held = |wanted: &[i64]| {
            let (mut core, fetch) = core_of(wanted);
            core.handle_response(fetch.id, answer.clone());
            let held = core.held_bytes();
            let own: u64 = std::iter::from_fn(|| core.poll_entry(Instant::now()))
                .map(|e| e.expect("an entry").record.wire_len() as u64)
                .sum();
            (held, own, core.held_bytes())
        };
        // Two records of a hundred: copied out, held for their own bytes.
        let (few, own, after) = held(&[10, 90]);
        assert_eq!((few, after), (own, 0));
        // Sixty: they keep the batch, held for all of it (their shares
        // add up to it), and nothing once yielded.
        let most: Vec<i64> = (0..60).collect();
        let (held_most, own, after) = held(&most);
        assert!(own < whole, "{own} {whole}");
        assert!(
            (whole..whole + 60).contains(&held_most),
            "{held_most} {whole}"
        );
        assert_eq!(after, 0);
    }

    /// A record of an uncompressed batch is a slice of the answer's
    /// records, and keeps all of them alive (the response buffer): a few
    /// wanted records of a large answer were charged their own bytes only,
    /// while they held the answer. They are copied out, held for their own
    /// bytes, and the answer is freed; most of an answer keep it, held for
    /// all of it (as records of a compressed batch are).
    #[test]
    fn records_of_an_uncompressed_answer_are_held_for_what_they_keep_alive() {
        let records: Vec<NewRecord> = (0..100)
            .map(|i| NewRecord {
                key: Some(Bytes::copy_from_slice(&REGION.to_be_bytes())),
                ..NewRecord::value(i, vec![b'x'; 1000])
            })
            .collect();
        let encoded = BatchBuilder::new(0).encode(&records).expect("encode");
        let buffer = encoded.bytes.clone();
        let inside = |record: &Record| {
            let at = record.value().map_or(0, |v| v.as_ptr() as usize);
            (buffer.as_ptr() as usize..buffer.as_ptr() as usize + buffer.len()).contains(&at)
        };
        let answer = FetchAnswer::Fetched(FetchedPartition {
            high_watermark: 100,
            last_stable_offset: 100,
            ..match answer(encoded.bytes.clone()) {
                FetchAnswer::Fetched(f) => f,
                FetchAnswer::OutOfRange { .. } => unreachable!(),
            }
        });
        let held = |wanted: &[i64]| {
            let (mut core, fetch) = core_of(wanted);
            core.handle_response(fetch.id, answer.clone());
            let held = core.held_bytes();
            let yielded: Vec<Record> = std::iter::from_fn(|| core.poll_entry(Instant::now()))
                .map(|e| e.expect("an entry").record)
                .collect();
            let own: u64 = yielded.iter().map(|r| r.wire_len() as u64).sum();
            let keep = yielded.iter().any(inside);
            (held, own, keep, core.held_bytes())
        };
        let whole = buffer.len() as u64;
        // Two records of a hundred: copied out, held for their own bytes.
        let (few, own, keep, after) = held(&[10, 90]);
        assert!(!keep, "two records keep an answer of {whole} bytes alive");
        assert_eq!((few, after), (own, 0));
        // Sixty: they keep the answer, held for all of it.
        let most: Vec<i64> = (0..60).collect();
        let (held_most, own, keep, after) = held(&most);
        assert!(keep && own < whole, "{own} {whole}");
        assert!(
            (whole..whole + 60).contains(&held_most),
            "{held_most} {whole}"
        );
        assert_eq!(after, 0);
    }

    /// The same for the scan past `last_index`: two records of the region
    /// among a hundred of others in an uncompressed answer are copied out
    /// of it and held for their own bytes.
    #[test]
    fn records_of_the_scan_in_an_uncompressed_answer_are_copied_out() {
        let records: Vec<NewRecord> = (0..100)
            .map(|i| {
                let region = if i == 10 || i == 90 { REGION } else { 8 };
                NewRecord {
                    key: Some(Bytes::copy_from_slice(&region.to_be_bytes())),
                    ..NewRecord::value(i, vec![b'x'; 1000])
                }
            })
            .collect();
        let encoded = BatchBuilder::new(0).encode(&records).expect("encode");
        let buffer = encoded.bytes.clone();
        let range = RegionRange {
            region: REGION,
            from: 0,
            to: 100,
        };
        let mut core: ReplayCore = ReplayCore::new(
            "t",
            0,
            &WalIndex::new(),
            &[range],
            ReplayOptions::default(),
            Instant::now(),
        )
        .expect("core");
        let fetch = core.poll_fetch(Room::UNLIMITED, 0).expect("a fetch");
        core.handle_response(
            fetch.id,
            FetchAnswer::Fetched(FetchedPartition {
                high_watermark: 100,
                last_stable_offset: 100,
                ..match answer(encoded.bytes.clone()) {
                    FetchAnswer::Fetched(f) => f,
                    FetchAnswer::OutOfRange { .. } => unreachable!(),
                }
            }),
        );
        let held = core.held_bytes();
        let yielded: Vec<Record> = std::iter::from_fn(|| core.poll_entry(Instant::now()))
            .map(|e| e.expect("an entry").record)
            .collect();
        assert_eq!(
            yielded.iter().map(Record::offset).collect::<Vec<_>>(),
            [10, 90]
        );
        let own: u64 = yielded.iter().map(|r| r.wire_len() as u64).sum();
        assert_eq!(held, own);
        let start = buffer.as_ptr() as usize;
        assert!(yielded.iter().all(|r| {
            let at = r.value().map_or(0, |v| v.as_ptr() as usize);
            !(start..start + buffer.len()).contains(&at)
        }));
    }

    #[test]
    fn a_reading_of_another_answer_is_not_used() {
        let (mut core, fetch) = core();
        let decoder = core.decoder(fetch.id).expect("in flight");
        // Read from an answer holding the first batch only...
        let first_only = decoder.decode(&answer(batch(0)));
        // ...handed over with one holding both: the core reads that one.
        // (Taken, the reading would give offsets 0..5 only.)
        core.handle_decoded(
            fetch.id,
            answer([batch(0), batch(5)].concat().into()),
            first_only,
        );
        assert_eq!(yielded(&mut core), (0..10).collect::<Vec<_>>());
    }
}
