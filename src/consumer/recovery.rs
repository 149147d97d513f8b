//! [`Recovery`]: many regions over many partitions, each from its own
//! checkpoint, in one pass.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use futures::stream::Stream;
use uuid::Uuid;
use walfetch_codec::Record;

use super::driver::{log_end, Driver};
use crate::cluster::Cluster;
use crate::error::{Error, Mismatch};
use crate::index::{RegionId, WalIndex};
use crate::replay::bind::{check_listed, check_target};
use crate::replay::{RegionRange, ReplayCore, ReplayOptions, ReplayStats, StrategyKind};

/// One region's wish: `from..to` (`None`: to the log's end).
#[derive(Debug, Clone, Copy)]
struct Wish {
    region: RegionId,
    from: i64,
    to: Option<i64>,
}

/// Builds a [`Recovery`]: the partitions' indexes, the regions and their
/// checkpoints, the options. See [`Recovery::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until built"]
pub struct RecoveryBuilder<'a> {
    cluster: Arc<Cluster>,
    options: ReplayOptions,
    indexes: BTreeMap<(String, i32), &'a WalIndex>,
    /// Partitions given more than one index: refused by `build`, since
    /// keeping either would drop the other's entries unsaid.
    indexed_twice: Vec<(String, i32)>,
    wishes: BTreeMap<(String, i32), Vec<Wish>>,
}

impl<'a> RecoveryBuilder<'a> {
    /// The index of `topic`/`partition`. Every partition a region is asked
    /// of needs one, unless the strategy is [`StrategyKind::Scan`]. One
    /// index a partition: the indexes of several writers of a partition
    /// are joined with [`WalIndex::merge`] first ([`RecoveryBuilder::build`]
    /// refuses a partition given twice).
    pub fn index(mut self, topic: impl Into<String>, partition: i32, index: &'a WalIndex) -> Self {
        let key = (topic.into(), partition);
        match self.indexes.get(&key) {
            // Either index alone lacks the other's entries, which the
            // replay would skip as not the region's: said at `build`.
            Some(given) if !std::ptr::eq(*given, index) => self.indexed_twice.push(key),
            Some(_) => {}
            None => {
                self.indexes.insert(key, index);
            }
        }
        self
    }

    /// Recover `region` of `topic`/`partition` from offset `from` (its
    /// checkpoint) to the end of the log as it is when the recovery starts
    /// (under `read_committed`, its last stable offset, or past the
    /// index's `last_index` if that is further: see
    /// [`ReplayOptions::isolation`]).
    pub fn region(
        self,
        topic: impl Into<String>,
        partition: i32,
        region: RegionId,
        from: i64,
    ) -> Self {
        self.region_until(topic, partition, region, from, None)
    }

    /// Recover `region` of `topic`/`partition` over `from..to` (`None`: to
    /// the end of the log).
    pub fn region_until(
        mut self,
        topic: impl Into<String>,
        partition: i32,
        region: RegionId,
        from: i64,
        to: Option<i64>,
    ) -> Self {
        self.wishes
            .entry((topic.into(), partition))
            .or_default()
            .push(Wish { region, from, to });
        self
    }

    /// How the recovery runs (one set of options for every partition).
    pub fn options(mut self, options: ReplayOptions) -> Self {
        self.options = options;
        self
    }

    /// Looks up the end of every partition a region reads to the end of,
    /// side by side, and prepares the recovery.
    ///
    /// Errors: no region; a partition without an index (unless scanning),
    /// or given two (merge them: [`WalIndex::merge`]); a region asked for
    /// twice in a partition; a range that is negative
    /// or inverted; the cluster failing to answer; an index that does not
    /// match the partition ([`Error::IndexMismatch`]): it records another
    /// topic, partition or topic id (the topic was recreated), its
    /// `last_index` is at or past the high watermark (checked when a
    /// region reads to the log's end, which is then looked up), a region
    /// starts below its first offset, a rule given differs from its own
    /// (unless forced), or a region it does not list cannot be past its
    /// `last_index` either, nor in another partition the region is asked
    /// of (there it is read, and this partition has nothing of it). A
    /// region it does not list whose range runs past `last_index` is read
    /// from the scan there, with a `tracing` warning.
    pub async fn build(mut self) -> Result<Recovery, Error> {
        let started = Instant::now();
        if self.wishes.is_empty() {
            return Err(Error::InvalidArgument(
                "a recovery needs at least one region".to_owned(),
            ));
        }
        if let Some((topic, partition)) = self.indexed_twice.first() {
            return Err(Error::InvalidArgument(format!(
                "topic {topic:?} partition {partition} is given more than one index: \
                 join them with WalIndex::merge (each writer's index lists only its own \
                 entries, and the others' would be skipped)"
            )));
        }
        let empty = WalIndex::new();
        let mut plans = Vec::with_capacity(self.wishes.len());
        for ((topic, partition), wishes) in &self.wishes {
            let index = match self.indexes.get(&(topic.clone(), *partition)) {
                Some(index) => *index,
                None if self.options.strategy == StrategyKind::Scan => &empty,
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "no index for topic {topic:?} partition {partition} (regions {})",
                        wishes
                            .iter()
                            .map(|w| w.region.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            };
            if self.options.strategy != StrategyKind::Scan {
                check_target(topic, *partition, index).map_err(|mismatch| {
                    Error::IndexMismatch {
                        topic: topic.clone(),
                        partition: *partition,
                        mismatch,
                    }
                })?;
            }
            plans.push((topic.as_str(), *partition, index, wishes));
        }
        // An index of a topic since deleted and recreated under the same
        // name: told by the topic id, where both the index and the
        // broker's Metadata version know it. The id checked binds every
        // fetch of the partition from here on, so a topic recreated while
        // the recovery runs is that mismatch too, not read as the indexed.
        let partitions: Vec<(&str, i32)> = plans.iter().map(|(t, p, _, _)| (*t, *p)).collect();
        self.cluster.look_up_leaders(&partitions).await;
        let mut topic_ids = Vec::with_capacity(plans.len());
        for (topic, partition, index, _) in &plans {
            let index = (self.options.strategy != StrategyKind::Scan).then_some(*index);
            topic_ids.push(bind_topic_id(&self.cluster, topic, *partition, index).await?);
        }
        // The ends of the partitions read to the end, looked up side by side.
        let isolation = self.options.isolation;
        let ends = futures::future::try_join_all(plans.iter().zip(&topic_ids).map(
            |((topic, partition, _, w), topic_id)| {
                let cluster = Arc::clone(&self.cluster);
                let needed = w.iter().any(|w| w.to.is_none());
                async move {
                    match needed {
                        true => log_end(&cluster, topic, *partition, *topic_id, isolation)
                            .await
                            .map(Some),
                        false => Ok(None),
                    }
                }
            },
        ))
        .await?;
        let setup = u64::from(ends.iter().any(Option::is_some));
        // One in-flight setting: the fetches that may be in flight at once
        // share a round trip, so one more costs that round trip's share.
        self.options.plan.cost.in_flight = self.options.max_in_flight.max(1);
        let mut ranged = Vec::with_capacity(plans.len());
        for ((topic, partition, index, wishes), end) in plans.into_iter().zip(ends) {
            let log_end = end.as_ref().map_or(0, |(e, _)| *e);
            // An index past the log's end is of another log (or of this
            // one before it was recreated or truncated).
            if let (Some((end, fetched)), Some(last_index)) = (&end, index.last_index()) {
                let high_watermark = fetched.high_watermark.max(*end);
                if self.options.strategy != StrategyKind::Scan && last_index >= high_watermark {
                    return Err(Error::IndexMismatch {
                        topic: topic.to_owned(),
                        partition,
                        mismatch: Mismatch::LastIndexPastEnd {
                            last_index,
                            high_watermark,
                        },
                    });
                }
            }
            // A checkpoint past the log's end is of another log (or of this
            // one before it was truncated or recreated): said so, not as a
            // range the caller never gave. The end is the high watermark:
            // under read_committed the replay stops at the last stable
            // offset, and a checkpoint between the two (past a transaction
            // still open) has nothing to read yet.
            let high_watermark = end
                .as_ref()
                .map_or(log_end, |(e, fetched)| fetched.high_watermark.max(*e));
            if let Some(w) = wishes
                .iter()
                .find(|w| w.to.is_none() && w.from > high_watermark)
            {
                return Err(Error::InvalidArgument(format!(
                    "topic {topic:?} partition {partition} region {}: the checkpoint {} is past \
                     the log's end ({high_watermark}): the log was truncated or recreated, or \
                     the checkpoint is of another log",
                    w.region, w.from
                )));
            }
            // The entries the index lists were written (a writer indexes
            // an entry once the broker acknowledged it; an index build
            // reads below the last stable offset). Under read_committed
            // the end looked up is the last stable offset, which a
            // transaction still open may hold below some of them: they are
            // read all the same, waited for until the transaction ends
            // (or `Error::Unstable`), never left out unsaid.
            let indexed_end = match self.options.strategy {
                StrategyKind::Scan => 0,
                _ => index.last_index().map_or(0, |l| l.saturating_add(1)),
            };
            let regions: Vec<RegionRange> = wishes
                .iter()
                .map(|w| RegionRange {
                    region: w.region,
                    from: w.from,
                    to: w.to.unwrap_or(log_end.max(indexed_end).max(w.from)),
                })
                .collect();
            ranged.push((topic, partition, index, regions, end));
        }
        if self.options.strategy != StrategyKind::Scan {
            let placed = placed_regions(
                ranged
                    .iter()
                    .map(|(_, _, index, regions, _)| (*index, regions.as_slice())),
            );
            for (topic, partition, index, regions, _) in &mut ranged {
                leave_out_unplaceable(index, regions, &placed);
                check_listed(topic, *partition, index, regions).map_err(|mismatch| {
                    Error::IndexMismatch {
                        topic: (*topic).to_owned(),
                        partition: *partition,
                        mismatch,
                    }
                })?;
            }
        }
        let mut cores = Vec::with_capacity(ranged.len());
        for (topic, partition, index, regions, end) in ranged {
            let mut core = ReplayCore::new(
                topic,
                partition,
                index,
                &regions,
                self.options.clone(),
                started,
            )?;
            if let Some((end, fetched)) = &end {
                core.count_fetch(fetched);
                core.note_log_end(*end);
            }
            cores.push(core);
        }
        let topics = cores.iter().map(|c| Arc::from(c.topic())).collect();
        Ok(Recovery {
            driver: Driver::new(self.cluster, cores, topic_ids, &self.options, setup),
            topics,
        })
    }
}

/// Whether `index` may hold entries of `r`: it lists the region, or the
/// range runs past `last_index`, where the scan reads every record.
fn may_hold(index: &WalIndex, r: &RegionRange) -> bool {
    index.region(r.region).is_some()
        || index
            .last_index()
            .is_none_or(|l| r.to > l.saturating_add(1))
}

/// The regions some partition of the recovery is known to be of (its
/// index lists the region, whatever the range asked there) or may hold
/// entries of (over a range that is not empty, past `last_index`).
fn placed_regions<'r>(
    partitions: impl Iterator<Item = (&'r WalIndex, &'r [RegionRange])>,
) -> BTreeSet<RegionId> {
    partitions
        .flat_map(|(index, regions)| {
            regions
                .iter()
                .filter(move |r| {
                    index.region(r.region).is_some() || (r.from < r.to && may_hold(index, r))
                })
                .map(|r| r.region)
        })
        .collect()
}

/// Empties the range of each region of `regions` that `index` cannot hold
/// (not listed, and the range ends within `last_index`) but another
/// partition of the recovery may: a region asked of several partitions
/// (as `walfetch replay` asks a region no index lists of every partition)
/// is of one of them, and has nothing in the others. One that no
/// partition may hold is left as asked, for [`check_listed`] to refuse.
fn leave_out_unplaceable(
    index: &WalIndex,
    regions: &mut [RegionRange],
    placed: &BTreeSet<RegionId>,
) {
    for r in regions.iter_mut() {
        if r.from < r.to && !may_hold(index, r) && placed.contains(&r.region) {
            r.to = r.from;
        }
    }
}

/// The topic id the recovery of `topic`/`partition` is bound to (nil: to
/// none; see [`crate::cluster::FetchParams::topic_id`]): the one `index`
/// records (`None`: an index not checked, when scanning), else the one
/// metadata gives now. Fails when the index records a topic id and the
/// broker reports another for `topic`; the cached metadata is read again
/// before failing, so a stale cache cannot cause the error.
async fn bind_topic_id(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    index: Option<&WalIndex>,
) -> Result<Uuid, Error> {
    let indexed = index.and_then(|i| i.source().topic_id).unwrap_or_default();
    let leader = cluster
        .bound_leader_retrying(topic, partition, indexed)
        .await?;
    Ok(leader.topic_id)
}

/// One entry of a recovery: the record, its region and where it was read.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecoveredEntry {
    /// The topic.
    pub topic: Arc<str>,
    /// The partition.
    pub partition: i32,
    /// The region.
    pub region: RegionId,
    /// The record.
    pub record: Record,
}

/// A recovery of many regions over many partitions in one pass: within a
/// partition, the plan covers every region's indexed offsets at once, so a
/// batch holding entries of several regions is read once, and the scan
/// past `last_index` is read once and split by the region rule. Poll it as
/// a [`Stream`] of [`RecoveredEntry`]: each partition's entries in offset
/// order, partitions taking turns. An error names the partition (and the
/// region, where one is at fault) and ends the stream.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use futures::StreamExt;
/// # use walfetch::cluster::{Cluster, ClusterConfig};
/// # use walfetch::consumer::Recovery;
/// # async fn example(wal0: walfetch::index::WalIndex, wal1: walfetch::index::WalIndex)
/// #     -> Result<(), walfetch::error::Error> {
/// let cluster = Arc::new(Cluster::connect(ClusterConfig::new(["127.0.0.1:9092"])).await?);
/// let mut recovery = Recovery::builder(cluster)
///     .index("wal", 0, &wal0)
///     .index("wal", 1, &wal1)
///     .region("wal", 0, 7, 1_200) // region 7 from its checkpoint at 1200
///     .region("wal", 0, 9, 800)
///     .region("wal", 1, 12, 0)
///     .build()
///     .await?;
/// while let Some(entry) = recovery.next().await {
///     let entry = entry?;
///     println!("region {} offset {}", entry.region, entry.record.offset());
/// }
/// println!("{:?}", recovery.stats().regions);
/// # Ok(())
/// # }
/// ```
pub struct Recovery {
    pub(super) driver: Driver,
    /// Each core's topic, shared by its entries.
    topics: Vec<Arc<str>>,
}

impl std::fmt::Debug for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recovery")
            .field("partitions", &self.driver.cores())
            .finish()
    }
}

impl Recovery {
    /// Starts describing a recovery over `cluster`.
    pub fn builder<'a>(cluster: Arc<Cluster>) -> RecoveryBuilder<'a> {
        RecoveryBuilder {
            cluster,
            options: ReplayOptions::default(),
            indexes: BTreeMap::new(),
            indexed_twice: Vec::new(),
            wishes: BTreeMap::new(),
        }
    }

    /// The counters of the whole recovery so far, with per-region figures
    /// in [`ReplayStats::regions`]. Round trips count the critical path
    /// over all partitions (fetches sent side by side share one). It works
    /// out [`ReplayStats::floor_bytes`] from every batch seen, in time that
    /// grows with them: cheap once at the end, dear after every entry.
    pub fn stats(&self) -> ReplayStats {
        self.driver.stats()
    }

    /// Each partition's counters: `(topic, partition, stats)`.
    pub fn partition_stats(&self) -> Vec<(String, i32, ReplayStats)> {
        self.driver
            .cores()
            .iter()
            .map(|c| (c.topic().to_owned(), c.partition(), c.stats()))
            .collect()
    }
}

impl Stream for Recovery {
    type Item = Result<RecoveredEntry, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        this.driver.poll_entry(cx).map(|item| {
            item.map(|r| {
                r.map(|(i, entry)| RecoveredEntry {
                    topic: Arc::clone(&this.topics[i]),
                    partition: this.driver.cores()[i].partition(),
                    region: entry.region,
                    record: entry.record,
                })
            })
        })
    }
}
