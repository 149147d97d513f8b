//! The replay layer's error type: what the consumer and the WAL writer
//! report, wrapping the index's errors and those of the client below.
//!
//! The core does no IO, so it does not know the client's error type: it is
//! the parameter `C` (`walfetch::Error` is `Error<walfetch::cluster::ClientError>`;
//! the core alone uses [`std::convert::Infallible`], its default).

use std::convert::Infallible;

use crate::index::{IndexError, RegionId, RegionRule};

/// Everything that can go wrong while writing or replaying a WAL; `C` is
/// the error of the client that moves the bytes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error<C = Infallible> {
    /// The cluster client failed (after its retries). In `walfetch`, a
    /// `ClientError::TopicIdChanged` converts to [`Error::IndexMismatch`]
    /// with [`Mismatch::TopicId`] instead: the topic recreated under a
    /// replay is the mismatch it would have been before the replay
    /// started.
    #[error(transparent)]
    Client(C),
    /// An index could not be read, written or built.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A fetch response held a corrupt batch or record.
    #[error("topic {topic:?} partition {partition}, fetch at offset {fetch_offset}: {source}")]
    Decode {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The fetch offset of the response.
        fetch_offset: i64,
        /// What the codec found.
        #[source]
        source: walfetch_codec::Error,
    },
    /// Encoding a batch failed.
    #[error("encoding a batch for topic {topic:?} partition {partition}: {source}")]
    Encode {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// What the codec said.
        #[source]
        source: walfetch_codec::Error,
    },
    /// Indexed offsets of the region no longer exist in the log (retention,
    /// compaction, an aborted transaction, or the log truncated below them
    /// by an unclean leader election).
    #[error(
        "topic {topic:?} partition {partition}: {} indexed offset(s) of region {region} no longer \
         exist in the log{}: {}{}",
        offsets.len(),
        truncated_to.map(|end| format!(" ({})", truncation(end))).unwrap_or_default(),
        offsets.iter().take(10).map(i64::to_string).collect::<Vec<_>>().join(", "),
        if offsets.len() > 10 { ", ..." } else { "" }
    )]
    LostOffsets {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The region replayed.
        region: RegionId,
        /// The offsets that are gone.
        offsets: Vec<i64>,
        /// Where the log was found truncated below offsets known to have
        /// been written (an unclean leader election): the log end the
        /// leader reported. `None` when nothing says the log went back.
        truncated_to: Option<i64>,
    },
    /// Records past the index's `last_index` that regions still had to
    /// scan no longer exist in the log (retention moved its start past
    /// them, or the log was truncated below them). No index lists them, so
    /// the range is named, with the regions whose scan it cut.
    #[error(
        "topic {topic:?} partition {partition}: offsets {from} to {} past the index's last_index, \
         which region(s) {} had still to scan, no longer exist in the log ({})",
        to - 1,
        regions.iter().map(RegionId::to_string).collect::<Vec<_>>().join(", "),
        match truncated_to {
            Some(end) => truncation(*end),
            None => format!("it now starts at {to}"),
        }
    )]
    LostRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The regions whose scan the range cut.
        regions: Vec<RegionId>,
        /// The first offset gone.
        from: i64,
        /// The offset right after the last one gone: the log's start, or,
        /// where the log was truncated, the end it was known to reach.
        to: i64,
        /// Where the log was found truncated below the range (see
        /// [`Error::LostOffsets`]); `None` when retention removed it.
        truncated_to: Option<i64>,
    },
    /// Fetches stopped making progress (a broker answering without the
    /// wanted data, repeatedly).
    #[error("topic {topic:?} partition {partition}: no progress at offset {offset} after {attempts} fetches")]
    Stalled {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset wanted.
        offset: i64,
        /// Fetches tried.
        attempts: u32,
    },
    /// Indexed entries lie past the partition's last stable offset, and
    /// stayed there while the replay waited: a transaction of some
    /// producer, still open below them, holds them back from a
    /// `read_committed` reader until it ends (by Kafka's
    /// `transaction.timeout.ms` at the latest). They are in the log, not
    /// lost: replay again later, or read uncommitted.
    #[error(
        "topic {topic:?} partition {partition}: the indexed entry at offset {offset} is past \
         the last stable offset {last_stable_offset}: a transaction still open below it holds \
         it back from a read_committed replay (no change after {attempts} fetches); replay \
         again once the transaction ends, or read uncommitted"
    )]
    Unstable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The first indexed offset held back.
        offset: i64,
        /// The partition's last stable offset, as last reported.
        last_stable_offset: i64,
        /// Fetches tried.
        attempts: u32,
    },
    /// The WAL writer cannot tell whether the entry's batch was written: a
    /// request with it reached the broker and no answer said whether the
    /// broker appended it (the answer was lost, timed out or said the
    /// replicas did not acknowledge it in time), and the writer could not
    /// find out. The entry may be in the log: appending it again may write
    /// it twice. `source` is the last failure.
    #[error(
        "topic {topic:?} partition {partition}: the batch may have been written (the broker \
         never said whether it appended it; appending its entries again may write them twice): \
         {source}"
    )]
    MaybeWritten {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// What went wrong.
        #[source]
        source: C,
    },
    /// The broker has the entry's batch (it answered the batch sent again
    /// as a duplicate), but the WAL writer could not find at which offset
    /// (`source` says why): the entry is in the log but not in the
    /// writer's index. Do not append it again.
    #[error(
        "topic {topic:?} partition {partition}: the batch was written (the broker has it), but \
         the writer could not find its offset, so its entries are not indexed: {source}"
    )]
    WrittenOffsetUnknown {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// Why the offset could not be found.
        #[source]
        source: C,
    },
    /// The broker refused an entry's batch as too large
    /// (`MESSAGE_TOO_LARGE`, `RECORD_LIST_TOO_LARGE`: larger than the
    /// topic's `max.message.bytes` or the broker's `message.max.bytes`)
    /// and the entry was alone in it: the WAL writer splits a refused
    /// batch of several entries and sends its halves again, so this entry
    /// alone, encoded as a batch of `bytes` bytes, is more than the broker
    /// takes. It was not written. `source` is the broker's answer (Kafka's
    /// message names the limit).
    #[error(
        "topic {topic:?} partition {partition}: an entry alone makes a record batch of {bytes} \
         bytes, more than the broker takes (the topic's max.message.bytes): {source}"
    )]
    EntryTooLarge {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The encoded size of the batch holding the entry alone.
        bytes: usize,
        /// The broker's refusal.
        #[source]
        source: C,
    },
    /// The WAL writer's background task has stopped.
    #[error("the WAL writer for topic {topic:?} partition {partition} is closed")]
    WriterClosed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The index is not an index of the partition read, or not of it as it
    /// is now (a topic deleted and recreated, a log shorter than the
    /// index), or not for the range or rule asked: replaying with it would
    /// yield other regions' records or miss the region's.
    #[error("topic {topic:?} partition {partition}: {mismatch}")]
    IndexMismatch {
        /// The topic read.
        topic: String,
        /// The partition read.
        partition: i32,
        /// What does not match.
        mismatch: Mismatch,
    },
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// How an index fails to match what a replay reads; see
/// [`Error::IndexMismatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// The index is of another topic.
    Topic {
        /// The topic the index was built for.
        indexed: String,
    },
    /// The index is of another partition.
    Partition {
        /// The partition the index was built for.
        indexed: i32,
    },
    /// The topic was deleted and recreated since the index was built, or
    /// while the replay read it.
    TopicId {
        /// The topic id the index was built for; for an index that records
        /// none, the one the topic had when the replay started.
        indexed: uuid::Uuid,
        /// The topic's id now.
        current: uuid::Uuid,
    },
    /// The index covers offsets the log does not hold.
    LastIndexPastEnd {
        /// The index's `last_index`.
        last_index: i64,
        /// The partition's high watermark.
        high_watermark: i64,
    },
    /// A region's replay starts below the first offset the index covers.
    BeforeFirstOffset {
        /// The region.
        region: RegionId,
        /// Where its replay starts.
        from: i64,
        /// The index's first offset.
        first_offset: i64,
    },
    /// The region rule asked for differs from the one the index was built
    /// with (see [`crate::replay::ReplayOptions::force_rule`]).
    Rule {
        /// The index's rule.
        indexed: RegionRule,
        /// The rule asked for.
        given: RegionRule,
    },
    /// A region has no entry in the index, and the log past `last_index`
    /// cannot hold its entries either.
    RegionAbsent {
        /// The region.
        region: RegionId,
        /// The index's `last_index`.
        last_index: Option<i64>,
    },
    /// The record at an indexed offset is not of the region the index
    /// gives it to.
    Entry {
        /// The offset.
        offset: i64,
        /// The region the index gives it to.
        region: RegionId,
        /// The region the rule finds in the record (`None`: no well-formed
        /// id).
        found: Option<RegionId>,
        /// The rule.
        rule: RegionRule,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Topic { indexed } => {
                write!(f, "the index is of topic {indexed:?}, not of this topic")
            }
            Mismatch::Partition { indexed } => {
                write!(
                    f,
                    "the index is of partition {indexed}, not of this partition"
                )
            }
            Mismatch::TopicId { indexed, current } => write!(
                f,
                "the topic was deleted and recreated since the index was built or the \
                 replay started (topic id {indexed} then, {current} now): the log to \
                 replay no longer exists (entries yielded before this error may be of the new topic)"
            ),
            Mismatch::LastIndexPastEnd {
                last_index,
                high_watermark,
            } => write!(
                f,
                "the index covers offsets up to {last_index} but the log ends at \
                 {high_watermark} (its high watermark): the topic was recreated or \
                 truncated, or the index is of another log"
            ),
            Mismatch::BeforeFirstOffset {
                region,
                from,
                first_offset,
            } => write!(
                f,
                "region {region} is replayed from offset {from}, but the index covers \
                 offsets from {first_offset} only: entries below it would be missed \
                 (replay from {first_offset} or later, or build the index from {from})"
            ),
            Mismatch::Rule { indexed, given } => write!(
                f,
                "the region rule given ({given}) differs from the one the index was \
                 built with ({indexed}); leave it out to use the index's, or force it"
            ),
            Mismatch::RegionAbsent { region, last_index } => match last_index {
                Some(l) => write!(
                    f,
                    "region {region} has no entry in the index, which is complete up to \
                     offset {l}, and the range asked for ends there: the region wrote \
                     nothing there, or its id or the index is wrong (a GreptimeDB index \
                     lists only the regions its datanode wrote to since it started); a \
                     full scan of the range (`--strategy scan`, `StrategyKind::Scan`) \
                     reads it without the index"
                ),
                None => write!(f, "region {region} has no entry in the index"),
            },
            Mismatch::Entry {
                offset,
                region,
                found,
                rule,
            } => {
                write!(
                    f,
                    "the index does not match this partition at offset {offset}: the index \
                     gives it to region {region}, but the record there is "
                )?;
                match found {
                    Some(r) => write!(f, "of region {r}")?,
                    None => write!(f, "of no region")?,
                }
                write!(f, " by the region rule ({rule})")
            }
        }
    }
}

/// What the messages of lost offsets say of a log truncated to `end`.
fn truncation(end: i64) -> String {
    format!(
        "the log was truncated to end at {end}, below offsets the index lists or earlier \
         answers reported, as an unclean leader election does"
    )
}
