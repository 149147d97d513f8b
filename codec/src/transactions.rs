//! `read_committed` filtering: dropping the batches of aborted transactions.
//!
//! A Fetch response lists, per partition, the aborted transactions that
//! overlap it: `(producer_id, first_offset)`. A transactional batch of a
//! producer is aborted when one of that producer's listed transactions starts
//! at or before the batch, until the producer's abort marker (a control
//! batch) closes it.
//!
//! # References
//! - KIP-98, "Consumer changes": the consumer's aborted-transaction algorithm.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use crate::{ControlType, Error, RecordBatch};

/// One entry of a Fetch response's `aborted_transactions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbortedTransaction {
    /// The first offset of the aborted transaction.
    pub first_offset: i64,
    /// The producer that aborted it.
    pub producer_id: i64,
}

/// Decides, batch by batch in offset order, what a `read_committed` consumer
/// sees. Feed it every batch of a response, control batches included.
#[derive(Debug, Clone, Default)]
pub struct TransactionFilter {
    pending: BinaryHeap<Reverse<AbortedTransaction>>,
    aborting: HashSet<i64>,
}

impl TransactionFilter {
    /// A filter for one partition's aborted-transactions list.
    pub fn new(aborted: impl IntoIterator<Item = AbortedTransaction>) -> Self {
        Self {
            pending: aborted.into_iter().map(Reverse).collect(),
            aborting: HashSet::new(),
        }
    }

    /// Whether the batch's records are data a consumer should see: `false`
    /// for every control batch, and for the batches of aborted transactions.
    /// Only an abort marker ends a producer's aborted transaction; an empty
    /// control batch (what the log cleaner keeps of a marker) ends none.
    pub fn admit(&mut self, batch: &RecordBatch) -> Result<bool, Error> {
        let header = batch.header();
        if header.producer_id >= 0 {
            while let Some(Reverse(next)) = self.pending.peek() {
                if next.first_offset > header.last_offset() {
                    break;
                }
                self.aborting.insert(next.producer_id);
                self.pending.pop();
            }
        }
        if header.is_control() {
            if let Some(control) = batch.control_record()? {
                if control.kind == ControlType::Abort {
                    self.aborting.remove(&header.producer_id);
                }
            }
            return Ok(false);
        }
        Ok(!(header.is_transactional() && self.aborting.contains(&header.producer_id)))
    }
}
