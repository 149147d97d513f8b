//! The sans-io replay core, from [`walfetch_core::replay`]: one partition's
//! replay of any set of regions, as a state machine a driver moves fetches
//! for. [`crate::consumer::Consumer`] and [`crate::consumer::Recovery`] are
//! the drivers this crate brings; an embedder with its own IO drives
//! [`ReplayCore`] directly.

pub use walfetch_core::replay::*;

/// The replay core whose failed fetches are this crate's
/// [`ClientError`](crate::cluster::ClientError)s.
pub type ReplayCore = walfetch_core::replay::ReplayCore<crate::cluster::ClientError>;
