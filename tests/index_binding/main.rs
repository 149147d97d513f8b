//! The index binds to what it indexed, against the scripted broker: a
//! replay refuses an index of another topic, partition or topic
//! incarnation, one past the log's end, a start below its first offset, a
//! rule other than its own unless forced, and a region it does not list
//! unless the log past `last_index` may hold it; an entry read at an
//! indexed offset that is not of its region is an error, never output.
//! `build_index` records what it indexes and, from an offset inside a batch
//! on a broker that skips that batch, still indexes every record from it;
//! it leaves out records of aborted transactions, reads past the empty
//! batches and offset gaps the log cleaner leaves, and asks again for a
//! batch the broker cut, failing rather than ending early when it stays
//! cut. An index imported from
//! GreptimeDB binds as GreptimeDB meant it: its `last_index` is the log end
//! (exclusive), and a region it lists with no entries replays empty.
#![allow(clippy::unwrap_used)]

// Shared by the modules below: the scripted broker and client, WALs written to it, replaying an index, and GreptimeDB logs with their imported indexes.
mod common;

// An index is bound to its source: another topic, partition or recreated topic, a high watermark below it, regions it does not list.
mod binding;
// A topic recreated while it is read: mid recovery, mid scan past the last index, mid build, each a topic id mismatch.
mod recreated_topics;
// Building an index by a scan: from inside a batch, on hurried brokers, the region rule stored and checked.
mod building;
// GreptimeDB indexes: the last index exclusive, idle topics, empty and absent regions, partition zero, no-op records.
mod greptime;
// Batches out of the ordinary: aborted transactions, empty control batches, compacted logs with gaps, batches cut short.
mod odd_batches;
