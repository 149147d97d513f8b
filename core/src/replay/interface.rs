//! The core's interface: what a driver hands the [`ReplayCore`](super::ReplayCore) and gets
//! back from it (fetches to send, their answers, the room its limits
//! leave, the entries yielded), and how long a fetch may wait at the
//! broker.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use walfetch_codec::{Error as CodecError, Record};

use super::absorb::{absorb, AbsorbOptions, Absorbed, Response};
use crate::fetch::{FetchedPartition, IsolationLevel};
use crate::index::{IndexEntry, RegionId};
use crate::plan::PlannedFetch;

/// How long a fetch may wait at the broker after an answer from a replica whose
/// high watermark lags, or one that held back records past the last stable
/// offset (see [`OutgoingFetch::max_wait`]): librdkafka's default
/// `fetch.wait.max.ms`. With
/// [`ReplayOptions::max_attempts`](super::ReplayOptions::max_attempts) answers
/// in a row that still lag, the replay ends stalled
/// ([`Error::Stalled`](crate::error::Error::Stalled), or
/// [`Error::Unstable`](crate::error::Error::Unstable) past the last stable
/// offset).
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

/// Names a fetch handed out by [`ReplayCore::poll_fetch`](super::ReplayCore::poll_fetch).
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
/// cap. See [`ReplayCore::poll_fetch`](super::ReplayCore::poll_fetch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes left under the memory cap
    /// ([`ReplayOptions::max_buffered_bytes`](super::ReplayOptions::max_buffered_bytes):
    /// buffered records plus the byte limits of fetches in flight). A fetch
    /// asks for no more.
    pub memory: u64,
    /// Byte limits still allowed in flight
    /// ([`ReplayOptions::max_in_flight_bytes`](super::ReplayOptions::max_in_flight_bytes)).
    /// A pacing limit: with none left no fetch is given (but the one that keeps
    /// a partition going), and a fetch given is not made smaller for it.
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
/// (batch CRCs, decompression, picking out the wanted records), which a driver
/// may run on another thread while the core goes on. Get one with
/// [`ReplayCore::decoder`](super::ReplayCore::decoder) when the fetch is sent;
/// hand what it gives to
/// [`ReplayCore::handle_decoded`](super::ReplayCore::handle_decoded) with the
/// answer.
#[derive(Debug, Clone)]
pub struct ResponseDecoder {
    pub(super) id: FetchId,
    pub(super) entries: Arc<[IndexEntry]>,
    pub(super) fetch: PlannedFetch,
    pub(super) options: AbsorbOptions,
}

/// A fetch's answer as a [`ResponseDecoder`] read it.
#[derive(Debug)]
pub struct Decoded {
    /// The fetch, and the records read (held, so that no other answer's
    /// can be where they are): a reading handed over with another fetch's
    /// answer is not used.
    pub(super) id: FetchId,
    pub(super) records: Bytes,
    pub(super) result: Result<Absorbed, CodecError>,
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
    pub(super) fn holds(&self, fetched: &FetchedPartition, aligned: bool) -> bool {
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
