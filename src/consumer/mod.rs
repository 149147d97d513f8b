//! The consumer: a [`futures::Stream`] of exactly one region's entries, in
//! offset order, read with as few bytes and round trips as Kafka allows.
//!
//! A [`Consumer`] takes its fetches from a [`FetchStrategy`] — walfetch's
//! [`Planner`] by default — keeps several in flight, checks every response
//! (see `absorb`), hands back to the strategy whatever a response did not
//! deliver, and yields entries strictly in index order, then the records of
//! the scan past `last_index`.
//!
//! Correctness never rests on the index's hints or on a broker's habits: a
//! wrong hint, a broker that never cuts batches or one that skips the batch
//! containing a mid-batch offset costs bytes or round trips, never an entry.
//! An indexed offset that no longer exists is an error by default
//! ([`LostPolicy`]).

mod absorb;
mod stats;

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use walfetch_codec::{DecodeOptions, Record};

pub use stats::ReplayStats;

use crate::cluster::{
    ClientError, Cluster, FetchParams, FetchedPartition, IsolationLevel, OffsetSpec,
};
use crate::error::Error;
use crate::error_code::ErrorCode;
use crate::index::{RegionId, WalIndex};
use crate::plan::{
    floor_from_layout, EstimatePlanner, FetchKind, FetchStrategy, Layout, PlanConfig, PlannedFetch,
    Planner,
};
use absorb::{absorb, AbsorbOptions, Response};

/// Which fetch strategy a replay uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StrategyKind {
    /// walfetch's planner: starts and byte limits from the index's layout.
    #[default]
    Index,
    /// GreptimeDB's average-record-size estimate, for comparison.
    Estimate,
    /// Read the whole range, as a consumer without an index must; the
    /// region's entries are filtered out of it.
    Scan,
}

/// What to do about indexed offsets that no longer exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LostPolicy {
    /// Fail with [`Error::LostOffsets`] when the replay reaches one.
    #[default]
    Error,
    /// Skip them; they are listed in [`ReplayStats::lost`].
    Skip,
}

/// How a replay runs.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// The fetch strategy.
    pub strategy: StrategyKind,
    /// Planner limits and cost model.
    pub plan: PlanConfig,
    /// Fetches in flight at once.
    pub max_in_flight: usize,
    /// Cap on buffered records plus the byte limits of fetches in flight;
    /// one fetch is always allowed so a replay cannot stall on it.
    pub max_buffered_bytes: u64,
    /// `read_uncommitted` or `read_committed`.
    pub isolation: IsolationLevel,
    /// Decoding options (CRC checks, decompression cap).
    pub decode: DecodeOptions,
    /// Use the complete records of a batch the broker cut at the byte limit
    /// (uncompressed batches only; their CRC cannot be checked). This is what
    /// lets a precise byte limit stop mid-batch. Default: on.
    pub partial_records: bool,
    /// Indexed offsets that no longer exist.
    pub on_lost: LostPolicy,
    /// Fetches in a row allowed to make no progress before giving up.
    pub max_attempts: u32,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        Self {
            strategy: StrategyKind::Index,
            plan: PlanConfig::default(),
            max_in_flight: 4,
            max_buffered_bytes: 64 << 20,
            isolation: IsolationLevel::ReadUncommitted,
            decode: DecodeOptions::default(),
            partial_records: true,
            on_lost: LostPolicy::Error,
            max_attempts: 16,
        }
    }
}

/// Where a replay reads: one region of one partition, over `from..to`.
#[derive(Debug, Clone)]
pub struct ReplayRange {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The region to replay.
    pub region: RegionId,
    /// First offset (a checkpoint).
    pub from: i64,
    /// End offset (exclusive); `None`: the high watermark (the last stable
    /// offset under `read_committed`) when the replay starts.
    pub to: Option<i64>,
}

/// How a fetch ended.
enum Outcome {
    Fetched(FetchedPartition),
    /// `OFFSET_OUT_OF_RANGE`, with the partition's offsets looked up after.
    OutOfRange {
        log_start: i64,
        log_end: i64,
    },
}

/// A fetch in flight; the `u64` is its round trip (see
/// [`ReplayStats::round_trips`]).
type InFlight = BoxFuture<'static, (PlannedFetch, u64, Result<Outcome, ClientError>)>;

/// Where each indexed entry stands.
#[derive(Debug)]
enum Slot {
    Pending,
    Ready(Record),
    Lost,
    Done,
}

/// A replay of one region; see the module docs. Poll it as a
/// [`Stream`] of records; [`Consumer::stats`] may be read at any time.
pub struct Consumer {
    cluster: Arc<Cluster>,
    topic: String,
    partition: i32,
    region: RegionId,
    to: i64,
    options: ConsumerOptions,
    strategy: Box<dyn FetchStrategy>,
    in_flight: FuturesUnordered<InFlight>,
    in_flight_bytes: u64,
    slots: Vec<Slot>,
    next_yield: usize,
    tail: VecDeque<Record>,
    buffered_bytes: u64,
    stalls: u32,
    stats: ReplayStats,
    started: Instant,
    failed: bool,
    /// Every batch seen, and where each yielded record ends in its batch:
    /// what the floor is computed from.
    seen: Layout,
    yielded_ends: Vec<(i64, Option<u32>)>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("region", &self.region)
            .field("strategy", &self.strategy.name())
            .field("next_yield", &self.next_yield)
            .field("in_flight", &self.in_flight.len())
            .finish()
    }
}

impl Consumer {
    /// Prepares a replay of `range` using `index`. Looks up the end offset
    /// when `range.to` is `None`.
    pub async fn new(
        cluster: Arc<Cluster>,
        index: &WalIndex,
        range: ReplayRange,
        options: ConsumerOptions,
    ) -> Result<Self, Error> {
        let mut stats = ReplayStats::default();
        let to = match range.to {
            Some(to) => to,
            None => log_end(&cluster, &range, options.isolation, &mut stats).await?,
        };
        if range.from < 0 || to < range.from {
            return Err(Error::InvalidArgument(format!(
                "replay range {}..{to} of topic {:?} partition {} is empty or negative",
                range.from, range.topic, range.partition
            )));
        }
        // The index covers offsets up to `last_index`; past it, scan.
        let indexed_end = index
            .last_index()
            .map_or(range.from, |l| (l + 1).clamp(range.from, to));
        let entries = index
            .region(range.region)
            .map(|r| r.range(range.from, indexed_end))
            .unwrap_or_default();
        let tail = (indexed_end < to).then_some(indexed_end..to);
        let strategy: Box<dyn FetchStrategy> = match options.strategy {
            StrategyKind::Index => Box::new(Planner::new(
                entries,
                tail,
                Layout::from_index(index),
                options.plan,
            )),
            StrategyKind::Estimate => Box::new(EstimatePlanner::new(entries, tail)),
            StrategyKind::Scan => Box::new(Planner::new(
                &[],
                Some(range.from..to),
                Layout::new(),
                options.plan,
            )),
        };
        let slots = (0..strategy.entries().len())
            .map(|_| Slot::Pending)
            .collect();
        Ok(Self {
            cluster,
            topic: range.topic,
            partition: range.partition,
            region: range.region,
            to,
            options,
            strategy,
            in_flight: FuturesUnordered::new(),
            in_flight_bytes: 0,
            slots,
            next_yield: 0,
            tail: VecDeque::new(),
            buffered_bytes: 0,
            stalls: 0,
            stats,
            started: Instant::now(),
            failed: false,
            seen: Layout::new(),
            yielded_ends: Vec::new(),
        })
    }

    /// The counters so far, with the floor of what was yielded.
    pub fn stats(&self) -> ReplayStats {
        ReplayStats {
            floor_bytes: floor_from_layout(&self.seen, self.yielded_ends.iter().copied()),
            ..self.stats.clone()
        }
    }

    /// The end offset (exclusive) of the replay.
    pub fn end_offset(&self) -> i64 {
        self.to
    }

    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        self.strategy.name()
    }

    /// Sends fetches while the strategy has some and limits allow.
    fn launch(&mut self) {
        while self.in_flight.len() < self.options.max_in_flight.max(1) {
            let held = self.buffered_bytes + self.in_flight_bytes;
            if !self.in_flight.is_empty() && held >= self.options.max_buffered_bytes {
                break;
            }
            let Some(fetch) = self.strategy.next_fetch() else {
                break;
            };
            self.in_flight_bytes += u64::from(fetch.max_bytes);
            let limit = i32::try_from(fetch.max_bytes).unwrap_or(i32::MAX).max(1);
            let params = FetchParams::new(self.topic.clone(), self.partition, fetch.offset)
                .with_max_bytes(limit)
                .with_max_wait(Duration::ZERO)
                .with_isolation(self.options.isolation);
            let cluster = Arc::clone(&self.cluster);
            // It waits on nothing answered after the latest response seen.
            let round_trip = self.stats.round_trips + 1;
            self.in_flight.push(Box::pin(async move {
                let outcome = fetch_once(&cluster, &params).await;
                (fetch, round_trip, outcome)
            }));
            self.note_buffered();
        }
    }

    fn note_buffered(&mut self) {
        let held = self.buffered_bytes + self.in_flight_bytes;
        self.stats.peak_buffered_bytes = self.stats.peak_buffered_bytes.max(held);
    }

    /// Takes in one answered fetch.
    fn settle(
        &mut self,
        fetch: PlannedFetch,
        outcome: Result<Outcome, ClientError>,
    ) -> Result<(), Error> {
        self.in_flight_bytes -= u64::from(fetch.max_bytes);
        self.stats.fetches += 1;
        let (range, tail_from) = match &fetch.kind {
            FetchKind::Indexed { entries } => (entries.clone(), None),
            FetchKind::Tail { from } => (0..0, Some(*from)),
        };
        let fetched = match outcome? {
            Outcome::Fetched(fetched) => fetched,
            Outcome::OutOfRange { log_start, log_end } => {
                // Entries outside the log are gone; the rest is fetched again,
                // from the log start at the lowest.
                self.strategy.note_log_start(log_start);
                let gone = |o: i64| o < log_start || o >= log_end;
                let mut kept = None;
                let mut progress = false;
                for i in range.clone() {
                    if gone(self.strategy.entries()[i].offset) {
                        progress |= matches!(self.slots[i], Slot::Pending);
                        self.slots[i] = Slot::Lost;
                    } else {
                        kept.get_or_insert(i);
                    }
                }
                self.count_stall(progress, fetch.offset)?;
                self.strategy.observe_response(&fetch, 0, 0);
                if let Some(start) = kept {
                    self.strategy.requeue(start..range.end);
                }
                if let Some(from) = tail_from {
                    // Below the log: resume at its start. Past its end:
                    // nothing more exists.
                    let next = if from >= log_end {
                        self.to
                    } else {
                        from.max(log_start)
                    };
                    self.strategy.tail_progress(next);
                }
                return Ok(());
            }
        };
        self.stats.wire_bytes += fetched.wire_bytes as u64;
        self.stats.records_bytes += fetched.records.len() as u64;
        let response = Response {
            records: fetched.records.clone(),
            aborted: &fetched.aborted_transactions,
        };
        let opts = AbsorbOptions {
            decode: self.options.decode,
            read_committed: self.options.isolation == IsolationLevel::ReadCommitted,
            partial_records: self.options.partial_records,
            tail_end: self.to,
        };
        let absorbed =
            absorb(self.strategy.as_mut(), &fetch, &response, &opts).map_err(|source| {
                Error::Decode {
                    topic: self.topic.clone(),
                    partition: self.partition,
                    fetch_offset: fetch.offset,
                    source,
                }
            })?;
        tracing::debug!(
            strategy = self.strategy.name(),
            offset = fetch.offset,
            max_bytes = fetch.max_bytes,
            kind = ?fetch.kind,
            records_bytes = fetched.records.len(),
            batches = absorbed.batches.len(),
            delivered = absorbed.delivered.len(),
            requeue = ?absorbed.requeue,
            misaligned = absorbed.misaligned,
            "fetch answered"
        );
        for &(base, last, len, _) in &absorbed.batches {
            self.seen.observe(base, last, len);
        }
        if absorbed.misaligned {
            self.strategy
                .note_misaligned(fetched.log_start_offset.max(0));
        }
        let mut progress = !absorbed.delivered.is_empty()
            || !absorbed.lost.is_empty()
            || !absorbed.tail.is_empty();
        for (i, record) in absorbed.delivered {
            if matches!(self.slots[i], Slot::Pending) {
                self.buffered_bytes += record.wire_len() as u64;
                self.slots[i] = Slot::Ready(record);
            }
        }
        for i in absorbed.lost {
            if matches!(self.slots[i], Slot::Pending) {
                self.slots[i] = Slot::Lost;
            }
        }
        for record in absorbed.tail {
            self.buffered_bytes += record.wire_len() as u64;
            self.tail.push_back(record);
        }
        if let Some(requeue) = absorbed.requeue {
            // An empty answer past the log's end means those entries are gone.
            let log_end = fetched.high_watermark;
            if fetched.records.is_empty() && fetch.offset >= log_end && log_end >= 0 {
                for i in requeue {
                    self.slots[i] = Slot::Lost;
                }
                progress = true;
            } else {
                self.strategy.requeue(requeue);
            }
        }
        if let Some(next) = absorbed.tail_next {
            let from = tail_from.unwrap_or(next);
            progress |= next > from;
            // Nothing more exists past the log's end.
            let end = if fetched.records.is_empty() && next >= fetched.high_watermark {
                self.to
            } else {
                next
            };
            progress |= end >= self.to;
            self.strategy.tail_progress(end);
        }
        self.count_stall(progress, fetch.offset)?;
        self.note_buffered();
        Ok(())
    }

    /// Gives up after too many fetches in a row that changed nothing.
    fn count_stall(&mut self, progress: bool, offset: i64) -> Result<(), Error> {
        self.stalls = if progress { 0 } else { self.stalls + 1 };
        if self.stalls > self.options.max_attempts {
            return Err(Error::Stalled {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                attempts: self.stalls,
            });
        }
        Ok(())
    }

    /// The next record in order, if it is here.
    fn pop_ready(&mut self) -> Option<Result<Record, Error>> {
        while self.next_yield < self.slots.len() {
            match std::mem::replace(&mut self.slots[self.next_yield], Slot::Done) {
                Slot::Ready(record) => {
                    self.next_yield += 1;
                    self.stats.entries += 1;
                    return Some(Ok(self.yielded(record)));
                }
                Slot::Lost => {
                    let offset = self.strategy.entries()[self.next_yield].offset;
                    self.next_yield += 1;
                    self.stats.lost.push(offset);
                    if self.options.on_lost == LostPolicy::Error {
                        // Report every lost offset known now, not only the first.
                        let mut offsets = vec![offset];
                        for (i, slot) in self.slots.iter().enumerate().skip(self.next_yield) {
                            if matches!(slot, Slot::Lost) {
                                offsets.push(self.strategy.entries()[i].offset);
                            }
                        }
                        return Some(Err(Error::LostOffsets {
                            topic: self.topic.clone(),
                            partition: self.partition,
                            region: self.region,
                            offsets,
                        }));
                    }
                }
                pending @ Slot::Pending => {
                    self.slots[self.next_yield] = pending;
                    return None;
                }
                Slot::Done => self.next_yield += 1,
            }
        }
        let record = self.tail.pop_front()?;
        self.stats.tail_records += 1;
        Some(Ok(self.yielded(record)))
    }

    fn yielded(&mut self, record: Record) -> Record {
        self.yielded_ends
            .push((record.offset(), record.batch_range().map(|r| r.end as u32)));
        self.buffered_bytes -= record.wire_len() as u64;
        self.stats.yielded_bytes += record.wire_len() as u64;
        self.stats
            .time_to_first
            .get_or_insert_with(|| self.started.elapsed());
        record
    }
}

/// The end of the log now: the high watermark (the last stable offset under
/// `read_committed`). ListOffsets gives it on Kafka; some brokers answer
/// with the last batch's base offset instead (Tansu 0.6), so a fetch at
/// that offset confirms it: on Kafka an empty answer, elsewhere the last
/// batch. Both count in `stats`.
async fn log_end(
    cluster: &Cluster,
    range: &ReplayRange,
    isolation: IsolationLevel,
    stats: &mut ReplayStats,
) -> Result<i64, Error> {
    let listed = cluster
        .list_offsets(&range.topic, range.partition, OffsetSpec::Latest, isolation)
        .await?
        .offset
        .unwrap_or(0);
    let params = FetchParams::new(range.topic.clone(), range.partition, listed)
        .with_max_bytes(1)
        .with_max_wait(Duration::ZERO)
        .with_isolation(isolation);
    let fetched = cluster.fetch(&params).await?;
    stats.fetches += 1;
    stats.round_trips += 1;
    stats.wire_bytes += fetched.wire_bytes as u64;
    stats.records_bytes += fetched.records.len() as u64;
    let end = match isolation {
        IsolationLevel::ReadCommitted if fetched.last_stable_offset >= 0 => {
            fetched.last_stable_offset
        }
        _ => fetched.high_watermark,
    };
    Ok(end.max(listed))
}

/// One fetch; an `OFFSET_OUT_OF_RANGE` answer is turned into the partition's
/// current offsets so the consumer can tell which entries are gone.
async fn fetch_once(cluster: &Cluster, params: &FetchParams) -> Result<Outcome, ClientError> {
    match cluster.fetch(params).await {
        Ok(fetched) => Ok(Outcome::Fetched(fetched)),
        Err(ClientError::Kafka {
            code: ErrorCode::OffsetOutOfRange,
            ..
        }) => {
            let earliest = cluster
                .list_offsets(
                    &params.topic,
                    params.partition,
                    OffsetSpec::Earliest,
                    params.isolation,
                )
                .await?;
            let latest = cluster
                .list_offsets(
                    &params.topic,
                    params.partition,
                    OffsetSpec::Latest,
                    params.isolation,
                )
                .await?;
            Ok(Outcome::OutOfRange {
                log_start: earliest.offset.unwrap_or(0),
                log_end: latest.offset.unwrap_or(i64::MAX),
            })
        }
        Err(e) => Err(e),
    }
}

impl Stream for Consumer {
    type Item = Result<Record, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        loop {
            if let Some(item) = this.pop_ready() {
                this.failed = item.is_err();
                return Poll::Ready(Some(item));
            }
            this.launch();
            match this.in_flight.poll_next_unpin(cx) {
                Poll::Ready(Some((fetch, round_trip, outcome))) => {
                    this.stats.round_trips = this.stats.round_trips.max(round_trip);
                    if let Err(err) = this.settle(fetch, outcome) {
                        this.failed = true;
                        return Poll::Ready(Some(Err(err)));
                    }
                }
                // Nothing in flight and nothing to send: the replay is over,
                // unless entries are still pending (a strategy that gave up).
                Poll::Ready(None) => {
                    if let Some(i) = this.slots.iter().position(|s| matches!(s, Slot::Pending)) {
                        this.failed = true;
                        return Poll::Ready(Some(Err(Error::Stalled {
                            topic: this.topic.clone(),
                            partition: this.partition,
                            offset: this.strategy.entries()[i].offset,
                            attempts: this.stalls,
                        })));
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
