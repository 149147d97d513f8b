//! The sans-io core of walfetch: everything that decides what to fetch and
//! what a response means, with no IO, no clock and no async runtime (in the
//! style of `quinn-proto` under `quinn`).
//!
//! Layers, lowest first (see `docs/architecture.md` in the repository):
//! `walfetch-codec` (record batches) → **this crate** → `walfetch` (the
//! connection, the cluster client, the consumer drivers, the writer, the
//! scan) → `walfetch-cli`. Users write `cargo add walfetch`: it re-exports
//! what is here under the same paths (`walfetch::index`, `walfetch::plan`,
//! `walfetch::replay`, `walfetch::error`).
//!
//! - [`index`]: the WAL index, its file format, GreptimeDB's index import
//!   and the region rule.
//! - [`plan`]: the cost model, the planners that size fetches, and the
//!   floor (the fewest bytes Kafka's fetch rules allow).
//! - [`replay`]: [`ReplayCore`](replay::ReplayCore), one partition's replay
//!   of any set of regions as a state machine a driver moves fetches for.
//! - [`fetch`]: the wire side of Fetch: what to fetch, the request, each
//!   partition's answer read out of a response.
//! - [`error`], [`error_code`]: the replay layer's error, Kafka's error
//!   codes.
//! - [`patience`]: how long a fetch may wait after answers that held
//!   nothing.

pub use walfetch_codec as codec;

pub mod error;
pub mod error_code;
pub mod fetch;
pub mod index;
pub mod patience;
pub mod plan;
pub mod replay;
