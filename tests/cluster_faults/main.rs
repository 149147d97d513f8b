//! Fault tests: the cluster client against the scripted broker
//! (`walfetch-testkit`), with every fault the broker can be scripted to
//! make, on each API the fault applies to: ApiVersions (at connect),
//! Metadata, ListOffsets, Fetch and Produce.
//!
//! What the tests pin down:
//! - a retriable fault (a connection lost before, during or after a
//!   response, a dropped request, a retriable error code, a leader moved to
//!   another broker, a reply slower than the request timeout, a truncated or
//!   oversized frame) ends in the right result, and the broker's counters
//!   show exactly the retry it took;
//! - a non-retriable error code ends the operation at once, naming the
//!   topic, partition and broker;
//! - a fault that never stops ends in `RetriesExhausted` by the deadline;
//! - Produce never writes a batch twice: after a connection lost
//!   mid-request it returns the error rather than resending, and a retry
//!   after an error code (batch not written) writes the batch once;
//! - when a connection breaks, every request in flight on it fails at once
//!   with the connection's error, and a request past its own timeout fails
//!   alone.
//!
//! Tests whose outcome depends on timers run on tokio's paused clock (the
//! scripted broker's `Delay` is a tokio sleep on the same runtime), so the
//! times they assert are exact and cost no real time. The others run on
//! real time; none of them waits out a timeout, and each operation is
//! bounded by [`within`] so that a hang fails the test instead of stalling
//! it.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the scripted two-broker set-up, its client, the faults and the records the tests write and read back.
mod common;

// The connection layer: each fault's own error, requests in flight when a connection breaks, timeouts.
mod connection;
// Lost connections on every API: retried to the right result; a garbled first frame is not a Kafka broker.
mod lost_connections;
// Error codes: retriable ones are retried (re-reading metadata where they say so), the others surface at once.
mod error_codes;
// Leadership moves: every operation follows a leader moved to another broker.
mod leadership;
// Produce is never written twice: not resent after a connection lost mid-request, retried once after an error code.
mod produce;
// Timers: slow replies, faults that never stop, and the deadline that ends them.
mod deadlines;
// Fetches shared by several partitions: a request per leader, partitions retried alone.
mod fetch_many;
