//! The replay core: one partition's replay of any set of regions, as a
//! plain state machine with no IO and no clock (in the style of
//! `quinn-proto`). A driver — `walfetch::consumer::Consumer` for one region,
//! `walfetch::consumer::Recovery` for many regions over many partitions —
//! moves fetches between it and the network:
//!
//! - [`ReplayCore::poll_fetch`] gives the next fetch to send, if the
//!   strategy has one and the limits allow (its offset, byte limit,
//!   isolation and how long the broker may hold it,
//!   [`OutgoingFetch::max_wait`]);
//! - [`ReplayCore::handle_response`] and [`ReplayCore::handle_error`] take
//!   back what became of it ([`ReplayCore::decoder`] and
//!   [`ReplayCore::handle_decoded`] let a driver decode the answer
//!   elsewhere first, on another thread);
//! - [`ReplayCore::poll_entry`] gives the next entry in offset order,
//!   tagged with its region, or the error that ended the replay;
//! - [`ReplayCore::stats`] tells what it cost.
//!
//! Within a partition the plan covers the union of the regions' indexed
//! offsets, so a batch that holds entries of several regions is fetched
//! once. Past `last_index` the partition is scanned once and each record is
//! given to its region by the region rule; records of regions not asked
//! for are never yielded.
//!
//! The core owns what a replay must never get wrong whatever the strategy:
//! which offsets are wanted, checking each response (see `absorb`), what is
//! still to be fetched (see `queue`: what a response did not deliver is
//! asked for again first), the one layout of the log (the index's hints and
//! every batch a response showed; the floor is computed from it), the log
//! start, lost offsets, the back-off on brokers that skip the batch
//! containing a mid-batch offset, stall counting, and the order entries
//! come out in. Strategies ([`crate::plan::Planner`],
//! [`crate::plan::EstimatePlanner`], a scan) only size the next fetch for
//! the run or scan position the core hands them, from a
//! [`crate::plan::PlanView`].
//!
//! # References
//! - Kafka protocol guide, Fetch API; KIP-74 (the first batch comes whole,
//!   the rest is cut at the byte limit); KIP-98 (`read_committed`).

mod absorb;
// Shared with `walfetch`'s recovery builder, not a user's API.
#[doc(hidden)]
pub mod bind;
mod deliver;
mod interface;
mod link;
mod options;
mod planning;
mod queue;
mod replay_core;
mod settle;
mod stats;
#[cfg(test)]
mod tests;

pub use interface::{
    unready_wait, Decoded, Entry, FetchAnswer, FetchId, OutgoingFetch, RegionRange,
    ResponseDecoder, Room, LAGGING_WAIT, UNREADY_FIRST_WAIT,
};
#[doc(hidden)]
pub use link::LinkEstimator;
pub use link::LinkStats;
#[doc(hidden)]
pub use link::LEARNING_IN_FLIGHT;
pub use options::{CutRecords, LostPolicy, ReplayOptions, StrategyKind};
pub use replay_core::ReplayCore;
pub use stats::{RegionStats, ReplayStats};
