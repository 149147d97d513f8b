//! Recovering many regions over many partitions in one pass, against the
//! scripted broker that follows Kafka's fetch rules: every region gets
//! exactly its entries from its checkpoint on, in order, nothing of other
//! regions, with the index complete or with `last_index` halfway (the rest
//! read once by a scan split by region), and one pass reads no more than
//! replaying the regions one by one.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the scripted broker with a WAL of several partitions of regions, written and indexed.
mod common;

// One pass over every partition: every region exactly, no more read than region by region, entries past the last stable offset waited for.
mod one_pass;
// Large fetches and the memory cap: requests of their own, one cap shared by the partitions, fetches ended with the recovery.
mod large_fetches;
// Small fetches of cold regions: side by side, bounded by bytes, costed by the learned link.
mod fetch_costs;
// Broker habits: containing batches skipped, partitions omitted or starved, hurried fetches answered with nothing.
mod broker_habits;
// Recoveries asked for the wrong thing: what is wrong is said, two indexes of one partition refused.
mod refused_requests;
// A log that lost entries: retention and truncation below or across the index, a log written again.
mod retention;
// Partitions on several brokers: a slow broker or a backlog holds no other partition back, an error ends the fetches.
mod partitions_apart;
