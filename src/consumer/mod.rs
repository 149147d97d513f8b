//! Replays as streams: [`Recovery`], the regions of a node restarting, each
//! from its own checkpoint, over any number of partitions in one pass; and
//! [`Consumer`], one region of one partition.
//!
//! Both drive [`crate::replay::ReplayCore`]s (one per partition) over a
//! [`Cluster`]: they send the fetches the cores plan, several at once,
//! within one in-flight limit and one memory cap for the whole replay, and
//! hand back the answers. Entries come out in offset order within each
//! partition; partitions take turns.
//!
//! Correctness never rests on the index's hints or on a broker's habits: a
//! wrong hint, a broker that never cuts batches or one that skips the batch
//! containing a mid-batch offset costs bytes or round trips, never an entry.
//! An indexed offset that no longer exists is an error by default
//! ([`LostPolicy`]).

mod driver;
mod recovery;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::Stream;
use walfetch_codec::Record;

pub use crate::replay::{
    CutRecords, LostPolicy, RegionStats, ReplayOptions, ReplayStats, StrategyKind,
};
pub use recovery::{RecoveredEntry, Recovery, RecoveryBuilder};

use crate::cluster::Cluster;
use crate::error::Error;
use crate::index::{RegionId, WalIndex};

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
    /// offset under `read_committed`) when the replay starts, or past the
    /// index's `last_index` if that is further (entries a transaction
    /// still open holds back, see [`ReplayOptions::isolation`]).
    pub to: Option<i64>,
}

/// A replay of one region; see the module docs. Poll it as a [`Stream`] of
/// records; [`Consumer::stats`] may be read at any time. It is a
/// [`Recovery`] of one region, yielding bare records.
pub struct Consumer {
    recovery: Recovery,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("core", &self.recovery.driver.cores()[0])
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
        options: ReplayOptions,
    ) -> Result<Self, Error> {
        let recovery = Recovery::builder(cluster)
            .index(range.topic.as_str(), range.partition, index)
            .region_until(
                range.topic,
                range.partition,
                range.region,
                range.from,
                range.to,
            )
            .options(options)
            .build()
            .await?;
        Ok(Self { recovery })
    }

    /// The counters so far, with the floor of what was yielded (worked
    /// out on each call, see [`Recovery::stats`]).
    pub fn stats(&self) -> ReplayStats {
        self.recovery.stats()
    }

    /// The end offset (exclusive) of the replay.
    pub fn end_offset(&self) -> i64 {
        self.recovery.driver.cores()[0].end_offset()
    }

    /// The strategy's name.
    pub fn strategy_name(&self) -> &'static str {
        self.recovery.driver.cores()[0].strategy_name()
    }
}

impl Stream for Consumer {
    type Item = Result<Record, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.recovery
            .driver
            .poll_entry(cx)
            .map(|item| item.map(|r| r.map(|(_, entry)| entry.record)))
    }
}
