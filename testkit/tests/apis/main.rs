//! Every API of the scripted broker over loopback TCP, at every version it
//! serves, decoded with kafka-protocol 0.18 and walfetch-codec.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

// Shared by the modules below: names, error codes, ListOffsets requests and the transactional and four-batch logs the API tests read.
mod common;

// ApiVersions: every version, unsupported ones, limited versions advertised and enforced.
mod versions;
// Metadata: the advertised address, brokers that stop, start and move, every version, auto-created topics.
mod metadata;
// CreateTopics: every version and its errors.
mod create_topics;
// Produce: every version fetched back, and its errors.
mod produce;
// ListOffsets: every version.
mod offsets;
// Fetch: Kafka's rules at every version, its errors, sessions, max bytes (KIP-74, KIP-541), read committed, min bytes.
mod fetch;
// Broker habits: never cut, skip the containing batch, repeat the last batch, omit or empty hurried fetches, segment ends.
mod habits;
// The cluster at runtime: leadership moves, and the counters of requests, bytes and connections.
mod cluster_state;
