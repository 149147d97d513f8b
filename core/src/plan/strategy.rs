//! The interface every fetch strategy offers the replay core, so that
//! walfetch's planner, the estimate strategy it is compared with, and a full
//! scan run on the same core and connection layer.
//!
//! A strategy only decides what one fetch asks for: its offset and byte
//! limit. The core owns everything else — which entries are still wanted
//! (and in which order they are asked for again), the log's layout, where
//! the log starts, the back-off on brokers that skip the batch containing
//! a mid-batch offset, the scan past `last_index` — and shows it to the
//! strategy as a [`PlanView`].

use std::ops::Range;

use super::{CostModel, Layout, PlannedFetch};
use crate::index::IndexEntry;

/// What a strategy plans from.
#[derive(Debug, Clone, Copy)]
pub struct PlanView<'a> {
    /// The indexed entries the replay must deliver, in offset order.
    pub entries: &'a [IndexEntry],
    /// For each of `entries`, its region, as any number that is equal for
    /// entries of one region; empty when they are all one region's.
    pub regions: &'a [usize],
    /// The log's layout as known: the index's hints (for strategies that
    /// use them) and every batch responses carried.
    pub layout: &'a Layout,
    /// The log's start: no fetch starts below it.
    pub log_start: i64,
    /// The log's end as the replay found it (the offset after its last
    /// record), or `i64::MAX` if unknown: a run of entries at every offset
    /// up to it has nothing after it to read in vain.
    pub log_end: i64,
    /// Set once the broker answered a mid-batch fetch offset without the
    /// batch containing it (a habit of some Kafka-compatible brokers): the
    /// log start it reported then.
    pub misaligned: Option<i64>,
    /// Whether the records of a batch cut at the byte limit can be used
    /// (see [`crate::replay::CutRecords`]). When not, a fetch must read
    /// each batch holding wanted records to its end.
    pub cut_records: bool,
    /// Set once the broker was seen answering a fetch with whole batches
    /// past its byte limit (a habit of some Kafka-compatible brokers, Tansu
    /// 0.6 among them: they add a batch while the bytes they counted are
    /// below the limit). A fetch is then limited to reach into its last
    /// wanted batch, not to its end, lest the broker add the next batch.
    /// The core then clears [`PlanView::cut_records`] too: such a broker
    /// does not cut batches.
    pub overshoots: bool,
    /// The most this fetch may ask for: the memory left under the replay's
    /// cap (`ReplayOptions::max_buffered_bytes`) or this partition's share
    /// of it (`crate::replay::Room`), at least 1. The core holds every
    /// fetch to it; a strategy that plans within it chooses where the
    /// fetch ends. A fetch asking for less than its first batch still gets
    /// that batch whole (KIP-74).
    pub budget: u32,
}

impl<'a> PlanView<'a> {
    /// A view of one region's `entries` over `layout` with nothing learned
    /// yet: the whole log, cut records usable, no budget (the strategies'
    /// tests start from it).
    #[cfg(test)]
    pub(crate) fn of(entries: &'a [IndexEntry], layout: &'a Layout) -> Self {
        PlanView {
            entries,
            regions: &[],
            layout,
            log_start: 0,
            log_end: i64::MAX,
            misaligned: None,
            cut_records: true,
            overshoots: false,
            budget: u32::MAX,
        }
    }
}

impl PlanView<'_> {
    /// Whether entries `i - 1` and `i` are of one region.
    pub fn one_region(&self, i: usize) -> bool {
        one_region(self.regions, i)
    }

    /// Where to fetch from for `offset` when the batch holding it is not
    /// known, on the `attempt`th try (0 first): the offset itself; or, on a
    /// broker that skips the batch containing a mid-batch offset, a fetch
    /// offset likely to land in the batch before: about one batch's worth
    /// of offsets back, doubling with each failed attempt, never below a
    /// known batch boundary or the log start. That costs bytes, never
    /// records.
    pub fn start_for(&self, offset: i64, attempt: u32) -> i64 {
        let Some(log_start) = self.misaligned else {
            return offset;
        };
        let per_batch = self.layout.observed().offsets_per_batch();
        let back = per_batch.saturating_mul(1 << attempt.min(20));
        let floor = self
            .layout
            .boundary_at_or_below(offset)
            .unwrap_or(log_start)
            .max(self.log_start)
            .min(offset);
        offset.saturating_sub(back).max(floor)
    }
}

/// Whether entries `i - 1` and `i` are of one region, by `regions` (each
/// entry's region, as in [`PlanView::regions`]; empty: all one region's).
pub(crate) fn one_region(regions: &[usize], i: usize) -> bool {
    match (
        i.checked_sub(1).and_then(|p| regions.get(p)),
        regions.get(i),
    ) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// A way of sizing fetches. See the module docs for what it does not own.
pub trait FetchStrategy: Send + std::fmt::Debug {
    /// One fetch for the entries `run` (still wanted, in offset order; the
    /// rest of the replay's entries follow it): it must claim a prefix of
    /// the run, at least its first entry. `attempt` counts the times a
    /// fetch for the run's first entry came back without it.
    fn plan_entries(
        &mut self,
        view: &PlanView<'_>,
        run: Range<usize>,
        attempt: u32,
    ) -> PlannedFetch;

    /// One fetch of the scan past `last_index`, which wants every record
    /// of `from..to`; `attempt` counts the scan fetches in a row that made
    /// no progress.
    fn plan_tail(&mut self, view: &PlanView<'_>, from: i64, to: i64, attempt: u32) -> PlannedFetch;

    /// At most this many of the replay's fetches in flight at once (the
    /// driver's limits apply besides).
    fn max_in_flight(&self) -> Option<usize> {
        None
    }

    /// A response to `fetch` carried `records_bytes` bytes of records, of
    /// which `records_at_or_above` records sat at or above the fetch offset.
    fn observe_response(
        &mut self,
        fetch: &PlannedFetch,
        records_bytes: usize,
        records_at_or_above: usize,
    ) {
        let _ = (fetch, records_bytes, records_at_or_above);
    }

    /// What a fetch now costs on this link, as learned from the replay's
    /// own fetches: plan with it from now on. Strategies that do not weigh
    /// bytes against round trips ignore it.
    fn set_cost_model(&mut self, cost: CostModel) {
        let _ = cost;
    }

    /// A short name for tables and logs.
    fn name(&self) -> &'static str;
}
