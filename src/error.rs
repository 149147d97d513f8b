//! The replay layer's error type: what the consumer and the WAL writer
//! report, wrapping the cluster client's and the index's errors.

use crate::cluster::ClientError;
use crate::index::{IndexError, RegionId};

/// Everything that can go wrong while writing or replaying a WAL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The cluster client failed (after its retries).
    #[error(transparent)]
    Client(#[from] ClientError),
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
    /// compaction, an aborted transaction).
    #[error(
        "topic {topic:?} partition {partition}: {} indexed offset(s) of region {region} no longer \
         exist in the log: {}{}",
        offsets.len(),
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
    },
    /// Records past the index's `last_index` that regions still had to
    /// scan no longer exist in the log (retention moved its start past
    /// them). No index lists them, so the range is named, with the regions
    /// whose scan it cut.
    #[error(
        "topic {topic:?} partition {partition}: offsets {from} to {} past the index's last_index, \
         which region(s) {} had still to scan, no longer exist in the log (it now starts at {to})",
        to - 1,
        regions.iter().map(RegionId::to_string).collect::<Vec<_>>().join(", ")
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
        /// The offset right after the last one gone (the log's start).
        to: i64,
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
    /// The WAL writer's background task has stopped.
    #[error("the WAL writer for topic {topic:?} partition {partition} is closed")]
    WriterClosed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// An argument is out of range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
