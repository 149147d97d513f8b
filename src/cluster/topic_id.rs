//! Fetches bound to a topic id: a topic deleted and created again under
//! the same name is another log, and a fetch bound to the first
//! ([`super::FetchParams::topic_id`]) must not be taken for the second.
//!
//! Fetch v13+ names topics by id: the request carries the bound id, and a
//! broker that no longer has it answers `UNKNOWN_TOPIC_ID`. Below v13 (the
//! default, see [`crate::connection::versions`]) a request names the topic
//! only, and the broker reads whatever has the name when it serves it; the
//! id metadata gives the name is then all that tells the topics apart.
//! So before a fetch its leader is looked up with the cached metadata's id
//! compared ([`Cluster::bound_leader`]), which catches a recreation as
//! soon as anything reads metadata again (a leader moving, an error, a
//! fetch answered `OFFSET_OUT_OF_RANGE`); and a reader that ends (a
//! recovery, an index build) reads the topic's id once more before it
//! says it is done ([`Cluster::confirm_topic_id`]): a topic id is never
//! given again once its topic is deleted, so if the name still has the
//! bound id then, it had it for every fetch answered before. Confirming
//! every answer so would cost a Metadata round trip per fetch; a reader
//! whose topic is recreated under it may therefore have yielded records of
//! the new topic before it ends with the error, and a recovery that ends
//! in an error is not done.
//!
//! Metadata giving no id (a broker without topic ids, Metadata below v10)
//! is taken as agreeing: there is nothing to compare.
//!
//! # References
//! - KIP-516 (topic identifiers): <https://cwiki.apache.org/confluence/display/KAFKA/KIP-516%3A+Topic+Identifiers>

use kafka_protocol::messages::ApiKey;
use uuid::Uuid;

use super::error::Asked;
use super::{ClientError, Cluster, PartitionLeader};
use crate::error_code::ErrorCode;

/// [`ClientError::TopicIdChanged`] when `current` is an id other than
/// `bound` (nil for either: nothing to compare).
fn compare(topic: &str, partition: i32, bound: Uuid, current: Uuid) -> Result<(), ClientError> {
    if bound.is_nil() || current.is_nil() || current == bound {
        return Ok(());
    }
    Err(ClientError::TopicIdChanged {
        topic: topic.to_owned(),
        partition,
        expected: bound,
        current,
    })
}

impl Cluster {
    /// The leader of `topic`/`partition` for a request bound to topic id
    /// `bound` (nil: to none), as [`Cluster::leader`] finds it, with
    /// `bound` as its topic id. Cached metadata giving the topic another
    /// id is read again (the cache may be what is stale); if it still
    /// does, the topic was recreated: [`ClientError::TopicIdChanged`].
    pub(crate) async fn bound_leader(
        &self,
        topic: &str,
        partition: i32,
        bound: Uuid,
    ) -> Result<PartitionLeader, ClientError> {
        let mut leader = self.leader(topic, partition).await?;
        if compare(topic, partition, bound, leader.topic_id).is_err() {
            self.invalidate(topic);
            leader = self.leader(topic, partition).await?;
            compare(topic, partition, bound, leader.topic_id)?;
        }
        if !bound.is_nil() {
            leader.topic_id = bound;
        }
        Ok(leader)
    }

    /// [`Cluster::bound_leader`] under the retry policy.
    pub(crate) async fn bound_leader_retrying(
        &self,
        topic: &str,
        partition: i32,
        bound: Uuid,
    ) -> Result<PartitionLeader, ClientError> {
        self.retrying(
            || format!("finding the leader of topic {topic:?} partition {partition}"),
            true,
            Some(topic),
            || self.bound_leader(topic, partition, bound),
        )
        .await
    }

    /// Confirms that `topic` still has the id `bound` (nil: any), with a
    /// Metadata read sent now: every fetch of it answered before was of
    /// the topic of that id. Otherwise [`ClientError::TopicIdChanged`].
    /// The read goes to `partition`'s leader on its least busy connection,
    /// and is retried under the retry policy.
    pub(crate) async fn confirm_topic_id(
        &self,
        topic: &str,
        partition: i32,
        bound: Uuid,
    ) -> Result<(), ClientError> {
        self.confirm_topic_ids(&[(topic, partition, bound)]).await
    }

    /// [`Cluster::confirm_topic_id`] for each `(topic, partition, bound)`,
    /// with one Metadata read naming every topic whose id is bound, asked
    /// of the first one's leader: a recovery of 64 topics confirms them in
    /// one round trip, not 64 one after another.
    pub(crate) async fn confirm_topic_ids(
        &self,
        bound: &[(&str, i32, Uuid)],
    ) -> Result<(), ClientError> {
        let bound: Vec<(&str, i32, Uuid)> =
            bound.iter().copied().filter(|b| !b.2.is_nil()).collect();
        let Some(&(first, _, _)) = bound.first() else {
            return Ok(());
        };
        let describe = || match bound.as_slice() {
            [(topic, _, _)] => format!("confirming the topic id of topic {topic:?}"),
            _ => format!("confirming the topic ids of {} topics", bound.len()),
        };
        let current = self
            .retrying(describe, true, Some(first), || self.read_topic_ids(&bound))
            .await?;
        for (&(topic, partition, id), current) in bound.iter().zip(current) {
            compare(topic, partition, id, current)?;
        }
        Ok(())
    }

    /// Each topic's id of `bound` as one Metadata read gives it now
    /// (merged into the cache), asked of the first partition's leader on
    /// its least busy connection (a request queued behind a slow fetch
    /// would wait for it); a topic's error code, or
    /// `UNKNOWN_TOPIC_OR_PARTITION` when the answer leaves it out, as an
    /// error.
    async fn read_topic_ids(&self, bound: &[(&str, i32, Uuid)]) -> Result<Vec<Uuid>, ClientError> {
        let Some(&(topic, partition, _)) = bound.first() else {
            return Ok(Vec::new());
        };
        let leader = self.leader(topic, partition).await?;
        let connection = self.fetch_connection(&leader.address).await?;
        let mut topics: Vec<&str> = bound.iter().map(|b| b.0).collect();
        topics.sort_unstable();
        topics.dedup();
        let metadata = self.read_metadata_on(&connection, Some(&topics)).await?;
        self.take_metadata(metadata.clone(), connection.broker());
        bound
            .iter()
            .map(|&(topic, partition, _)| {
                let asked = Asked::new(ApiKey::Metadata, connection.broker(), topic, partition);
                match metadata.topics.get(topic) {
                    Some(t) if t.error.is_ok() => Ok(t.id),
                    Some(t) => Err(asked.failed(t.error, None)),
                    None => Err(asked.failed(ErrorCode::UnknownTopicOrPartition, None)),
                }
            })
            .collect()
    }
}
