//! The WAL writer: appends entries of many regions to one partition and
//! builds the index while it writes.
//!
//! # Batches
//! Entries wait in *groups* — one per region in the clustered mode, one
//! for all in the interleaved mode — to become record batches, one
//! Produce request per batch, with `acks = all`. Each entry's record is
//! written into its group's next batch when the writer takes it (as the
//! Java producer writes a record into its batch on `send`), and the
//! batch is compressed (any codec) when it is formed: so the writer reads
//! an entry's bytes while they are fresh, in append order, and compresses
//! one contiguous buffer per batch. The writer takes the entries already
//! queued before it forms a group's batch, so that a batch leaves with
//! every entry appended before it. A group's first entries become a batch
//! when a request
//! slot is free and either they fill [`WriterConfig::max_batch_bytes`] or
//! the group's first entry has waited [`WriterConfig::linger`] since its
//! `append` (the time an entry spent in the channel to the writer task
//! counts; the timer is armed up to 2 ms early, at most half of `linger`,
//! as tokio's timers go off up to 2 ms late). Each group's linger runs
//! from its own first entry, so a region whose first entry came late in
//! another region's linger is not cut short, and groups fall due one by
//! one rather than all at once. Of the groups that may go, the one whose
//! first entry is the oldest goes first: a quiet region's entry waits
//! behind busier regions' batches only as long as their entries are
//! older than it.
//!
//! While every request slot is taken, groups keep growing (the Java
//! producer's accumulator does the same), so under load batches fill up
//! instead of queueing small; the next full batch is meanwhile encoded,
//! so that its encoding overlaps the requests in flight. A flush (and
//! closing the writer) makes batches of every group at once, oldest
//! first. How a group becomes batches is the [`WriterMode`]:
//!
//! - [`WriterMode::Clustered`] (the default): entries are grouped by
//!   region and each region's group becomes its own batches (split at
//!   [`WriterConfig::max_batch_bytes`]). A batch then holds one region, so
//!   a replay of a region skips the other regions' batches whole: the
//!   layout GreptimeDB writes, one batch per region write.
//! - [`WriterMode::Interleaved`]: the entries, in append order, make
//!   batches of up to `max_batch_bytes`: many regions per batch, fewer and
//!   larger batches.
//!
//! Within a region, entries keep their append order in both modes; across
//! regions, of the batches that may go, the one with the oldest first
//! entry goes first.
//!
//! # In flight, and the idempotent producer
//! Up to [`WriterConfig::max_in_flight`] Produce requests (1 to 5, default
//! 5) are in flight at once, pipelined on the leader's primary connection,
//! which keeps them in order. With [`WriterConfig::idempotent`] (the
//! default; required for more than one in flight, as Kafka requires) the
//! writer first asks for a producer id (InitProducerId) and stamps each
//! batch with it, its epoch and the partition's next sequence number
//! (KIP-98). A batch whose answer is lost (the connection breaks, the
//! request times out) or refused with a retriable error is sent again,
//! with every batch after it, with the same sequence numbers and in the
//! same order, after a backoff and until the cluster's retry deadline: the
//! broker appends each batch once and answers a batch it already has with
//! its original offset. A broker may instead answer a duplicate with
//! `DUPLICATE_SEQUENCE_NUMBER` or without an offset (older Kafka); the
//! writer then finds the batch in the log by its producer id and sequence,
//! from the log's end when it took that producer id (past its start, if
//! retention moved it). So it does for an answer it cannot decode (a
//! broker's bug): found, the batch was written; not found, it was not, and
//! its entries fail saying so (without idempotence such entries fail, as
//! the batch may have been written). While the leader cannot be found, every batch
//! waiting is held up: each one's deadline runs from when the writer was
//! first held up, and once the leader is back the batches still within
//! theirs go.
//!
//! The first batch refused for its sequence (`UNKNOWN_PRODUCER_ID`,
//! `OUT_OF_ORDER_SEQUENCE_NUMBER`) with none before it unresolved was not
//! written: the broker no longer knows the producer (Kafka forgets one
//! idle for `producer.id.expiration.ms`, a day by default). It goes again
//! under a new producer id, once, as the Java producer resets its
//! sequences (KIP-360). A batch the broker refuses for good
//! (`MESSAGE_TOO_LARGE`, a sequence refused again, ...) fails its
//! entries; the batches behind it are then, under Kafka's sequence rules,
//! refused too (their sequence no longer follows). The writer waits for
//! their answers, takes a new producer id (sequences start again at 0, as
//! the Java producer does when it resets its producer id) and sends again
//! those that were refused for their sequence. A batch that runs out of
//! retries fails with every batch sent after it whose fate is unknown, and
//! the writer takes a new producer id for what follows; so it does after
//! any batch that fails once its sequence numbers were given out (sent, or
//! encoded ahead while the pipeline was full), since the next batch would
//! leave a gap the broker refuses. Without
//! idempotence (one in flight), a Produce whose answer is lost is not sent
//! again (it may have been appended): its entries fail. An answer whose
//! base offset would put the batch's records past the largest offset
//! fails the batch's entries too, unindexed; the writer goes on.
//!
//! # Records and the index
//! Each entry's record has the region id as its key (8 bytes, big-endian)
//! — the rule `walfetch index build --key` reads back — the payload as its
//! value, its timestamp when the writer took it, and the caller's
//! headers, preceded (with
//! [`WriterConfig::record_checksums`], the default) by the per-record
//! checksum header [`walfetch_codec::RECORD_CHECKSUM_HEADER`]: a CRC32C of
//! key and value that lets a reader check a record it read without the
//! rest of its batch. For every entry the index records its offset and the
//! hints the writer knows exactly: the base offset the broker gave the
//! batch, the batch's encoded length, and where the entry's record ends
//! inside the batch. Batches are indexed in the order they were sent, once
//! acknowledged, so a region's offsets only grow, and `last_index` covers
//! every batch acknowledged.
//!
//! Several writers may share a partition: their batches interleave, and
//! each writer's index covers its own batches; [`WalIndex::merge`] joins
//! them.
//!
//! # References
//! - KIP-98 (idempotent producer: producer ids, epochs, sequence numbers,
//!   the broker's five cached batches per producer); the Java producer's
//!   `max.in.flight.requests.per.connection` (at most 5 with idempotence).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use walfetch_codec::{
    record_checksum_header, BatchBuilder, Batches, Compression, DecodeOptions, NewRecord,
    RecordsBuffer, RECORD_CHECKSUM_HEADER,
};

use crate::cluster::{
    ClientError, Cluster, FetchParams, IsolationLevel, OffsetSpec, ProduceAnswer, ProducerIdentity,
};
use crate::connection::{Connection, ConnectionError};
use crate::error::Error;
use crate::error_code::ErrorCode;
use crate::index::{Hint, IdFormat, IndexEntry, IndexSource, RegionId, RegionRule, WalIndex};

/// Bytes of entries the writer buffers before `append` waits (the Java
/// producer's `buffer.memory` default), unless the pipeline needs more
/// ([`WriterConfig::max_in_flight`] × [`WriterConfig::max_batch_bytes`]).
pub const BUFFER_BYTES: usize = 32 << 20;

/// The most entries the writer task takes from its queue before it looks
/// at its groups again (a bound on how long a due batch can wait for it).
const TAKE_AT_ONCE: usize = 256;

/// The most Produce requests an idempotent producer may have in flight on
/// one partition: the broker remembers the last five batches of each
/// producer, so only those can be recognised when sent again.
pub const MAX_IN_FLIGHT: usize = 5;

/// How waiting entries become batches; see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WriterMode {
    /// Batches of one region each (split at `max_batch_bytes`).
    #[default]
    Clustered,
    /// Batches of entries in append order, regions mixed.
    Interleaved,
}

impl WriterMode {
    /// `clustered` or `interleaved`.
    pub fn name(self) -> &'static str {
        match self {
            WriterMode::Clustered => "clustered",
            WriterMode::Interleaved => "interleaved",
        }
    }
}

/// Settings of a [`WalWriter`]. Build with [`WriterConfig::new`] and the
/// `with_*` setters (or assign the fields).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WriterConfig {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Compression of each batch.
    pub compression: Compression,
    /// A batch is sent once its records reach this many bytes (before
    /// compression). Keep it under the broker's `message.max.bytes`.
    pub max_batch_bytes: usize,
    /// How long a group's first entry may wait for more, from its
    /// `append` (while a request slot is free; its batch may go up to 2 ms
    /// sooner, at most half of `linger`, to make up for late timers; see
    /// the module docs). `Duration::MAX`: batches go only when full or
    /// flushed.
    pub linger: Duration,
    /// Entries queued before `append` waits.
    pub queue: usize,
    /// How waiting entries become batches (default clustered).
    pub mode: WriterMode,
    /// Produce requests in flight at once, 1 to [`MAX_IN_FLIGHT`] (default
    /// 5); more than 1 requires [`WriterConfig::idempotent`].
    pub max_in_flight: usize,
    /// Whether the writer is an idempotent producer (default true): batches
    /// carry a producer id and sequence numbers, and a batch whose answer
    /// was lost is sent again without being appended twice.
    pub idempotent: bool,
    /// Whether every record carries the per-record checksum header
    /// [`walfetch_codec::RECORD_CHECKSUM_HEADER`] (default true; 23 bytes
    /// a record before compression). Turn it off only for readers that
    /// cannot skip an unknown header.
    pub record_checksums: bool,
}

impl WriterConfig {
    /// Defaults for `topic`/`partition`: uncompressed, 256 KiB batches,
    /// 5 ms linger, clustered, 5 in flight, idempotent, record checksums.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
            compression: Compression::None,
            max_batch_bytes: 256 << 10,
            linger: Duration::from_millis(5),
            queue: 16_384,
            mode: WriterMode::Clustered,
            max_in_flight: MAX_IN_FLIGHT,
            idempotent: true,
            record_checksums: true,
        }
    }

    /// Sets [`WriterConfig::compression`].
    pub fn with_compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets [`WriterConfig::max_batch_bytes`].
    pub fn with_max_batch_bytes(mut self, bytes: usize) -> Self {
        self.max_batch_bytes = bytes;
        self
    }

    /// Sets [`WriterConfig::linger`].
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets [`WriterConfig::queue`].
    pub fn with_queue(mut self, entries: usize) -> Self {
        self.queue = entries;
        self
    }

    /// Sets [`WriterConfig::mode`].
    pub fn with_mode(mut self, mode: WriterMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets [`WriterConfig::max_in_flight`].
    pub fn with_max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests;
        self
    }

    /// Sets [`WriterConfig::idempotent`].
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Sets [`WriterConfig::record_checksums`].
    pub fn with_record_checksums(mut self, on: bool) -> Self {
        self.record_checksums = on;
        self
    }

    /// Checks the settings: `max_in_flight` in `1..=5`, and idempotence
    /// when more than one request may be in flight (without it, a batch
    /// sent again after an error could land behind the batches sent after
    /// it, or twice).
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_IN_FLIGHT).contains(&self.max_in_flight) {
            return Err(Error::InvalidArgument(format!(
                "WAL writer max_in_flight must be 1 to {MAX_IN_FLIGHT}, not {}",
                self.max_in_flight
            )));
        }
        if self.max_in_flight > 1 && !self.idempotent {
            return Err(Error::InvalidArgument(format!(
                "WAL writer: {} requests in flight need an idempotent producer \
                 (idempotent = true), as Kafka requires; or set max_in_flight = 1",
                self.max_in_flight
            )));
        }
        Ok(())
    }
}

/// One entry to append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalEntry {
    /// The region it belongs to.
    pub region: RegionId,
    /// The entry's bytes.
    pub payload: Bytes,
    /// Record headers.
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// The bytes the checksum header adds to a record: key, value and their
/// lengths (varints of one byte each).
const CHECKSUM_HEADER_BYTES: usize = RECORD_CHECKSUM_HEADER.len() + 4 + 2;

impl WalEntry {
    /// An entry with no headers.
    pub fn new(region: RegionId, payload: impl Into<Bytes>) -> Self {
        Self {
            region,
            payload: payload.into(),
            headers: Vec::new(),
        }
    }

    /// The bytes this entry counts against [`WriterConfig::max_batch_bytes`]:
    /// its payload and headers plus a fixed allowance for the record's
    /// framing (the checksum header, when the writer adds it, counts on
    /// top).
    pub fn batch_bytes(&self) -> usize {
        32 + self.payload.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.as_ref().map_or(0, Bytes::len) + 4)
                .sum::<usize>()
    }
}

struct Pending {
    entry: WalEntry,
    ack: oneshot::Sender<Result<i64, Error>>,
    /// When `append` was called: an entry's linger runs from there, not
    /// from when the writer task got to it.
    appended: Instant,
}

/// An entry the writer task took, as far as its batch's answer needs it:
/// its record is written into its batch as it is taken.
struct Member {
    region: RegionId,
    ack: oneshot::Sender<Result<i64, Error>>,
}

/// The entries of a group that make its next batch, in append order,
/// their records written as they were taken (while their bytes are
/// fresh: read later, in region order, they are scattered in memory).
struct Open {
    /// The writer's count of entries taken before its first entry: the
    /// age order across groups.
    seq: u64,
    /// When its first entry was appended: the group's linger runs from
    /// there.
    at: Instant,
    /// What its entries count against `max_batch_bytes`.
    bytes: usize,
    members: Vec<Member>,
    records: RecordsBuffer,
}

enum Command {
    Append(Pending),
    Flush(oneshot::Sender<()>),
}

/// The offset an appended entry got, once its batch is written.
#[derive(Debug)]
pub struct Appended(oneshot::Receiver<Result<i64, Error>>, String, i32);

impl std::future::Future for Appended {
    type Output = Result<i64, Error>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        std::pin::Pin::new(&mut this.0).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(Error::WriterClosed {
                    topic: this.1.clone(),
                    partition: this.2,
                })
            })
        })
    }
}

/// Appends WAL entries and builds their index; see the module docs.
#[derive(Debug)]
pub struct WalWriter {
    commands: mpsc::Sender<Command>,
    index: Arc<Mutex<WalIndex>>,
    task: Option<JoinHandle<()>>,
    /// Why the writer never started: its settings are invalid.
    invalid: Option<String>,
    topic: String,
    partition: i32,
}

impl WalWriter {
    /// Starts a writer on `cluster`. With settings
    /// [`WriterConfig::validate`] refuses, the writer does not start and
    /// every call returns that error.
    pub fn new(cluster: Arc<Cluster>, config: WriterConfig) -> Self {
        let (commands, queue) = mpsc::channel(config.queue.max(1));
        let mut fresh = WalIndex::new();
        // What it indexes: the topic id is added once the first batch is
        // written (its leader is then known).
        fresh.set_source(
            IndexSource::new(config.topic.clone(), config.partition)
                .with_rule(RegionRule::Key(IdFormat::BigEndian)),
        );
        let index = Arc::new(Mutex::new(fresh));
        let (topic, partition) = (config.topic.clone(), config.partition);
        let (task, invalid) = match config.validate() {
            Ok(()) => {
                let task = Task::new(cluster, config, Arc::clone(&index));
                (Some(tokio::spawn(task.run(queue))), None)
            }
            Err(Error::InvalidArgument(why)) => (None, Some(why)),
            Err(other) => (None, Some(other.to_string())),
        };
        Self {
            commands,
            index,
            task,
            invalid,
            topic,
            partition,
        }
    }

    fn closed(&self) -> Error {
        match &self.invalid {
            Some(why) => Error::InvalidArgument(why.clone()),
            None => Error::WriterClosed {
                topic: self.topic.clone(),
                partition: self.partition,
            },
        }
    }

    /// Queues an entry (waiting while the queue is full); the returned
    /// future resolves to its offset once its batch is written.
    pub async fn append(&self, entry: WalEntry) -> Result<Appended, Error> {
        if entry.payload.len() > i32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes is too large for a Kafka record",
                entry.payload.len()
            )));
        }
        if self.invalid.is_some() {
            return Err(self.closed());
        }
        let (ack, offset) = oneshot::channel();
        self.commands
            .send(Command::Append(Pending {
                entry,
                ack,
                appended: Instant::now(),
            }))
            .await
            .map_err(|_| self.closed())?;
        Ok(Appended(offset, self.topic.clone(), self.partition))
    }

    /// Waits until every entry queued so far is written (or failed).
    pub async fn flush(&self) -> Result<(), Error> {
        if self.invalid.is_some() {
            return Err(self.closed());
        }
        let (done, wait) = oneshot::channel();
        self.commands
            .send(Command::Flush(done))
            .await
            .map_err(|_| self.closed())?;
        wait.await.map_err(|_| self.closed())
    }

    /// The index of everything written so far.
    pub fn index(&self) -> WalIndex {
        lock(&self.index).clone()
    }

    /// Writes what is queued, stops the writer and returns the index.
    pub async fn close(mut self) -> Result<WalIndex, Error> {
        let flushed = self.flush().await;
        let (commands, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.commands, commands));
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        flushed?;
        let index = lock(&self.index).clone();
        Ok(index)
    }
}

fn lock(index: &Mutex<WalIndex>) -> MutexGuard<'_, WalIndex> {
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A batch as encoded for one producer stamp.
struct Encoded {
    bytes: Bytes,
    /// Where each record ends in the batch (the batch length when
    /// compressed).
    record_ends: Vec<u32>,
    /// The producer and base sequence it carries (idempotent writers).
    stamp: Option<(ProducerIdentity, i32)>,
}

/// One batch: its entries, in order, and its state.
struct Batch {
    /// The writer's own count of batches, in the order they were formed.
    number: u64,
    entries: Vec<Member>,
    /// Its records, kept to encode them again under a new producer id.
    records: RecordsBuffer,
    encoded: Option<Encoded>,
    /// When it was first tried (the retry deadline runs from there).
    first_try: Option<Instant>,
    /// Whether a request with it ever left: if so, the broker may have it.
    sent: bool,
    /// Its entries' bytes, while counted in the writer's buffered bytes
    /// (until first sent or failed).
    buffered: usize,
    attempts: u32,
    /// Sent again under a new producer id after the broker refused its
    /// sequence (an expired producer): refused so again, it fails.
    renewed: bool,
}

/// A batch whose Produce request is in flight.
struct InFlight {
    batch: Batch,
    answer: ProduceAnswer,
    connection: Arc<Connection>,
    /// Sent while the writer waits out the batches behind a refused one:
    /// a sequence error then means "send again under a new producer id".
    behind_refused: bool,
}

/// The entries not yet in a batch of one region (clustered) or of all
/// (interleaved), in append order, already split into batches: a batch
/// takes entries up to `max_batch_bytes` (at least one).
#[derive(Default)]
struct Group {
    bytes: usize,
    batches: VecDeque<Open>,
}

impl Group {
    /// Whether its first entries make a batch that cannot grow.
    fn full(&self, max_batch_bytes: usize) -> bool {
        self.bytes >= max_batch_bytes
    }

    /// The batch an entry counting `bytes` goes into: the last one, or a
    /// new one when the last cannot take it.
    fn open_for(
        &mut self,
        bytes: usize,
        max_batch_bytes: usize,
        seq: u64,
        at: Instant,
    ) -> &mut Open {
        let fits = self
            .batches
            .back()
            .is_some_and(|b| b.bytes < max_batch_bytes && b.bytes + bytes <= max_batch_bytes);
        if !fits {
            self.batches.push_back(Open {
                seq,
                at,
                bytes: 0,
                members: Vec::new(),
                records: RecordsBuffer::with_capacity(bytes),
            });
        }
        let last = self.batches.len() - 1;
        &mut self.batches[last]
    }

    /// Its first batch.
    fn take_batch(&mut self) -> Option<Open> {
        let taken = self.batches.pop_front()?;
        self.bytes -= taken.bytes;
        Some(taken)
    }
}

/// The writer task's state.
struct Task {
    cluster: Arc<Cluster>,
    config: WriterConfig,
    index: Arc<Mutex<WalIndex>>,
    /// Entries not yet in a batch, by region (clustered) or all under one
    /// key (interleaved); a group with no entries is removed.
    groups: HashMap<RegionId, Group>,
    /// Entries taken so far.
    taken: u64,
    /// When the latest entry taken was appended: entries' times are kept
    /// in the order they were taken (see [`Task::add`]).
    latest: Option<Instant>,
    /// Every group, by the age of its first entry (its `seq`), so that
    /// the oldest is found without looking at every group.
    heads: BTreeMap<u64, RegionId>,
    /// The groups whose first entries make a full batch, likewise.
    full_heads: BTreeMap<u64, RegionId>,
    /// Formed batches not in flight, in the order they must be sent.
    ready: VecDeque<Batch>,
    in_flight: VecDeque<InFlight>,
    next_number: u64,
    /// Flushes waiting for every batch numbered below theirs.
    flushes: Vec<(u64, oneshot::Sender<()>)>,
    producer: Option<ProducerIdentity>,
    next_sequence: i32,
    /// A refused batch ended the producer's sequence: take a new producer
    /// id once the requests in flight are answered.
    reset_producer: bool,
    /// No sends before this (backoff after a retriable failure).
    resume_at: Option<Instant>,
    /// Where the writer's next batch can be in the log, at the earliest:
    /// past its last acknowledged batch.
    search_from: i64,
    /// Bytes of the entries in groups and in the ready batches.
    buffered: usize,
}

impl Task {
    fn new(cluster: Arc<Cluster>, config: WriterConfig, index: Arc<Mutex<WalIndex>>) -> Self {
        Self {
            cluster,
            config,
            index,
            groups: HashMap::new(),
            taken: 0,
            latest: None,
            heads: BTreeMap::new(),
            full_heads: BTreeMap::new(),
            ready: VecDeque::new(),
            in_flight: VecDeque::new(),
            next_number: 0,
            flushes: Vec::new(),
            producer: None,
            next_sequence: 0,
            reset_producer: false,
            resume_at: None,
            search_from: 0,
            buffered: 0,
        }
    }

    /// How many bytes of entries may wait for a request (in groups or
    /// in formed batches): a full pipeline's worth beyond what is in
    /// flight, at least [`BUFFER_BYTES`].
    fn buffer_cap(&self) -> usize {
        (self
            .config
            .max_in_flight
            .saturating_mul(self.config.max_batch_bytes))
        .max(BUFFER_BYTES)
    }

    async fn run(mut self, mut queue: mpsc::Receiver<Command>) {
        let mut closed = false;
        // One timer, moved as the oldest group changes (not one per entry).
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        loop {
            self.form_due(Instant::now());
            self.send_ready().await;
            self.encode_ahead(Instant::now());
            self.answer_flushes();
            if closed
                && self.groups.is_empty()
                && self.ready.is_empty()
                && self.in_flight.is_empty()
            {
                return;
            }
            // With room in the pipeline, wake when the oldest group's linger
            // runs out; without, an answer makes room.
            let deadline = match self.room() {
                true => self.oldest().map(|(_, due)| due),
                false => None,
            };
            if deadline != armed {
                if let Some(at) = deadline {
                    timer.as_mut().reset(at);
                }
                armed = deadline;
            }
            // Take more entries while the buffered ones stay under the
            // cap: past it, a full queue makes `append` wait.
            let accepting = !closed && self.buffered < self.buffer_cap();
            let resume = self.resume_at;
            let head = async {
                match self.in_flight.front_mut() {
                    Some(f) => f.answer.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answer = head => self.on_answer(answer).await,
                // `form_due` at the top of the loop takes the due group.
                () = &mut timer, if armed.is_some() => armed = None,
                () = sleep_until(resume) => self.resume_at = None,
                command = queue.recv(), if accepting => {
                    // Entries already appended go into their groups before
                    // any group is formed: a batch formed first would
                    // leave them behind, and go out smaller.
                    let mut next = command;
                    for taken in 1..=TAKE_AT_ONCE {
                        match next {
                            Some(Command::Append(p)) => self.add(p),
                            Some(Command::Flush(done)) => {
                                self.form_all();
                                self.flushes.push((self.next_number, done));
                                break;
                            }
                            None => {
                                closed = true;
                                self.form_all();
                                break;
                            }
                        }
                        if taken == TAKE_AT_ONCE || self.buffered >= self.buffer_cap() {
                            break;
                        }
                        match queue.try_recv() {
                            Ok(command) => next = Some(command),
                            Err(_) => break,
                        }
                    }
                }
            }
        }
    }

    /// The bytes an entry counts against `max_batch_bytes`.
    fn entry_bytes(&self, entry: &WalEntry) -> usize {
        entry.batch_bytes()
            + if self.config.record_checksums {
                CHECKSUM_HEADER_BYTES
            } else {
                0
            }
    }

    /// Adds an entry to its group, writing its record into the group's
    /// batch to be; an entry whose record cannot be written (a field too
    /// long for Kafka's lengths) is refused alone.
    fn add(&mut self, pending: Pending) {
        let Pending {
            entry,
            ack,
            appended,
        } = pending;
        let bytes = self.entry_bytes(&entry);
        let key = match self.config.mode {
            WriterMode::Clustered => entry.region,
            WriterMode::Interleaved => 0,
        };
        let max = self.config.max_batch_bytes;
        // Appenders on several tasks may reach the channel out of the
        // order of their clocks; kept in the order taken, an older group
        // is never due later than a younger one (by a few microseconds at
        // most), which lets `next_group` look at the oldest group only.
        let at = self.latest.map_or(appended, |l| l.max(appended));
        let seq = self.taken;
        let checksums = self.config.record_checksums;
        let group = self.groups.entry(key).or_default();
        let was_full = group.full(max);
        let open = group.open_for(bytes, max, seq, at);
        let delta = i32::try_from(open.records.len()).unwrap_or(i32::MAX);
        if let Err(source) = open.records.push(&record(&entry, delta, checksums)) {
            if open.members.is_empty() {
                group.batches.pop_back();
                if group.batches.is_empty() {
                    self.groups.remove(&key);
                }
            }
            let _ = ack.send(Err(Error::Encode {
                topic: self.config.topic.clone(),
                partition: self.config.partition,
                source,
            }));
            return;
        }
        open.bytes += bytes;
        open.members.push(Member {
            region: entry.region,
            ack,
        });
        group.bytes += bytes;
        self.buffered += bytes;
        self.latest = Some(at);
        self.taken += 1;
        let head = group.batches.front().map_or(seq, |b| b.seq);
        if head == seq {
            self.heads.insert(seq, key);
        }
        if !was_full && group.full(max) {
            self.full_heads.insert(head, key);
        }
    }

    /// Whether a new batch could be sent now: nothing formed waits and a
    /// request slot is free.
    fn room(&self) -> bool {
        self.ready.is_empty()
            && self.in_flight.len() < self.config.max_in_flight
            && self.resume_at.is_none()
    }

    /// The group whose first entry is the oldest, and when it is due
    /// ([`due`]).
    fn oldest(&self) -> Option<(RegionId, Instant)> {
        let (_, &key) = self.heads.first_key_value()?;
        let head = self.groups.get(&key)?.batches.front()?;
        Some((key, due(head.at, self.config.linger)))
    }

    /// The group to send next, if one may go at `now`: of the groups whose
    /// first entries make a full batch or whose linger ran out, the one
    /// whose first entry is the oldest, so that a quiet region's entry
    /// waits behind busier regions' batches only as long as they are
    /// older. Groups fall due in age order, so if the oldest is not due,
    /// none is, and the oldest full group goes.
    fn next_group(&self, now: Instant) -> Option<RegionId> {
        match self.oldest()? {
            (key, due) if due <= now => Some(key),
            _ => self.full_heads.first_key_value().map(|(_, &key)| key),
        }
    }

    /// Forms the batches that can be sent now, one per free request slot:
    /// while the pipeline is full, groups keep growing (the Java
    /// producer's accumulator does the same), so under load batches fill
    /// up instead of queueing small.
    fn form_due(&mut self, now: Instant) {
        while self.resume_at.is_none()
            && self.ready.len() + self.in_flight.len() < self.config.max_in_flight
        {
            let Some(key) = self.next_group(now) else {
                return;
            };
            self.form_from(key);
        }
    }

    /// While every request slot is taken, forms the batch to send next, if
    /// it is a full one, and encodes it, so that encoding overlaps the
    /// requests in flight instead of following their answers (a batch
    /// that could still grow is left to grow).
    fn encode_ahead(&mut self, now: Instant) {
        if !self.ready.is_empty()
            || self.in_flight.len() < self.config.max_in_flight
            || self.resume_at.is_some()
            || self.reset_producer
            || (self.config.idempotent && self.producer.is_none())
            || self.full_heads.is_empty()
        {
            return;
        }
        let Some(key) = self.next_group(now) else {
            return;
        };
        let max = self.config.max_batch_bytes;
        if !self.groups.get(&key).is_some_and(|g| g.full(max)) {
            return;
        }
        self.form_from(key);
        if let Some(mut batch) = self.ready.pop_front() {
            // An encoding error is met again, and reported, when it is sent.
            if let Ok(encoded) = self.encode(&batch) {
                batch.encoded = Some(encoded);
            }
            self.ready.push_front(batch);
        }
    }

    /// Forms every entry into batches, oldest group first (a flush, or the
    /// writer closing).
    fn form_all(&mut self) {
        while let Some((key, _)) = self.oldest() {
            self.form_from(key);
        }
    }

    /// Forms one batch of the first entries of `key`'s group.
    fn form_from(&mut self, key: RegionId) {
        let max = self.config.max_batch_bytes;
        let Some(group) = self.groups.get_mut(&key) else {
            return;
        };
        let Some(taken) = group.take_batch() else {
            return;
        };
        self.heads.remove(&taken.seq);
        self.full_heads.remove(&taken.seq);
        match group.batches.front() {
            Some(head) => {
                self.heads.insert(head.seq, key);
                if group.full(max) {
                    self.full_heads.insert(head.seq, key);
                }
            }
            None => {
                self.groups.remove(&key);
            }
        }
        self.form(taken);
    }

    fn form(&mut self, open: Open) {
        self.ready.push_back(Batch {
            buffered: open.bytes,
            number: self.next_number,
            entries: open.members,
            records: open.records,
            encoded: None,
            first_try: None,
            sent: false,
            attempts: 0,
            renewed: false,
        });
        self.next_number += 1;
    }

    /// Answers the flushes whose batches are all written or failed.
    fn answer_flushes(&mut self) {
        if self.flushes.is_empty() {
            return;
        }
        let unresolved = self
            .in_flight
            .iter()
            .map(|f| f.batch.number)
            .chain(self.ready.iter().map(|b| b.number))
            .min()
            .unwrap_or(self.next_number);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(upto, _)| *upto <= unresolved);
        self.flushes = waiting;
        for (_, done) in done {
            let _ = done.send(());
        }
    }

    /// Stops counting a batch's entries as buffered.
    fn unbuffer(&mut self, batch: &mut Batch) {
        self.buffered = self
            .buffered
            .saturating_sub(std::mem::take(&mut batch.buffered));
    }

    fn fail(&mut self, mut batch: Batch, error: &Error) {
        self.unbuffer(&mut batch);
        // Its sequence numbers were given out (sent or encoded ahead) and
        // will not reach the broker in order: the next batch would leave
        // a gap the broker refuses. Go on under a new producer id.
        if self.config.idempotent && batch.encoded.as_ref().is_some_and(|e| e.stamp.is_some()) {
            self.reset_producer = true;
        }
        let make = |e: &Error| match e {
            Error::Client(c) => Error::Client(c.clone()),
            Error::Encode {
                topic,
                partition,
                source,
            } => Error::Encode {
                topic: topic.clone(),
                partition: *partition,
                source: walfetch_codec::Error::InvalidInput {
                    what: source.to_string(),
                },
            },
            other => Error::InvalidArgument(other.to_string()),
        };
        tracing::warn!(error = %error, topic = %self.config.topic, partition = self.config.partition,
            entries = batch.entries.len(), "WAL batch not written");
        for p in batch.entries {
            let _ = p.ack.send(Err(make(error)));
        }
    }

    /// Sends ready batches while the pipeline has room.
    async fn send_ready(&mut self) {
        while self.in_flight.len() < self.config.max_in_flight
            && !self.ready.is_empty()
            && self.resume_at.is_none()
        {
            if self.reset_producer {
                if !self.in_flight.is_empty() {
                    return;
                }
                self.producer = None;
                self.reset_producer = false;
                for batch in &mut self.ready {
                    batch.encoded = None;
                }
            }
            if self.config.idempotent && self.producer.is_none() {
                match self
                    .cluster
                    .init_producer_id(&self.config.topic, self.config.partition)
                    .await
                {
                    Ok(id) => {
                        tracing::debug!(
                            producer_id = id.id,
                            epoch = id.epoch,
                            "WAL writer producer id"
                        );
                        self.producer = Some(id);
                        self.next_sequence = 0;
                        // Its batches can only be past the log's end as
                        // of now: where a duplicate answered without its
                        // offset is looked for (not from offset 0).
                        let end = self
                            .cluster
                            .list_offsets(
                                &self.config.topic,
                                self.config.partition,
                                OffsetSpec::Latest,
                                IsolationLevel::ReadUncommitted,
                            )
                            .await;
                        if let Ok(Some(end)) = end.map(|e| e.offset) {
                            self.search_from = self.search_from.max(end);
                        }
                    }
                    Err(e) => {
                        let error = Error::Client(e);
                        while let Some(batch) = self.ready.pop_front() {
                            self.fail(batch, &error);
                        }
                        return;
                    }
                }
            }
            let connection = match self
                .cluster
                .leader_connection(&self.config.topic, self.config.partition)
                .await
            {
                Ok((connection, _)) => connection,
                Err(e) => {
                    // A try, as a send is: the backoff grows with each
                    // failed lookup instead of asking every 25–50 ms.
                    if let Some(front) = self.ready.front_mut() {
                        front.attempts += 1;
                    }
                    // Waits out a backoff (`resume_at`), or, out of
                    // retries, failed the batches past their deadline:
                    // then the rest are tried now, not left waiting for
                    // an append to wake the writer.
                    self.retry_later(None, e);
                    continue;
                }
            };
            // Requests in flight stay on one connection, so they stay in
            // order; a new leader waits for them.
            if self
                .in_flight
                .back()
                .is_some_and(|f| !Arc::ptr_eq(&f.connection, &connection))
            {
                return;
            }
            let Some(mut batch) = self.ready.pop_front() else {
                return;
            };
            self.unbuffer(&mut batch);
            if batch.encoded.is_none() {
                match self.encode(&batch) {
                    Ok(encoded) => batch.encoded = Some(encoded),
                    Err(e) => {
                        let error = Error::Encode {
                            topic: self.config.topic.clone(),
                            partition: self.config.partition,
                            source: e,
                        };
                        self.fail(batch, &error);
                        continue;
                    }
                }
            }
            let Some(bytes) = batch.encoded.as_ref().map(|e| e.bytes.clone()) else {
                continue;
            };
            batch.first_try.get_or_insert_with(Instant::now);
            batch.sent = true;
            batch.attempts += 1;
            let answer = self
                .cluster
                .produce_queued(
                    Arc::clone(&connection),
                    &self.config.topic,
                    self.config.partition,
                    bytes,
                )
                .await;
            self.in_flight.push_back(InFlight {
                batch,
                answer,
                connection,
                behind_refused: false,
            });
        }
    }

    /// Encodes a batch, stamped with the producer and its next sequence
    /// numbers when idempotent.
    fn encode(&mut self, batch: &Batch) -> Result<Encoded, walfetch_codec::Error> {
        let records = &batch.records;
        let mut builder = BatchBuilder::new(0).compression(self.config.compression);
        let stamp = self.producer.map(|id| (id, self.next_sequence));
        if let Some((id, sequence)) = stamp {
            builder = builder.producer(id.id, id.epoch, sequence);
        }
        let encoded = builder.encode_records(records)?;
        if stamp.is_some() {
            // Sequences wrap at i32::MAX, as Kafka's do.
            let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
            self.next_sequence = match self.next_sequence.checked_add(count) {
                Some(next) => next,
                None => count - (i32::MAX - self.next_sequence) - 1,
            };
        }
        let batch_len = u32::try_from(encoded.bytes.len()).unwrap_or(u32::MAX);
        let record_ends = (0..records.len())
            .map(|i| {
                encoded
                    .record_end_in_batch(i)
                    .map_or(batch_len, |e| u32::try_from(e).unwrap_or(batch_len))
            })
            .collect();
        Ok(Encoded {
            bytes: encoded.bytes,
            record_ends,
            stamp,
        })
    }

    /// After a failure before or at the head of the pipeline that may be
    /// retried: every request in flight is dropped and its batch goes back,
    /// in order, in front of the ready ones (same encoding, same sequence
    /// numbers), to be sent again after a backoff. `head` is the batch
    /// whose answer failed, if one did.
    fn retry_later(&mut self, head: Option<Batch>, error: ClientError) {
        let mut again: Vec<Batch> = head.into_iter().collect();
        again.extend(self.in_flight.drain(..).map(|f| f.batch));
        for batch in again.into_iter().rev() {
            self.ready.push_front(batch);
        }
        let policy = self.cluster.config().retry;
        // Every batch waiting is held up from now: each one's deadline
        // runs from here, not from when the batches before it gave up.
        let now = Instant::now();
        for batch in &mut self.ready {
            batch.first_try.get_or_insert(now);
        }
        let Some(front) = self.ready.front_mut() else {
            return;
        };
        let since = front.first_try.unwrap_or(now);
        let attempts = front.attempts.max(1);
        let delay = policy.random_backoff(attempts);
        if since.elapsed() + delay < policy.deadline {
            tracing::debug!(%error, attempts, ?delay, "WAL writer retries");
            self.resume_at = Some(Instant::now() + delay);
            return;
        }
        // Out of retries: the head fails, and so does every batch sent
        // after it (its fate is unknown: sending it under a new producer
        // id could append it twice). The rest go under a new producer id.
        let error = Error::Client(ClientError::RetriesExhausted {
            operation: format!(
                "Produce to topic {:?} partition {}",
                self.config.topic, self.config.partition
            ),
            attempts,
            elapsed: since.elapsed(),
            deadline: policy.deadline,
            last: Some(Box::new(error)),
        });
        // (`fail` takes a new producer id for what follows: their sequence
        // numbers were given out.)
        if let Some(head) = self.ready.pop_front() {
            self.fail(head, &error);
        }
        while self.ready.front().is_some_and(|b| b.sent) {
            if let Some(batch) = self.ready.pop_front() {
                self.fail(batch, &error);
            }
        }
    }

    /// Handles the answer to the request at the head of the pipeline.
    async fn on_answer(&mut self, answer: Result<i64, ClientError>) {
        let Some(InFlight {
            batch,
            behind_refused,
            ..
        }) = self.in_flight.pop_front()
        else {
            return;
        };
        let stamp = batch.encoded.as_ref().and_then(|e| e.stamp);
        let look_up = match &answer {
            Ok(base) if *base >= 0 => return self.written(batch, *base).await,
            // The broker has the batch but did not say where.
            Ok(_) => Some("acknowledged a duplicate without its offset"),
            Err(e) if e.code() == Some(ErrorCode::DuplicateSequenceNumber) => {
                Some("acknowledged a duplicate without its offset")
            }
            // The broker answered, but the answer cannot be read: the
            // batch may be in the log, and the log says.
            Err(ClientError::Connection(ConnectionError::Decode { .. })) => {
                Some("answered in a way that cannot be decoded")
            }
            Err(_) => None,
        };
        if let (Some(why), Some(stamp)) = (look_up, stamp) {
            let (cluster, topic) = (Arc::clone(&self.cluster), self.config.topic.clone());
            let found = locate(
                &cluster,
                &topic,
                self.config.partition,
                self.search_from,
                stamp,
            );
            let error = match found.await {
                Ok(Some(base)) => return self.written(batch, base).await,
                Ok(None) => ClientError::InvalidArgument(format!(
                    "topic {topic:?} partition {}: the broker {why} ({}), and no batch of \
                     producer {} epoch {} sequence {} is in the log from offset {} to its high \
                     watermark",
                    self.config.partition,
                    match &answer {
                        Ok(base) => format!("base offset {base}"),
                        Err(e) => e.to_string(),
                    },
                    stamp.0.id,
                    stamp.0.epoch,
                    stamp.1,
                    self.search_from
                )),
                Err(e) => e,
            };
            return self.fail(batch, &Error::Client(error));
        }
        let error = match answer {
            Ok(base) => ClientError::InvalidArgument(format!(
                "the broker acknowledged a batch with base offset {base}"
            )),
            Err(e) => e,
        };
        let sequence_refused = matches!(
            error.code(),
            Some(ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId)
        );
        if behind_refused && sequence_refused {
            // Refused because a batch before it was: not written, so it
            // can go again under the new producer id.
            batch_requeue(&mut self.ready, batch);
            return;
        }
        if sequence_refused && !batch.renewed && self.config.idempotent {
            // The first batch refused for its sequence, with none before
            // it: the broker no longer knows this producer (it expires an
            // idle one after `producer.id.expiration.ms`, a day by
            // default) or lost its state. It was not written: it goes
            // again, first, under a new producer id, as the Java producer
            // does (KIP-360); those behind it follow.
            let mut batch = batch;
            batch.renewed = true;
            batch_requeue(&mut self.ready, batch);
            self.reset_producer = true;
            for f in &mut self.in_flight {
                f.behind_refused = true;
            }
            return;
        }
        if !behind_refused && error.is_retriable(self.config.idempotent) {
            return self.retry_later(Some(batch), error);
        }
        // Refused for good (or, behind a refused batch, of unknown fate).
        self.fail(batch, &Error::Client(error));
        if self.config.idempotent {
            self.reset_producer = true;
            for f in &mut self.in_flight {
                f.behind_refused = true;
            }
        }
    }
}

/// Finds where the broker put a batch it answered without saying where
/// (a duplicate without its offset, an answer that cannot be decoded): the
/// first batch from `from` (past the writer's last acknowledged batch)
/// with the same producer id, epoch and base sequence, or `None` when the
/// log holds none up to its high watermark.
async fn locate(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    from: i64,
    (id, sequence): (ProducerIdentity, i32),
) -> Result<Option<i64>, ClientError> {
    {
        let mut offset = from;
        loop {
            // The batch is there: no wait (Tansu 0.6 would sleep it out).
            let params = FetchParams::new(topic, partition, offset)
                .with_max_bytes(4 << 20)
                .with_max_wait(Duration::ZERO);
            let fetched = match cluster.fetch(&params).await {
                Ok(fetched) => fetched,
                // The log starts past `offset` now (retention): on from
                // its start.
                Err(e) if e.code() == Some(ErrorCode::OffsetOutOfRange) => {
                    let start = cluster
                        .list_offsets(
                            topic,
                            partition,
                            OffsetSpec::Earliest,
                            IsolationLevel::ReadUncommitted,
                        )
                        .await?
                        .offset
                        .unwrap_or(offset);
                    if start <= offset {
                        return Err(e);
                    }
                    offset = start;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut next = offset;
            for batch in Batches::new(fetched.records.clone(), DecodeOptions::default()) {
                let Ok(batch) = batch else { break };
                let h = batch.header();
                if h.producer_id == id.id
                    && h.producer_epoch == id.epoch
                    && h.base_sequence == sequence
                    && batch.last_offset() >= offset
                {
                    return Ok(Some(batch.base_offset()));
                }
                next = next.max(batch.last_offset() + 1);
            }
            if next == offset || next >= fetched.high_watermark {
                return Ok(None);
            }
            offset = next;
        }
    }
}

impl Task {
    /// Indexes a written batch and answers its entries.
    async fn written(&mut self, batch: Batch, base: i64) {
        let count = batch.entries.len() as i64;
        if base.checked_add(count).is_none() {
            // No log reaches past the largest offset: the answer is wrong,
            // and the entries' offsets cannot be told.
            let error = ClientError::InvalidArgument(format!(
                "the broker acknowledged a batch of {count} records at base offset {base}, past the largest offset"
            ));
            return self.fail(batch, &Error::Client(error));
        }
        let Some(encoded) = batch.encoded else {
            return;
        };
        let batch_len = u32::try_from(encoded.bytes.len()).unwrap_or(u32::MAX);
        let known = lock(&self.index).source().topic_id.is_some();
        let topic_id = match known {
            true => None,
            false => self
                .cluster
                .leader(&self.config.topic, self.config.partition)
                .await
                .ok()
                .map(|l| l.topic_id),
        };
        {
            let mut index = lock(&self.index);
            if let Some(id) = topic_id {
                let source = index.source().clone().with_topic_id(id);
                index.set_source(source);
            }
            for (i, p) in batch.entries.iter().enumerate() {
                let entry = IndexEntry {
                    offset: base + i as i64,
                    hint: Some(Hint {
                        batch_base: base,
                        batch_len,
                        record_end: encoded.record_ends.get(i).copied().unwrap_or(batch_len),
                    }),
                };
                // Offsets from the broker only grow; a failure here means
                // a broker reused offsets, which the index must not hide.
                if let Err(e) = index.push(p.region, entry) {
                    tracing::error!(error = %e, "WAL index rejected an entry");
                }
            }
            index.set_last_index(base + count - 1);
        }
        self.search_from = self.search_from.max(base + count);
        for (i, p) in batch.entries.into_iter().enumerate() {
            let _ = p.ack.send(Ok(base + i as i64));
        }
    }
}

/// An entry's record: the region id as key, the payload as value, and the
/// checksum header (when on) before the entry's own headers. Its timestamp
/// is when the writer took it.
fn record(entry: &WalEntry, offset_delta: i32, checksums: bool) -> NewRecord {
    let key = Bytes::copy_from_slice(&entry.region.to_be_bytes());
    let mut headers = Vec::with_capacity(entry.headers.len() + 1);
    if checksums {
        let sum = record_checksum_header(Some(&key), Some(&entry.payload));
        headers.push((
            Bytes::from_static(RECORD_CHECKSUM_HEADER.as_bytes()),
            Some(Bytes::copy_from_slice(&sum)),
        ));
    }
    headers.extend(entry.headers.iter().cloned());
    NewRecord {
        offset_delta,
        timestamp: now_ms(),
        key: Some(key),
        value: Some(entry.payload.clone()),
        headers,
    }
}

/// Puts a batch back among the ready ones by its number (it was formed
/// before any batch still to be sent for the first time).
fn batch_requeue(ready: &mut VecDeque<Batch>, mut batch: Batch) {
    batch.encoded = None;
    batch.first_try = None;
    batch.sent = false;
    batch.attempts = 0;
    let at = ready.partition_point(|b| b.number < batch.number);
    ready.insert(at, batch);
}

/// When a group whose first entry was appended `at` is due: its linger
/// later, less up to 2 ms (at most half the linger), and an entry may wait
/// `linger` at most. Tokio's timers fire on millisecond ticks, up to one
/// late, and the thread parked for them sleeps whole milliseconds too, so
/// a timer armed for the instant itself goes off up to 2 ms after it.
fn due(at: Instant, linger: Duration) -> Instant {
    let slack = (linger / 2).min(Duration::from_millis(2));
    // A linger too long to add (`Duration::MAX`: only when full or
    // flushed) is due in 30 years, tokio's own far future.
    let due = at
        .checked_add(linger)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at);
    due.checked_sub(slack).unwrap_or(due)
}

/// Later than any linger that matters: 30 years.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 86_400);

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_falls_due_early_enough_for_a_late_timer() {
        let at = Instant::now();
        // 2 ms early at most, so that a timer up to 2 ms late still sends
        // the batch within the linger.
        assert_eq!(
            due(at, Duration::from_millis(5)),
            at + Duration::from_millis(3)
        );
        assert_eq!(
            due(at, Duration::from_millis(100)),
            at + Duration::from_millis(98)
        );
        // Never earlier than half the linger.
        assert_eq!(
            due(at, Duration::from_millis(2)),
            at + Duration::from_millis(1)
        );
        assert_eq!(due(at, Duration::ZERO), at);
    }
}
