//! Fetching from the closest replica (KIP-392).
//!
//! With [`super::ClusterConfig::client_rack`] set, every Fetch (v11+)
//! carries the client's rack. A leader whose cluster has a replica
//! selector (Kafka's `replica.selector.class`, e.g.
//! `RackAwareReplicaSelector`) may answer with a `preferred_read_replica`:
//! a broker in the client's rack that holds the partition, usually without
//! records. From then on the partition is fetched from that replica, until
//! the replica fails a fetch in any way (an error code such as
//! `NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH` or `OFFSET_OUT_OF_RANGE`
//! — a follower may lag the leader —, a lost connection, a partition left
//! out of its answer): then the partition goes back to its leader, which
//! may name a replica again. Only fetches go to a replica; every other
//! request goes to the leader.
//!
//! A follower serves up to its high watermark, which may trail the
//! leader's for a moment. For an offset past its log end it answers
//! `OFFSET_OUT_OF_RANGE`, and the fetch goes back to the leader; for one
//! past its high watermark but within its log, an answer with no records
//! and its high watermark (Kafka's `LocalLog.read`; so may a leader just
//! elected). The replay core tells such an answer from the log's end by
//! the end it already knows of, and its next fetch waits at the broker for
//! the high watermark ([`crate::replay::OutgoingFetch::max_wait`]).
//!
//! # References
//! - KIP-392 (allow consumers to fetch from the closest replica): Fetch
//!   v11 `rack_id` and `preferred_read_replica`, the consumer's
//!   `client.rack`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{FetchedPartition, PartitionLeader};

/// Where a partition's fetches go now: its leader, or the replica the
/// leader preferred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchSource {
    /// The broker to fetch from (the replica's id and address when
    /// `follower`), with the leader's epoch and the topic id.
    pub(crate) target: PartitionLeader,
    /// Whether `target` is a preferred replica, not the leader.
    pub(crate) follower: bool,
}

/// The replicas leaders preferred, by partition.
#[derive(Debug, Default)]
pub(crate) struct PreferredReplicas {
    by_partition: Mutex<HashMap<(String, i32), i32>>,
}

impl PreferredReplicas {
    fn lock(&self) -> MutexGuard<'_, HashMap<(String, i32), i32>> {
        self.by_partition
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The preferred replica of a partition, if a leader named one.
    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<i32> {
        self.lock().get(&(topic.to_owned(), partition)).copied()
    }

    /// Takes in a Fetch answer from `source`: a replica other than the
    /// one that answered, named by the leader, becomes the partition's
    /// source; whether it did.
    pub(crate) fn observe(
        &self,
        topic: &str,
        partition: i32,
        source: &FetchSource,
        fetched: &FetchedPartition,
    ) -> bool {
        let replica = fetched.preferred_read_replica;
        if source.follower || replica < 0 || replica == source.target.broker_id {
            return false;
        }
        tracing::debug!(
            topic,
            partition,
            replica,
            leader = source.target.broker_id,
            "fetching from the preferred replica"
        );
        self.lock().insert((topic.to_owned(), partition), replica);
        true
    }

    /// Sends a partition's fetches back to its leader.
    pub(crate) fn forget(&self, topic: &str, partition: i32) {
        if self.lock().remove(&(topic.to_owned(), partition)).is_some() {
            tracing::debug!(topic, partition, "back to fetching from the leader");
        }
    }
}
