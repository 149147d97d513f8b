//! The interface every fetch strategy offers the consumer, so that walfetch's
//! planner, the estimate strategy it is compared with, and a full scan run on
//! the same consumer and connection layer.

use std::ops::Range;

use super::{CostModel, PlannedFetch, SeenBatch};
use crate::index::IndexEntry;

/// A source of fetches for one replay. The consumer asks for fetches, sends
/// them, checks each response, and reports back what it showed.
pub trait FetchStrategy: Send + std::fmt::Debug {
    /// The indexed entries the replay must deliver, in offset order.
    fn entries(&self) -> &[IndexEntry];

    /// The next fetch to send now, if any; `None` may only mean "wait for a
    /// response" while fetches are in flight.
    fn next_fetch(&mut self) -> Option<PlannedFetch>;

    /// A batch a response carried — complete, or the header of one the
    /// broker cut.
    fn observe_batch(&mut self, batch: &SeenBatch);

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

    /// Entries a fetch did not deliver: plan them again.
    fn requeue(&mut self, entries: Range<usize>);

    /// A tail fetch came back having read up to `next` (exclusive).
    fn tail_progress(&mut self, next: i64);

    /// The broker skipped the batch containing a mid-batch fetch offset.
    fn note_misaligned(&mut self, log_start: i64);

    /// The log now starts at `offset` (retention, or records deleted):
    /// no fetch may start below it.
    fn note_log_start(&mut self, offset: i64);

    /// What a fetch now costs on this link, as learned from the replay's
    /// own fetches: plan with it from now on. Strategies that do not weigh
    /// bytes against round trips ignore it.
    fn set_cost_model(&mut self, cost: CostModel) {
        let _ = cost;
    }

    /// A short name for tables and logs.
    fn name(&self) -> &'static str;
}
