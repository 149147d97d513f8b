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
//! so that its encoding overlaps the requests in flight. The writer holds
//! at most [`WriterConfig::buffer_bytes`] of entries not yet sent (those
//! queued to it included): `append` waits for room, and while one waits,
//! the oldest group goes without waiting out its linger when no group is
//! full (as the Java producer does when its `buffer.memory` is
//! exhausted). A flush (and closing the writer) makes batches of every
//! group at once, oldest first. How a group becomes batches is the
//! [`WriterMode`]:
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
//! same order, after a backoff and until its deadline: the broker appends
//! each batch once and answers a batch it already has with its original
//! offset. A batch's deadline is the cluster's retry deadline
//! ([`crate::cluster::RetryPolicy::deadline`]) from its first send, plus
//! the time one answer may take
//! ([`crate::cluster::ClusterConfig::produce_answer_timeout`]: the request
//! timeout and the produce timeout), so that a batch whose answer timed
//! out is sent again at least once (as the Java producer's
//! `delivery.timeout.ms` is at least `linger.ms` + `request.timeout.ms`);
//! with the defaults, 30 + 60 s. A broker may instead answer a duplicate
//! with `DUPLICATE_SEQUENCE_NUMBER` or without an offset (older Kafka):
//! the batch is written, and the writer finds it in the log by its
//! producer id and sequence, from the log's end when it took that producer
//! id (past its start, if retention moved it); when it cannot (a principal
//! that may Write the topic but not Read it), the entries fail with
//! [`Error::WrittenOffsetUnknown`]: written, not indexed. So it looks for
//! a batch whose answer it cannot decode (a broker's bug): found, the
//! batch was written; not found, it was not, and its entries fail saying
//! so. While the leader cannot be found (none elected, or the one metadata
//! names cannot be reached: metadata is then read again, so a leader
//! elected meanwhile, or a broker at a new address, is found), every batch
//! waiting is held up:
//! each one's deadline runs from when the writer was first held up, and
//! once the leader is back the batches still within theirs go. A throttled
//! answer (KIP-219) holds back the writer's next sends to that broker
//! until the throttle time has passed, not the answers of the requests
//! already in flight.
//!
//! An entry is acknowledged with its offset once its batch is in the log
//! there, once; an entry that fails is not in the log unless its error
//! says it may be ([`Error::MaybeWritten`]: a send of its batch reached
//! the broker and no answer said whether it was appended — appending the
//! entry again may write it twice) or is ([`Error::WrittenOffsetUnknown`]).
//! The writer itself never writes a batch twice: a batch sent under a
//! producer id whose answer was lost is never sent under another before it
//! is looked for in the log under the first (found, it is written there).
//!
//! The first batch refused for its sequence (`UNKNOWN_PRODUCER_ID`,
//! `OUT_OF_ORDER_SEQUENCE_NUMBER`) with none before it unresolved was not
//! written by that request: the broker no longer knows the producer (Kafka
//! forgets one idle for `producer.id.expiration.ms`, a day by default, and
//! a broker may lose its producer state). It goes again under a new
//! producer id, once, as the Java producer resets its sequences (KIP-360)
//! — if an earlier send of it had its answer lost, once it was looked for
//! in the log and not found there.
//!
//! A batch the broker refuses for good, for what it holds
//! (`INVALID_RECORD`, `MESSAGE_TOO_LARGE`, a topic not authorized, ...),
//! was not appended, and the broker's sequence for the producer stops
//! before it; the batches behind it are then, under Kafka's sequence
//! rules, refused too (their sequence no longer follows). A refused batch
//! of several entries too large for the broker (`MESSAGE_TOO_LARGE`,
//! `RECORD_LIST_TOO_LARGE`: past the topic's `max.message.bytes`) is split
//! in two and the halves go again in its place, split again while
//! refused, as the Java producer splits such a batch: only an entry too
//! large alone fails ([`Error::EntryTooLarge`], naming the size of its
//! batch and the broker's answer). Any other refused batch fails its
//! entries. The writer waits for the answers behind it, then numbers again
//! from the refused batch's sequence, under the same producer id and
//! epoch (as the Java transactional producer takes back the sequences
//! behind a batch that failed for good; its idempotent producer bumps its
//! epoch locally instead; neither asks for a new producer id), and sends again in order those refused for their sequence or
//! for a reason that may pass (`NOT_LEADER_OR_FOLLOWER`, ...); one whose
//! answer was lost is first looked for in the log under its old stamp
//! (found, it is written there; not found, it goes again; the log
//! unreadable, it fails, [`Error::MaybeWritten`]). A refusal that says the
//! producer's state is wrong (`INVALID_PRODUCER_EPOCH`, a sequence
//! refused again, ...), or a batch written behind a refused one (a broker
//! that does not hold sequences to Kafka's rules), makes it take a new
//! producer id instead (sequences start again at 0, as the Java producer
//! does when it resets its producer id).
//!
//! A batch that runs out of retries fails with every batch sent after it
//! whose fate is unknown, and the writer takes a new producer id for what
//! follows; so it does after any other batch that fails once its sequence
//! numbers were given out (sent, or encoded ahead while the pipeline was
//! full), since the next batch would leave a gap the broker refuses. Without idempotence (one in flight), a Produce
//! whose answer is lost is not sent again (it may have been appended): its
//! entries fail ([`Error::MaybeWritten`]). An answer whose base offset
//! would put the batch's records past the largest offset, or at or below
//! an offset an earlier batch was given, fails the batch's entries too
//! (they may be in the log), unindexed; the writer goes on.
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
//! - The Java producer's `RecordAccumulator.splitAndReenqueue` (a batch
//!   refused `MESSAGE_TOO_LARGE` split and sent again) and
//!   `TransactionManager.adjustSequencesDueToFailedBatch` (the sequences
//!   behind a batch failed for good taken back, no new producer id).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use walfetch_codec::{Compression, RecordsBuffer, RECORD_CHECKSUM_HEADER};

use crate::cluster::{Cluster, ProduceAnswer, ProducerIdentity};
use crate::connection::Connection;
use crate::error::Error;
use crate::index::{IdFormat, IndexSource, RegionId, RegionRule, WalIndex};
use batch::{Batch, Encoded, Member};
use memory::Memory;

// The writer task, by what it does: its loop (`task`), entries into
// batches (`forming`), batches onto the wire (`sending`), and what an
// answer does (`answers`); the bytes `append` may hand it (`memory`). Its
// state and the types they share are here.
mod answers;
mod batch;
mod fate;
mod forming;
mod memory;
mod sending;
mod task;

/// Bytes of entries the writer holds (queued, waiting in groups or formed
/// into batches not yet sent) before `append` waits (the Java producer's
/// `buffer.memory` default), unless the pipeline needs more
/// ([`WriterConfig::max_in_flight`] × [`WriterConfig::max_batch_bytes`]):
/// see [`WriterConfig::buffer_bytes`]. At it, groups go before their
/// linger, oldest first, to make room (as the Java producer sends batches
/// early when its memory is exhausted).
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
    /// compression); a batch holds one entry at least (0: each entry is a
    /// batch of its own, sent at once). Keep it under the broker's
    /// `message.max.bytes`.
    pub max_batch_bytes: usize,
    /// How long a group's first entry may wait for more, from its
    /// `append` (while a request slot is free; its batch may go up to 2 ms
    /// sooner, at most half of `linger`, to make up for late timers; see
    /// the module docs). `Duration::MAX`: batches go only when full or
    /// flushed.
    pub linger: Duration,
    /// Entries queued before `append` waits (it also waits at
    /// [`WriterConfig::buffer_bytes`]). 0 counts as 1, and more than
    /// tokio's channels hold ([`tokio::sync::Semaphore::MAX_PERMITS`],
    /// `usize::MAX` say) as that many.
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

    /// The bytes of entries the writer holds before `append` waits: a
    /// full pipeline's worth beyond what is in flight
    /// (`max_in_flight` × `max_batch_bytes`), at least [`BUFFER_BYTES`].
    /// An entry larger than it is refused.
    pub fn buffer_bytes(&self) -> usize {
        self.max_in_flight
            .saturating_mul(self.max_batch_bytes)
            .max(BUFFER_BYTES)
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
                "WAL writer for topic {:?} partition {}: max_in_flight must be 1 to \
                 {MAX_IN_FLIGHT}, not {}",
                self.topic, self.partition, self.max_in_flight
            )));
        }
        if self.max_in_flight > 1 && !self.idempotent {
            return Err(Error::InvalidArgument(format!(
                "WAL writer for topic {:?} partition {}: {} requests in flight need an \
                 idempotent producer (idempotent = true), as Kafka requires; or set \
                 max_in_flight = 1",
                self.topic, self.partition, self.max_in_flight
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
    /// The bytes of entries the writer may hold
    /// ([`WriterConfig::buffer_bytes`]).
    memory: Arc<Memory>,
    /// [`WriterConfig::buffer_bytes`], and whether entries carry the
    /// checksum header (what an entry counts, [`entry_bytes`]).
    buffer_bytes: usize,
    record_checksums: bool,
    index: Arc<Mutex<WalIndex>>,
    task: Option<JoinHandle<()>>,
    /// Why the writer never started: its settings are invalid.
    invalid: Option<String>,
    topic: String,
    partition: i32,
}

impl WalWriter {
    /// Starts a writer on `cluster`: its task runs in the current tokio
    /// runtime, or, called outside one, in the runtime `cluster` was
    /// connected in. With settings [`WriterConfig::validate`] refuses, the
    /// writer does not start and every call returns that error.
    ///
    /// Dropped without [`WalWriter::close`], the writer's task still
    /// writes every entry appended (each acknowledgement resolves as it
    /// would have), then ends; only the index of what it writes then is
    /// lost ([`WalWriter::close`] returns it). If the runtime
    /// running the task shuts down first, the entries not yet settled fail:
    /// those a request carried with [`Error::MaybeWritten`] (they may be in
    /// the log), the others with [`Error::WriterClosed`] (not written).
    pub fn new(cluster: Arc<Cluster>, config: WriterConfig) -> Self {
        // A channel of 0 or more than MAX_PERMITS places panics.
        let places = config.queue.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        let (commands, queue) = mpsc::channel(places);
        let mut fresh = WalIndex::new();
        // What it indexes: the topic id is added once the first batch is
        // written (its leader is then known).
        fresh.set_source(
            IndexSource::new(config.topic.clone(), config.partition)
                .with_rule(RegionRule::Key(IdFormat::BigEndian)),
        );
        let index = Arc::new(Mutex::new(fresh));
        let (topic, partition) = (config.topic.clone(), config.partition);
        let (buffer_bytes, record_checksums) = (config.buffer_bytes(), config.record_checksums);
        let memory = Arc::new(Memory::new(buffer_bytes));
        // The caller's runtime, else the one the cluster was connected in
        // (a writer made in synchronous code, outside any runtime).
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| cluster.runtime().cloned());
        let (task, invalid) = match (config.validate(), runtime) {
            (Ok(()), Some(runtime)) => {
                let task = Task::new(cluster, config, Arc::clone(&index), Arc::clone(&memory));
                (Some(runtime.spawn(task.run(queue))), None)
            }
            (Ok(()), None) => (
                None,
                Some(format!(
                    "WAL writer for topic {topic:?} partition {partition}: no tokio runtime to \
                     run in: make it inside one, or with a cluster connected in one"
                )),
            ),
            (Err(Error::InvalidArgument(why)), _) => (None, Some(why)),
            (Err(other), _) => (None, Some(other.to_string())),
        };
        Self {
            commands,
            memory,
            buffer_bytes,
            record_checksums,
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

    /// Queues an entry, waiting while the writer holds
    /// [`WriterConfig::buffer_bytes`] of entries or
    /// [`WriterConfig::queue`] entries; the returned future resolves to its
    /// offset once its batch is written. An entry larger than
    /// `buffer_bytes` is refused. Cancel-safe: an `append` dropped before
    /// it returns (under a timeout, say) has queued nothing and holds no
    /// room.
    pub async fn append(&self, entry: WalEntry) -> Result<Appended, Error> {
        if entry.payload.len() > i32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "WAL writer for topic {:?} partition {}: an entry of region {} of {} bytes is \
                 too large for a Kafka record",
                self.topic,
                self.partition,
                entry.region,
                entry.payload.len()
            )));
        }
        if self.invalid.is_some() {
            return Err(self.closed());
        }
        let bytes = entry_bytes(&entry, self.record_checksums);
        let permits = u32::try_from(bytes)
            .ok()
            .filter(|_| bytes <= self.buffer_bytes)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "WAL writer for topic {:?} partition {}: an entry of region {} of {bytes} \
                     bytes is larger than the writer's buffer ({} bytes, \
                     WriterConfig::buffer_bytes)",
                    self.topic, self.partition, entry.region, self.buffer_bytes
                ))
            })?;
        // Given back by the writer task once it no longer holds the entry
        // unsent (`Task::unbuffer`); closed when the task ends. Until the
        // entry is queued, `taken` gives them back if this `append` ends
        // first (cancelled while the queue is full): nothing else would,
        // and the buffer would shrink for good.
        let taken = self.memory.take(permits).await.map_err(|_| self.closed())?;
        let (ack, offset) = oneshot::channel();
        self.commands
            .send(Command::Append(Pending {
                entry,
                ack,
                appended: Instant::now(),
            }))
            .await
            .map_err(|_| self.closed())?;
        taken.hand_over();
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

    /// The index of everything written so far (since the last
    /// [`WalWriter::truncate_index_below`]): a copy, made while the
    /// writer waits to index its next batch.
    pub fn index(&self) -> WalIndex {
        lock(&self.index).clone()
    }

    /// Drops the entries of the writer's index below `checkpoint` (what
    /// every region has flushed, or what an index file dumped already
    /// holds), as [`WalIndex::truncate_below`] does: the index of a
    /// writer that runs for long then holds what may still be replayed,
    /// not every entry it ever wrote (about 24 bytes each, kept for the
    /// writer's life, and copied whole by [`WalWriter::index`]).
    pub fn truncate_index_below(&self, checkpoint: i64) {
        lock(&self.index).truncate_below(checkpoint);
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

/// The bytes `entry` counts against `max_batch_bytes` and
/// [`WriterConfig::buffer_bytes`]: [`WalEntry::batch_bytes`], and the
/// checksum header's when the writer adds it.
fn entry_bytes(entry: &WalEntry, record_checksums: bool) -> usize {
    entry.batch_bytes()
        + if record_checksums {
            CHECKSUM_HEADER_BYTES
        } else {
            0
        }
}

fn lock(index: &Mutex<WalIndex>) -> MutexGuard<'_, WalIndex> {
    index
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    /// Whether its first entries make a batch that cannot grow. A group
    /// with no entries is not full, whatever the limit (0 included: every
    /// entry then makes a full batch of its own).
    fn full(&self, max_batch_bytes: usize) -> bool {
        self.bytes >= max_batch_bytes.max(1)
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
    /// The config's topic and partition, shared by its batches.
    target: Arc<(String, i32)>,
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
    /// A batch refused for good ended the producer's sequence before it:
    /// once the requests in flight are answered, what follows is numbered
    /// again from this sequence, under the same producer id
    /// ([`Task::rewind_sequence`]).
    rewind: Option<i32>,
    /// No sends before this (backoff after a retriable failure).
    resume_at: Option<Instant>,
    /// Where the writer's next batch can be in the log, at the earliest:
    /// past its last acknowledged batch.
    search_from: i64,
    /// Bytes of the entries in groups and in the ready batches.
    buffered: usize,
    /// The bytes `append` may hand the task: those counted in `buffered`
    /// are given back when they stop counting; closed when the task ends.
    memory: Arc<Memory>,
}
