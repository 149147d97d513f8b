//! Moves fetches between replay cores and the cluster: the only part of a
//! replay that does IO. Shared by [`super::Consumer`] and
//! [`super::Recovery`].

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, FutureExt as _};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;

use crate::cluster::{
    ClientError, Cluster, FetchParams, FetchedPartition, IsolationLevel, OffsetSpec,
};
use crate::error::Error;
use crate::error_code::ErrorCode;
use crate::plan::CostModel;
use crate::replay::{
    Decoded, Entry, FetchAnswer, FetchId, LinkEstimator, ReplayCore, ReplayOptions, ReplayStats,
    ResponseDecoder, Room, LEARNING_IN_FLIGHT,
};

/// What became of a fetch.
struct Answered {
    /// The core it is for, and its id there.
    core: usize,
    id: FetchId,
    /// When it was sent, and when its answer came, before it was decoded.
    sent: Instant,
    received: Instant,
    answer: Result<FetchAnswer, ClientError>,
    /// The answer as its core's decoder read it.
    decoded: Option<Decoded>,
}

/// A fetch to send: its core, its id there, what to fetch.
struct Outgoing {
    core: usize,
    id: FetchId,
    params: FetchParams,
    /// See [`crate::replay::OutgoingFetch::lagging`].
    lagging: bool,
}

/// The most a request carrying several partitions' fetches asks for.
/// Sharing a request saves the broker's per-request work, which counts for
/// small fetches. A broker serves one request's partitions one after
/// another, and caps a response at its own `fetch.max.bytes` (KIP-541,
/// 55 MiB by default), leaving the partitions past it empty; a large fetch
/// goes in a request of its own instead, which another connection carries
/// and the broker may serve beside the others.
const SHARED_REQUEST_BYTES: i64 = 1 << 20;

/// Requests asking for this many bytes or more run, and have their answers
/// decoded, in a task of their own beside the driver (see
/// [`Driver::send`]). A smaller answer decodes in about the time the
/// task's extra hand-offs between threads take, which would add to every
/// round trip of a replay that waits on one fetch at a time.
const DECODE_APART_BYTES: i64 = 128 << 10;

/// What the fetches of a request ask for, together.
fn asked_by(fetches: &[Outgoing]) -> i64 {
    fetches.iter().map(|f| i64::from(f.params.max_bytes)).sum()
}

/// A request's outcome: the Fetch requests it took, the responses that
/// omitted a partition, their throttle time, and the answers of its
/// fetches.
type RequestDone = (usize, usize, Duration, Vec<Answered>);

/// A request in flight.
type InFlight = BoxFuture<'static, RequestDone>;

/// Drives a set of replay cores (one per partition) over one cluster,
/// under one in-flight limit (bytes asked for, and a bound on fetches) and
/// one memory cap.
pub(super) struct Driver {
    cluster: Arc<Cluster>,
    cores: Vec<ReplayCore>,
    /// The topic id each core's fetches are bound to (nil: none; see
    /// [`FetchParams::topic_id`]).
    topic_ids: Vec<Uuid>,
    in_flight: FuturesUnordered<InFlight>,
    /// Fetches in flight (several may share a request).
    fetches_in_flight: usize,
    max_in_flight: usize,
    /// Whether the replay learns the link (`ReplayOptions::learn_link`).
    learning: bool,
    max_in_flight_bytes: u64,
    /// Fetch requests sent so far, with those spent before the replay.
    requests: u64,
    max_buffered_bytes: u64,
    /// Responses that omitted a partition (see [`ReplayStats::omitted`]).
    omitted: u64,
    /// Throttle time of the responses (see [`ReplayStats::throttle_time`]).
    throttle_time: Duration,
    /// The highest round trip answered so far (see
    /// [`ReplayStats::round_trips`]), over every partition.
    answered: u64,
    peak_held: u64,
    /// What fetches cost, per broker (see [`LinkEstimator`]).
    links: HashMap<String, LinkEstimator>,
    /// The broker that last answered each core's fetches.
    brokers: Vec<Option<String>>,
    /// The starting guess of every link.
    prior: CostModel,
    /// The cores that may have an entry or an error to yield, in the order
    /// they take turns; `waiting[i]` says core `i` is in it. A core joins
    /// when the driver hands it something (an answer, an error, a fetch
    /// polled) and leaves when it has nothing to yield, so that an entry
    /// costs one core's poll, not one of every partition's.
    ready: VecDeque<usize>,
    waiting: Vec<bool>,
    /// How many times a core was polled for an entry.
    #[cfg(test)]
    entry_polls: u64,
    /// Where the next turn to send starts, for fairness.
    send_from: usize,
    done: bool,
    /// The check, once every core has ended, that each topic still has the
    /// id its fetches were bound to.
    confirm: Option<BoxFuture<'static, Result<(), Error>>>,
    /// Where large requests run, and their answers are decoded, beside the
    /// driver (see [`Driver::send`]): the runtime it was made in. Without
    /// one (a driver made outside any tokio runtime), every request runs,
    /// and every answer is decoded, as the driver polls them.
    runtime: Option<tokio::runtime::Handle>,
}

impl Driver {
    /// Drives `cores`, each core's fetches bound to its topic id in
    /// `topic_ids` (nil: to none), with the limits of `options`;
    /// `setup_round_trips` were spent before (the lookups of the log's
    /// end, sent side by side).
    pub(super) fn new(
        cluster: Arc<Cluster>,
        cores: Vec<ReplayCore>,
        topic_ids: Vec<Uuid>,
        options: &ReplayOptions,
        setup_round_trips: u64,
    ) -> Self {
        let prior = options.plan.cost;
        let requests = cores.iter().map(ReplayCore::fetches).sum();
        let brokers = vec![None; cores.len()];
        // Every core may have something to yield at first (an error made
        // while it was set up, or nothing to fetch).
        let ready = (0..cores.len()).collect();
        let waiting = vec![true; cores.len()];
        Self {
            cluster,
            cores,
            topic_ids,
            in_flight: FuturesUnordered::new(),
            fetches_in_flight: 0,
            // The fetches confirming the log's end, made before.
            requests,
            max_in_flight: options.max_in_flight.max(1),
            learning: options.learn_link,
            max_in_flight_bytes: options.max_in_flight_bytes,
            max_buffered_bytes: options.max_buffered_bytes,
            omitted: 0,
            throttle_time: Duration::ZERO,
            answered: setup_round_trips,
            peak_held: 0,
            links: HashMap::new(),
            brokers,
            prior,
            ready,
            waiting,
            #[cfg(test)]
            entry_polls: 0,
            send_from: 0,
            done: false,
            confirm: None,
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    pub(super) fn cores(&self) -> &[ReplayCore] {
        &self.cores
    }

    /// Every partition's counters summed, with the round trips and peak
    /// memory of the whole replay.
    pub(super) fn stats(&self) -> ReplayStats {
        let mut total = ReplayStats::default();
        for core in &self.cores {
            total.add(&core.stats());
        }
        total.round_trips = self.answered;
        total.requests = self.requests;
        total.omitted = self.omitted;
        // The cores counted the fetches confirming the log's end.
        total.throttle_time += self.throttle_time;
        total.peak_buffered_bytes = self.peak_held;
        total.links = self
            .links
            .iter()
            .map(|(broker, link)| (broker.clone(), link.stats()))
            .collect();
        total
    }

    /// The next entry of any partition (each partition's in offset order),
    /// the error that ended the replay, or its end.
    pub(super) fn poll_entry(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<(usize, Entry), Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        // Set after a turn with nothing in flight and nothing sent.
        let mut idle = false;
        loop {
            // The requests in flight go on while entries are taken (a
            // retrying request runs as it is polled, against a deadline
            // on the clock): answers already in are handed to their cores
            // before the next entry is.
            while let Poll::Ready(Some(done)) = self.in_flight.poll_next_unpin(cx) {
                self.request_done(done);
            }
            if let Some(item) = self.pop_ready() {
                if item.is_err() {
                    // The replay is over: nothing will read the answers
                    // of the fetches in flight. Dropping them ends their
                    // requests and tasks, and frees their answers.
                    self.done = true;
                    self.in_flight.clear();
                    self.fetches_in_flight = 0;
                }
                return Poll::Ready(Some(item));
            }
            if self.cores.iter().all(ReplayCore::is_finished) {
                // Before the end is told, the topics are confirmed to be
                // the ones the fetches were bound to (`topic_id.rs`).
                let confirm = self.confirm.get_or_insert_with(|| {
                    confirm_topic_ids(Arc::clone(&self.cluster), &self.cores, &self.topic_ids)
                });
                let confirmed = ready!(confirm.poll_unpin(cx));
                self.done = true;
                return Poll::Ready(confirmed.err().map(Err));
            }
            let sent = self.launch();
            match self.in_flight.poll_next_unpin(cx) {
                Poll::Ready(Some(done)) => self.request_done(done),
                // Nothing in flight: a core that sent nothing has ended,
                // failed or has entries ready; the next turn yields them.
                // A second such turn in a row would spin: the cores still
                // unfinished are stalled, and say so.
                Poll::Ready(None) if sent == 0 && idle => {
                    for core in &mut self.cores {
                        core.fail_stalled();
                    }
                    for i in 0..self.cores.len() {
                        self.wake(i);
                    }
                }
                Poll::Ready(None) => idle = sent == 0,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Takes in what a request brought: its counts, and each fetch's answer
    /// handed to its core.
    fn request_done(&mut self, (requests, omitted, throttled, answers): RequestDone) {
        self.requests += requests as u64;
        self.omitted += omitted as u64;
        self.throttle_time += throttled;
        self.fetches_in_flight -= answers.len();
        let changed = self.learning && self.learn(&answers);
        for answered in answers {
            self.settle(answered);
        }
        // Answers taken hold what their records keep alive, which may be
        // more than their fetches asked for (decompressed batches).
        let held: u64 = self.cores.iter().map(ReplayCore::held_bytes).sum();
        self.peak_held = self.peak_held.max(held);
        if changed {
            self.share_links();
        }
        // The client's work on them is not the brokers'.
        let done = Instant::now();
        for link in self.links.values_mut() {
            link.processed(done);
        }
    }

    /// Fetches that may be in flight now. While the replay learns the link
    /// and no broker has answered enough fetches to show what one costs,
    /// one burst's worth ([`LEARNING_IN_FLIGHT`]): the fetches planned
    /// before, with the prior's guess, are few (on a broker that takes
    /// milliseconds a fetch, a full pipeline of small fetches planned for
    /// a cheap link would be dear).
    fn in_flight_limit(&self) -> usize {
        if self.learning && !self.links.values().any(LinkEstimator::learned) {
            self.max_in_flight.min(LEARNING_IN_FLIGHT)
        } else {
            self.max_in_flight
        }
    }

    /// Learns each broker's link from the answers of one request: the
    /// fetches a request carried for several partitions are one service,
    /// of their bytes together, each fetch costing its share of it. Only
    /// while learning: otherwise no link is kept and the cores plan with
    /// the prior throughout. Whether any broker's cost model changed.
    fn learn(&mut self, answers: &[Answered]) -> bool {
        let mut by_broker: HashMap<&str, (Instant, Instant, u64, usize)> = HashMap::new();
        for a in answers {
            if let Ok(FetchAnswer::Fetched(fetched)) = &a.answer {
                let seen = by_broker
                    .entry(&fetched.broker)
                    .or_insert((a.sent, a.received, 0, 0));
                seen.0 = seen.0.min(a.sent);
                seen.1 = seen.1.max(a.received);
                seen.2 += fetched.wire_bytes as u64;
                seen.3 += 1;
            }
        }
        let mut changed = false;
        // An answer decoded in its request's task counts from when it came,
        // not from when its decoding was done: that is the client's work.
        for (broker, (sent, received, bytes, fetches)) in by_broker {
            let prior = self.prior;
            let link = self
                .links
                .entry(broker.to_owned())
                .or_insert_with(|| LinkEstimator::new(prior));
            let before = link.cost_model();
            link.observe_request(sent, received, bytes, fetches);
            let after = link.cost_model();
            if after != before {
                tracing::debug!(
                    broker,
                    learned = link.learned(),
                    per_fetch_us = after.round_trip.as_micros() as u64,
                    mb_per_s = (after.bytes_per_second / 1e6) as u64,
                    merge_gap_bytes = after.merge_gap_bytes(),
                    "link cost model"
                );
                changed = true;
            }
        }
        changed
    }

    /// Hands an answer to its core, with what the link of the broker that
    /// answered costs, and notes that broker.
    fn settle(&mut self, answered: Answered) {
        let Answered {
            core: i,
            id,
            answer,
            decoded,
            ..
        } = answered;
        self.wake(i);
        let core = &mut self.cores[i];
        if let Some(rt) = core.round_trip_of(id) {
            self.answered = self.answered.max(rt);
        }
        match answer {
            Ok(answer) => {
                if let FetchAnswer::Fetched(fetched) = &answer {
                    if let Some(link) = self.links.get(&fetched.broker) {
                        core.set_cost_model(link.cost_model());
                    }
                    if self.brokers[i].as_deref() != Some(fetched.broker.as_str()) {
                        self.brokers[i] = Some(fetched.broker.clone());
                    }
                }
                core.handle_decoded(id, answer, decoded);
            }
            Err(error) => core.handle_error(id, error),
        }
    }

    /// Gives every core what its broker's link costs now, after a link's
    /// cost model changed. Every core, not only those just answered: once
    /// a link is learned the in-flight limit opens, and a core still
    /// planning with the prior would fill it with fetches priced for a
    /// cheap link (on Tansu, four partitions: 50 single-batch fetches
    /// queued at the broker for 100 ms).
    fn share_links(&mut self) {
        for (core, broker) in self.cores.iter_mut().zip(&self.brokers) {
            if let Some(link) = broker.as_ref().and_then(|b| self.links.get(b)) {
                core.set_cost_model(link.cost_model());
            }
        }
    }

    /// Has core `i` polled for entries at the next turns (see
    /// [`Driver::ready`]).
    fn wake(&mut self, i: usize) {
        if !std::mem::replace(&mut self.waiting[i], true) {
            self.ready.push_back(i);
        }
    }

    /// An entry or error ready in some core, taking turns: a core that
    /// yields goes to the back of the turns, one with nothing to yield
    /// leaves them until the driver hands it something.
    fn pop_ready(&mut self) -> Option<Result<(usize, Entry), Error>> {
        if self.ready.is_empty() {
            return None;
        }
        let now = Instant::now();
        while let Some(i) = self.ready.pop_front() {
            #[cfg(test)]
            {
                self.entry_polls += 1;
            }
            if let Some(item) = self.cores[i].poll_entry(now) {
                self.ready.push_back(i);
                return Some(item.map(|entry| (i, entry)));
            }
            self.waiting[i] = false;
        }
        None
    }

    /// Sends what the cores have, taking turns, within the limits; how
    /// many fetches were sent. Fetches known to be answerable within their
    /// own limits travel together (one request per leader, up to
    /// [`SHARED_REQUEST_BYTES`] asked for); the others,
    /// which may need the broker to return their first batch whole past the
    /// limit (which it does for the first partition of a response only),
    /// each in a request of their own.
    fn launch(&mut self) -> usize {
        let n = self.cores.len();
        // Requests of shareable fetches, each to one broker (as far as the
        // cached metadata knows): a request to a slow or failing broker
        // then holds back no other broker's answers.
        let mut together: Vec<(Option<String>, Vec<Outgoing>)> = Vec::new();
        let mut sent = 0;
        // Totals over every core, kept up to date as fetches go out.
        let mut held: u64 = self.cores.iter().map(ReplayCore::held_bytes).sum();
        let mut asked: u64 = self.cores.iter().map(ReplayCore::in_flight_bytes).sum();
        // The memory cap split evenly over the partitions still fetching.
        let fetching = self.cores.iter().filter(|c| !c.is_drained()).count();
        let share = self.max_buffered_bytes / u64::try_from(fetching.max(1)).unwrap_or(1);
        loop {
            let mut any = false;
            for k in 0..n {
                if self.fetches_in_flight >= self.in_flight_limit() {
                    break;
                }
                let i = (self.send_from + k) % n;
                let room = Room {
                    memory: self.max_buffered_bytes.saturating_sub(held),
                    in_flight: self.max_in_flight_bytes.saturating_sub(asked),
                    share,
                };
                let core = &mut self.cores[i];
                let (held_before, asked_before) = (core.held_bytes(), core.in_flight_bytes());
                let drained = core.is_drained();
                let polled = core.poll_fetch(room, self.answered);
                // A core that ends, or gives up on its entries, when
                // polled for a fetch has that to yield.
                if !drained && core.is_drained() {
                    self.wake(i);
                }
                let Some(out) = polled else {
                    continue;
                };
                let core = &mut self.cores[i];
                held += core.held_bytes().saturating_sub(held_before);
                asked += core.in_flight_bytes().saturating_sub(asked_before);
                let limit = i32::try_from(out.max_bytes).unwrap_or(i32::MAX).max(1);
                let params = FetchParams::new(core.topic(), core.partition(), out.offset)
                    .with_max_bytes(limit)
                    .with_max_wait(out.max_wait)
                    .with_isolation(out.isolation)
                    .with_topic_id(self.topic_ids.get(i).copied().unwrap_or_default());
                let fetch = Outgoing {
                    core: i,
                    id: out.id,
                    params,
                    lagging: out.lagging,
                };
                // A request goes to one broker and names a partition once
                // (a partition's second fetch goes in the next request),
                // and asks for at most SHARED_REQUEST_BYTES.
                let to = out
                    .shareable
                    .then(|| {
                        self.cluster
                            .cached_fetch_address(&fetch.params.topic, fetch.params.partition)
                    })
                    .flatten();
                let group = together.iter_mut().find(|(broker, g)| {
                    *broker == to
                        && g.iter().all(|f| f.core != i)
                        && asked_by(g) + i64::from(limit) <= SHARED_REQUEST_BYTES
                });
                match (out.shareable, group) {
                    (true, Some((_, group))) => group.push(fetch),
                    (true, None) => together.push((to, vec![fetch])),
                    (false, _) => self.send(vec![fetch]),
                }
                self.send_from = (i + 1) % n;
                self.fetches_in_flight += 1;
                // What the cap counts now, the fetch's reservation included.
                self.peak_held = self.peak_held.max(held);
                sent += 1;
                any = true;
            }
            if !any || self.fetches_in_flight >= self.in_flight_limit() {
                break;
            }
        }
        for (_, group) in together {
            self.send(group);
        }
        sent
    }

    /// Sends `fetches` (each partition at most once) in one request per
    /// leader. A request that asks for [`DECODE_APART_BYTES`] or more runs
    /// as a task of its own, which also decodes the answers, so that
    /// decoding one response overlaps the driver's work and the other
    /// responses' decoding; a smaller one runs as the driver polls it, and
    /// its answers are decoded by their cores.
    fn send(&mut self, fetches: Vec<Outgoing>) {
        let runtime = self
            .runtime
            .as_ref()
            .filter(|_| asked_by(&fetches) >= DECODE_APART_BYTES);
        let decoders: Vec<Option<ResponseDecoder>> = fetches
            .iter()
            .map(|f| runtime.and_then(|_| self.cores[f.core].decoder(f.id)))
            .collect();
        let cluster = Arc::clone(&self.cluster);
        let ids: Vec<(usize, FetchId)> = fetches.iter().map(|f| (f.core, f.id)).collect();
        let sent = Instant::now();
        let request = async move {
            let params: Vec<FetchParams> = fetches.iter().map(|f| f.params.clone()).collect();
            let many = cluster.fetch_many(&params).await;
            let received = Instant::now();
            let mut answers = Vec::with_capacity(fetches.len());
            for ((fetch, decoder), result) in fetches.into_iter().zip(decoders).zip(many.partitions)
            {
                let answer = out_of_range(&cluster, &fetch, result).await;
                let decoded = match (&answer, &decoder) {
                    (Ok(answer), Some(decoder)) => decoder.decode(answer),
                    _ => None,
                };
                answers.push(Answered {
                    core: fetch.core,
                    id: fetch.id,
                    sent,
                    received,
                    answer,
                    decoded,
                });
            }
            (many.requests, many.omitted, many.throttle_time, answers)
        };
        match runtime {
            Some(runtime) => {
                // Aborted if the driver is dropped before it ends.
                let task = AbortOnDropHandle::new(runtime.spawn(request));
                self.in_flight.push(Box::pin(async move {
                    match task.await {
                        Ok(done) => done,
                        // A panic is the driver's, as if it had run here.
                        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                        // The runtime is shutting down.
                        Err(_) => cancelled(ids, sent),
                    }
                }));
            }
            None => self.in_flight.push(Box::pin(request)),
        }
    }
}

/// Confirms, with one Metadata read naming every topic, that every core's
/// topic still has the id its fetches were bound to
/// ([`Cluster::confirm_topic_ids`]); nil ids are not read.
fn confirm_topic_ids(
    cluster: Arc<Cluster>,
    cores: &[ReplayCore],
    topic_ids: &[Uuid],
) -> BoxFuture<'static, Result<(), Error>> {
    let mut bound: Vec<(String, i32, Uuid)> = Vec::new();
    for (core, &id) in cores.iter().zip(topic_ids) {
        if !id.is_nil() && !bound.iter().any(|(t, _, b)| t == core.topic() && *b == id) {
            bound.push((core.topic().to_owned(), core.partition(), id));
        }
    }
    Box::pin(async move {
        let bound: Vec<(&str, i32, Uuid)> = bound
            .iter()
            .map(|(t, p, id)| (t.as_str(), *p, *id))
            .collect();
        cluster.confirm_topic_ids(&bound).await?;
        Ok(())
    })
}

/// The answers of a request whose task the runtime cancelled.
fn cancelled(ids: Vec<(usize, FetchId)>, sent: Instant) -> RequestDone {
    let received = Instant::now();
    let answers = ids
        .into_iter()
        .map(|(core, id)| Answered {
            core,
            id,
            sent,
            received,
            answer: Err(ClientError::InvalidArgument(
                "the fetch's task was cancelled: the runtime is shutting down".into(),
            )),
            decoded: None,
        })
        .collect();
    (0, 0, Duration::ZERO, answers)
}

/// The end of the log now: the high watermark (the last stable offset under
/// `read_committed`), and the fetch that confirmed it. ListOffsets gives it
/// on Kafka; some brokers answer with the last batch's base offset instead
/// (Tansu 0.6), so a fetch at that offset confirms it: on Kafka an empty
/// answer, elsewhere the last batch. The fetch is bound to `topic_id` (nil:
/// to none; see [`FetchParams::topic_id`]).
pub(super) async fn log_end(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    topic_id: Uuid,
    isolation: IsolationLevel,
) -> Result<(i64, FetchedPartition), Error> {
    let listed = cluster
        .list_offsets(topic, partition, OffsetSpec::Latest, isolation)
        .await?
        .offset
        .unwrap_or(0);
    let params = FetchParams::new(topic, partition, listed)
        .with_max_bytes(1)
        .with_max_wait(Duration::ZERO)
        .with_isolation(isolation)
        .with_topic_id(topic_id);
    let fetched = cluster.fetch(&params).await?;
    let end = fetched.readable_end(isolation);
    Ok((end.max(listed), fetched))
}

/// A fetch's result, an `OFFSET_OUT_OF_RANGE` answer turned into the
/// partition's current offsets so the core can tell which entries are gone.
/// So is an answer with no records at or past its high watermark to a fetch
/// that waited for a replica whose high watermark lags behind offsets the
/// core knows were written ([`crate::replay::OutgoingFetch::lagging`]: the
/// second such answer in a row): the leader's end tells a replica still
/// catching up from a log truncated below those offsets (see
/// `ReplayCore::settle_out_of_range`).
/// The end looked up is the high watermark, whatever the isolation: what a
/// `read_committed` fetch cannot read yet past the last stable offset is
/// not gone. For a fetch bound to a topic id, the topic's id is read again
/// after the offsets and checked ([`Cluster::confirm_topic_id`]): a fetch
/// naming the topic (Fetch below v13) of a topic recreated shorter is
/// answered so too, and its entries are not lost but in another log.
async fn out_of_range(
    cluster: &Cluster,
    fetch: &Outgoing,
    result: Result<FetchedPartition, ClientError>,
) -> Result<FetchAnswer, ClientError> {
    let params = &fetch.params;
    let offsets = || async {
        let (topic, partition) = (params.topic.as_str(), params.partition);
        let offset =
            |spec| cluster.list_offsets(topic, partition, spec, IsolationLevel::ReadUncommitted);
        let earliest = offset(OffsetSpec::Earliest).await?;
        let latest = offset(OffsetSpec::Latest).await?;
        // Offsets of a topic recreated are not this log's.
        cluster
            .confirm_topic_id(topic, partition, params.topic_id)
            .await?;
        Ok(FetchAnswer::OutOfRange {
            log_start: earliest.offset.unwrap_or(0),
            log_end: latest.offset.unwrap_or(i64::MAX),
        })
    };
    match result {
        Ok(fetched)
            if fetch.lagging
                && fetched.records.is_empty()
                && params.offset >= fetched.high_watermark =>
        {
            offsets().await
        }
        Ok(fetched) => Ok(FetchAnswer::Fetched(fetched)),
        Err(ClientError::Kafka {
            code: ErrorCode::OffsetOutOfRange,
            ..
        }) => offsets().await,
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;
