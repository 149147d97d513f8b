//! Recover the regions of a write-ahead log that share Kafka partitions,
//! reading only what the writer's index says belongs to them.
//!
//! Databases that keep their write-ahead log (WAL) in Kafka put many
//! *regions* (shards) into one topic partition. The writer keeps a
//! [`WalIndex`](index::WalIndex): for each region, the offsets of its
//! entries (optionally with where they sit in their batches), and
//! `last_index`, the offset up to which the index is complete. walfetch
//! plans Kafka Fetch requests from it — start offsets and byte limits — so
//! that recovering regions moves as few bytes, in as few round trips, as
//! Kafka's fetch rules allow, and yields exactly those regions' entries.
//!
//! # Recovering a node's regions
//!
//! A restarting node recovers all its regions at once, each from its own
//! checkpoint, over many partitions. [`Recovery`](consumer::Recovery) does
//! that in one pass: within a partition a batch holding entries of several
//! regions is read once, partitions led by the same broker share Fetch
//! requests, and past `last_index` each partition is scanned once and split
//! by the region rule.
//!
//! ```no_run
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use walfetch::cluster::{Cluster, ClusterConfig};
//! use walfetch::consumer::{Recovery, ReplayOptions};
//! use walfetch::index::read_index_file;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = Arc::new(Cluster::connect(ClusterConfig::new(["127.0.0.1:9092"])).await?);
//! let wal0 = read_index_file("wal-0.idx".as_ref())?;
//! let wal1 = read_index_file("wal-1.idx".as_ref())?;
//! let mut recovery = Recovery::builder(cluster)
//!     .index("wal", 0, &wal0)
//!     .index("wal", 1, &wal1)
//!     .region("wal", 0, 4_398_046_511_104, 1_200) // region, its checkpoint
//!     .region("wal", 0, 4_398_046_511_105, 900)
//!     .region("wal", 1, 4_398_046_511_106, 0)
//!     .options(ReplayOptions::default())
//!     .build()
//!     .await?;
//! while let Some(entry) = recovery.next().await {
//!     let entry = entry?;
//!     // Each partition's entries come in offset order; key, value and
//!     // headers are slices of the fetch response, not copies.
//!     println!("{} {} {:?}", entry.region, entry.record.offset(), entry.record.value());
//! }
//! let stats = recovery.stats();
//! println!("{} bytes on the wire, {:?}x the regions' own", stats.wire_bytes, stats.read_amplification());
//! # Ok(())
//! # }
//! ```
//!
//! One region of one partition is the same thing with one region; the
//! [`Consumer`](consumer::Consumer) stream yields its bare records.
//!
//! # What a replay guarantees
//!
//! Whatever the index's hints say and whatever the broker's habits:
//! entries come in offset order per partition, exactly the indexed offsets
//! of the regions asked for (then their records past `last_index`), no
//! duplicates, nothing of other regions, nothing of the aborted
//! transactions the broker lists (Kafka does; `read_committed` by default,
//! [`ReplayOptions::isolation`](consumer::ReplayOptions::isolation)). An
//! indexed offset that no longer exists is an error naming it
//! ([`Error::LostOffsets`](error::Error)),
//! or, with [`LostPolicy::Skip`](consumer::LostPolicy), skipped and listed
//! in the stats. Retriable broker errors, reconnects and leader moves are
//! retried under a deadline by the [`Cluster`](cluster::Cluster).
//!
//! An index is a promise about one log, and a replay checks it before
//! trusting it. The index records what it indexes
//! ([`IndexSource`](index::IndexSource): topic, partition, topic id, first
//! offset, region rule); an index of another topic, partition or topic
//! incarnation (a topic deleted and recreated), one whose `last_index` is
//! past the log's end, a replay from below its first offset, a rule given
//! that differs from its own (unless
//! [`force_rule`](replay::ReplayOptions::force_rule)), or a region it does
//! not list where the log past `last_index` cannot hold it either, is an
//! [`Error::IndexMismatch`](error::Error) naming the mismatch
//! ([`Mismatch`](error::Mismatch)). With the rule known, every entry read
//! at an indexed offset is checked to be of its region: one that is not
//! ends the replay with that error, never as output. The topic id checked
//! at the start binds every fetch of the replay
//! ([`FetchParams::topic_id`](cluster::FetchParams::topic_id)): a topic
//! recreated while it runs is that mismatch too, at the latest when the
//! replay ends (entries yielded before it may be of the new topic where
//! fetches name the topic, as below Fetch v13: a replay that ends in an
//! error is not done).
//!
//! # The parts
//!
//! Layers, lowest first; each uses only those below it
//! (`docs/architecture.md` in the repository has the map and a recovery's
//! data flow):
//!
//! 1. [`codec`] (`walfetch-codec`): the zero-copy record-batch codec.
//! 2. The sans-io core (`walfetch-core`, no tokio, no sockets), re-exported
//!    here under the same paths: [`index`] (the index, its file format,
//!    GreptimeDB's index import and the region rule), [`plan`] (the cost
//!    model, the planners and the floor: the fewest bytes Kafka's rules
//!    allow), [`replay`] (the [`ReplayCore`](replay::ReplayCore) the
//!    streams drive, for an embedder that brings its own IO), [`error`]
//!    and [`error_code`].
//! 3. The IO: [`connection`] (one broker connection), [`cluster`] (the
//!    Kafka client: metadata, leaders, Fetch, ListOffsets, Produce,
//!    retries).
//! 4. On top: [`consumer`] ([`Recovery`](consumer::Recovery) and
//!    [`Consumer`](consumer::Consumer), the streams), [`writer`] (a WAL
//!    writer that builds the index, with exact hints, as it produces),
//!    [`scan`] (building an index by scanning a topic).
//!
//! The command-line tool (`walfetch replay`, `index`, `dump`, ...) is the
//! `walfetch-cli` package of the same workspace; see the README.
//!
//! # References
//! - Kafka protocol guide, Fetch API; KIP-74 (fetch byte limits, the first
//!   batch whole); KIP-98 (transactions, `read_committed`).

pub use walfetch_codec as codec;
pub use walfetch_core::{error_code, index, plan};

#[doc(hidden)]
pub mod calibrate;
pub mod cluster;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod replay;
pub mod scan;
pub mod writer;

// The README's examples compile as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
