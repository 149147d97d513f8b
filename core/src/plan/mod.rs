//! The fetch planner: pure, no IO. It turns a region's index entries into
//! Fetch requests — start offset and byte limit — that move as few bytes as
//! Kafka's fetch rules allow, and re-plans from what responses showed.
//!
//! # Kafka rules it plans for
//! - A fetch names an offset; the broker answers from the start of the batch
//!   containing it, so starting at a batch's base costs nothing extra.
//! - The answer is cut at the byte limit (possibly mid-batch), except that
//!   the first batch comes whole (KIP-74). A limit ending right after the
//!   last wanted record saves the rest of that batch and everything after.
//! - Nothing here is trusted for correctness: the replay core checks each
//!   response and asks again for what a fetch did not deliver. The core
//!   keeps the layout, the queue and the back-off; a strategy sizes one
//!   fetch at a time from the core's [`PlanView`].
//!
//! # Without hints
//! Byte positions are exact only as far as known batches reach (hints, or
//! batches responses carried); past that the planner estimates them from
//! the bytes per offset seen so far, leaves a margin past an estimated end
//! (a whole batch when batches are compressed: a cut compressed batch is
//! useless), and reads across a gap when splitting would not save the
//! margins two estimated fetches carry. A fetch that hits the byte cap with
//! an estimated end claims every remaining entry and takes all its response
//! carries; the rest follows from where it really ended.
//!
//! The batch a fetch from a wanted offset starts in costs no limit: it
//! comes whole (KIP-74). A fetch whose entries most likely all sit in it
//! (whether a region's next entry shares its batch is learned from
//! responses, see `Neighbours`) asks for one byte.
//!
//! # References
//! - Kafka protocol guide, Fetch API; KIP-74 (fetch `max_bytes`).

mod cost;
mod estimate;
mod floor;
mod layout;
mod neighbours;
mod planner;
mod strategy;

pub use cost::CostModel;
pub(crate) use cost::LOOPBACK_ROUND_TRIP;
pub use floor::{floor_bytes, floor_bytes_framed, FetchRules, LogBatch};
pub use planner::PlanConfig;

// The planners and the layout they keep are the replay core's internals
// (tests and benches drive them directly).
#[doc(hidden)]
pub use estimate::EstimatePlanner;
#[doc(hidden)]
pub use floor::floor_from_layout;
#[doc(hidden)]
pub use layout::{Extent, Layout, Observed, SeenBatch};
#[doc(hidden)]
pub use neighbours::Neighbours;
#[doc(hidden)]
pub use planner::{FetchKind, PlannedFetch, Planner};
pub(crate) use strategy::one_region;
#[doc(hidden)]
pub use strategy::{FetchStrategy, PlanView};
