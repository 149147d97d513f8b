//! Cluster metadata: brokers, topics, partition leaders and leader epochs,
//! and reading it: [`Cluster::metadata`] asks any reachable broker and
//! merges the answer into the client's cache.
//!
//! # References
//! - Kafka protocol guide, "Metadata API":
//!   <https://kafka.apache.org/protocol#The_Messages_Metadata>
//! - KIP-320 (leader epoch in Metadata v7+), KIP-516 (topic ids, v10+).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::time::Instant;
use uuid::Uuid;

use super::{ClientError, Cluster};
use crate::connection::Connection;
use crate::error_code::ErrorCode;

/// One broker as metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// The broker id.
    pub id: i32,
    /// The advertised host.
    pub host: String,
    /// The advertised port.
    pub port: i32,
    /// The rack, if configured.
    pub rack: Option<String>,
}

impl BrokerInfo {
    /// `host:port`, with brackets around an IPv6 host.
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One partition as metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// The partition index.
    pub partition: i32,
    /// The partition-level error code.
    pub error: ErrorCode,
    /// The leader's broker id, -1 when there is none.
    pub leader_id: i32,
    /// The leader epoch, -1 when unknown (Metadata before v7).
    pub leader_epoch: i32,
    /// The replicas' broker ids.
    pub replicas: Vec<i32>,
    /// The in-sync replicas' broker ids.
    pub isr: Vec<i32>,
}

/// One topic as metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic name.
    pub name: String,
    /// The topic id (nil before Metadata v10, or when the broker has none).
    pub id: Uuid,
    /// The topic-level error code.
    pub error: ErrorCode,
    /// Whether the topic is internal.
    pub is_internal: bool,
    /// The partitions, by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// What one Metadata response said about the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The cluster id, if the broker sent one.
    pub cluster_id: Option<String>,
    /// The controller's broker id, -1 when unknown.
    pub controller_id: i32,
    /// The brokers, by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// The topics asked about (or all topics), by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// Where to send requests for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLeader {
    /// The leader's broker id.
    pub broker_id: i32,
    /// The leader's address.
    pub address: String,
    /// The leader epoch, -1 when unknown.
    pub leader_epoch: i32,
    /// The topic id, nil when unknown.
    pub topic_id: Uuid,
}

impl ClusterMetadata {
    /// Reads a Metadata response.
    pub fn from_response(response: &MetadataResponse) -> Self {
        let brokers = response
            .brokers
            .iter()
            .map(|b| {
                let info = BrokerInfo {
                    id: b.node_id.0,
                    host: b.host.to_string(),
                    port: b.port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                };
                (info.id, info)
            })
            .collect();
        let topics = response
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let info = PartitionInfo {
                            partition: p.partition_index,
                            error: ErrorCode::from(p.error_code),
                            leader_id: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                        };
                        (info.partition, info)
                    })
                    .collect();
                let info = TopicInfo {
                    name: name.clone(),
                    id: t.topic_id,
                    error: ErrorCode::from(t.error_code),
                    is_internal: t.is_internal,
                    partitions,
                };
                Some((name, info))
            })
            .collect();
        Self {
            cluster_id: response.cluster_id.as_ref().map(|c| c.to_string()),
            controller_id: response.controller_id.0,
            brokers,
            topics,
        }
    }

    /// Takes in a newer response: brokers and controller are replaced,
    /// topics are replaced one by one (topics not in `newer` are kept).
    /// A partition whose leader epoch in `newer` is below the one known
    /// (the same topic id, both epochs known) keeps what is known: a
    /// broker that has not yet heard of a leader change answers with the
    /// old leader, and following it would send requests to a broker that
    /// refuses them (KIP-320; the Java client's metadata does the same).
    pub fn merge(&mut self, newer: Self) {
        if newer.cluster_id.is_some() {
            self.cluster_id = newer.cluster_id;
        }
        self.controller_id = newer.controller_id;
        if !newer.brokers.is_empty() {
            self.brokers = newer.brokers;
        }
        for (name, mut topic) in newer.topics {
            if let Some(known) = self.topics.get(&name).filter(|k| k.id == topic.id) {
                for (index, partition) in &mut topic.partitions {
                    if let Some(kept) = known.partitions.get(index).filter(|k| {
                        k.leader_epoch >= 0
                            && partition.leader_epoch >= 0
                            && k.leader_epoch > partition.leader_epoch
                    }) {
                        *partition = kept.clone();
                    }
                }
            }
            self.topics.insert(name, topic);
        }
    }

    /// The leader of a partition, if metadata names a usable one.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<PartitionLeader> {
        let t = self.topics.get(topic)?;
        let p = t.partitions.get(&partition)?;
        let broker = self.brokers.get(&p.leader_id)?;
        Some(PartitionLeader {
            broker_id: broker.id,
            address: broker.address(),
            leader_epoch: p.leader_epoch,
            topic_id: t.id,
        })
    }
}

/// A Metadata request for `topics` (`None`: every topic) in `version`,
/// never creating topics.
pub fn metadata_request(topics: Option<&[&str]>, version: i16) -> MetadataRequest {
    let topics = topics.map(|names| {
        names
            .iter()
            .map(|name| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string((*name).to_owned()))))
            })
            .collect()
    });
    let mut request = MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        request.allow_auto_topic_creation = false;
    }
    request
}

/// The last Metadata read that answered about a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TopicRead {
    /// Counts reads over every topic: a read newer than one seen has a
    /// higher number.
    pub(super) number: u64,
    /// When its answer was taken in.
    pub(super) at: Instant,
    /// The broker that answered.
    pub(super) by: String,
    /// What it answered.
    pub(super) answer: Arc<ClusterMetadata>,
}

/// When each topic's metadata was last read, so that operations waiting
/// for a partition's leader read it once a backoff between them, not once
/// each (see [`Cluster::leader`]).
#[derive(Debug, Default)]
pub(super) struct TopicReads {
    reads: Mutex<(u64, HashMap<String, TopicRead>)>,
}

impl TopicReads {
    fn lock(&self) -> MutexGuard<'_, (u64, HashMap<String, TopicRead>)> {
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last read that answered about `topic`.
    pub(super) fn last(&self, topic: &str) -> Option<TopicRead> {
        self.lock().1.get(topic).cloned()
    }

    /// Forgets when `topic` was read: the next lookup reads it at once.
    fn forget(&self, topic: &str) {
        self.lock().1.remove(topic);
    }

    /// Notes that `by` answered about every topic of `metadata` now.
    fn answered(&self, metadata: &ClusterMetadata, by: &str) {
        let mut reads = self.lock();
        reads.0 += 1;
        let number = reads.0;
        let at = Instant::now();
        let answer = Arc::new(metadata.clone());
        for topic in metadata.topics.keys() {
            let read = TopicRead {
                number,
                at,
                by: by.to_owned(),
                answer: Arc::clone(&answer),
            };
            reads.1.insert(topic.clone(), read);
        }
    }
}

impl Cluster {
    /// Takes in a Metadata answer from `by`: merged into the cache, and
    /// its topics noted as read now.
    pub(super) fn take_metadata(&self, metadata: ClusterMetadata, by: &str) {
        self.topic_reads.answered(&metadata, by);
        self.cache().merge(metadata);
    }

    /// The metadata cached so far.
    pub fn cached_metadata(&self) -> ClusterMetadata {
        self.cache().clone()
    }

    /// Reads `Metadata` for `topics` (`None`: every topic), retrying lost
    /// connections, and merges it into the cache.
    pub async fn metadata(&self, topics: Option<&[&str]>) -> Result<ClusterMetadata, ClientError> {
        let (metadata, _) = self
            .retrying(
                || "Metadata".to_owned(),
                true,
                None,
                || self.read_metadata(topics),
            )
            .await?;
        Ok(metadata)
    }

    /// One Metadata round trip to any reachable broker (open connections
    /// first, then known brokers, then the bootstrap list); returns what it
    /// said and who said it.
    pub(super) async fn read_metadata(
        &self,
        topics: Option<&[&str]>,
    ) -> Result<(ClusterMetadata, String), ClientError> {
        let mut candidates = self.pool.open_addresses();
        candidates.extend(self.cache().brokers.values().map(BrokerInfo::address));
        candidates.extend(self.config.bootstrap.iter().cloned());
        let mut seen = HashSet::new();
        candidates.retain(|a| seen.insert(a.clone()));
        let mut failures = Vec::new();
        for address in &candidates {
            match self.read_metadata_from(address, topics).await {
                Ok(metadata) => {
                    self.take_metadata(metadata.clone(), address);
                    return Ok((metadata, address.clone()));
                }
                Err(e) => {
                    tracing::debug!(%address, error = %e, "metadata request failed");
                    // A Kafka error code is the cluster's answer; a
                    // connection failure is one broker's, and the next may
                    // answer.
                    let next = matches!(&e, ClientError::Connection(_)) || e.is_retriable(true);
                    failures.push(e);
                    if !next {
                        break;
                    }
                }
            }
        }
        let last = failures.pop().unwrap_or_else(|| {
            ClientError::InvalidArgument("no broker to ask for metadata".to_owned())
        });
        Err(ClientError::NoBrokerAnswered {
            addresses: candidates,
            earlier: failures,
            last: Box::new(last),
        })
    }

    async fn read_metadata_from(
        &self,
        address: &str,
        topics: Option<&[&str]>,
    ) -> Result<ClusterMetadata, ClientError> {
        // The least busy connection: on one carrying a slow fetch, the
        // broker would answer after it (it serves a connection's requests
        // in order), and every lookup waiting for this read with it.
        let connection = self.pool.get_spread(address).await?;
        self.read_metadata_on(&connection, topics).await
    }

    /// One Metadata read of `topics` (all when `None`) on `connection`:
    /// its throttle time noted, a top-level error code an error, a lost
    /// connection evicted.
    pub(super) async fn read_metadata_on(
        &self,
        connection: &Arc<Connection>,
        topics: Option<&[&str]>,
    ) -> Result<ClusterMetadata, ClientError> {
        let address = connection.broker();
        let version = connection.version(ApiKey::Metadata)?;
        let request: MetadataRequest = metadata_request(topics, version);
        match connection.request(&request).await {
            Ok(response) => {
                self.pool.throttled(address, response.body.throttle_time_ms);
                let code = ErrorCode::from(response.body.error_code);
                if !code.is_ok() {
                    return Err(ClientError::Kafka {
                        api: ApiKey::Metadata,
                        code,
                        topic: None,
                        partition: None,
                        broker: address.to_owned(),
                        message: None,
                    });
                }
                Ok(ClusterMetadata::from_response(&response.body))
            }
            Err(e) => {
                if e.is_connection_lost() {
                    self.pool.evict(connection);
                }
                Err(e.into())
            }
        }
    }

    /// Forgets what metadata said about `topic`, so the next operation on
    /// it reads `Metadata` again, at once.
    pub fn invalidate(&self, topic: &str) {
        self.topic_reads.forget(topic);
        self.cache().topics.remove(topic);
    }

    /// Forgets what metadata said about `topic` after an answer said it is
    /// stale (a leader moved, a connection lost): the next operation on it
    /// reads `Metadata` again, no sooner than a backoff after the last
    /// read (see [`Cluster::leader`]).
    pub(crate) fn invalidate_after_error(&self, topic: &str) {
        self.cache().topics.remove(topic);
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::BrokerId;

    use super::*;

    /// Metadata naming `leader` for partition 0 of topic "t" (id `id`) at
    /// leader epoch `epoch`, with brokers 1 and 2.
    fn one_partition(id: Uuid, leader: i32, epoch: i32) -> ClusterMetadata {
        let broker = |n: i32| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(n))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9090 + n)
        };
        ClusterMetadata::from_response(
            &MetadataResponse::default()
                .with_brokers(vec![broker(1), broker(2)])
                .with_topics(vec![MetadataResponseTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                    .with_topic_id(id)
                    .with_partitions(vec![MetadataResponsePartition::default()
                        .with_partition_index(0)
                        .with_leader_id(BrokerId(leader))
                        .with_leader_epoch(epoch)])]),
        )
    }

    #[test]
    fn an_older_leader_epoch_does_not_replace_a_newer_one() {
        let id = Uuid::from_u128(7);
        let mut known = one_partition(id, 1, 5);
        // A broker that has not heard of the change yet: the old leader.
        known.merge(one_partition(id, 2, 4));
        assert_eq!(known.leader("t", 0).unwrap().broker_id, 1);
        assert_eq!(known.leader("t", 0).unwrap().leader_epoch, 5);
        // A newer epoch, or an unknown one, is taken.
        known.merge(one_partition(id, 2, 6));
        assert_eq!(known.leader("t", 0).unwrap().broker_id, 2);
        known.merge(one_partition(id, 1, -1));
        assert_eq!(known.leader("t", 0).unwrap().broker_id, 1);
        // A topic recreated (another id) starts its epochs again.
        let mut known = one_partition(id, 1, 5);
        known.merge(one_partition(Uuid::from_u128(8), 2, 0));
        assert_eq!(known.leader("t", 0).unwrap().broker_id, 2);
    }

    #[test]
    fn reads_leaders_and_epochs() {
        let response = MetadataResponse::default()
            .with_controller_id(BrokerId(1))
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9092)])
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_partitions(vec![
                    MetadataResponsePartition::default()
                        .with_partition_index(0)
                        .with_leader_id(BrokerId(1))
                        .with_leader_epoch(7),
                    MetadataResponsePartition::default()
                        .with_partition_index(1)
                        .with_leader_id(BrokerId(-1))
                        .with_error_code(5),
                ])]);
        let m = ClusterMetadata::from_response(&response);
        let leader = m.leader("t", 0).expect("leader");
        assert_eq!(
            (
                leader.broker_id,
                leader.address.as_str(),
                leader.leader_epoch
            ),
            (1, "127.0.0.1:9092", 7)
        );
        assert_eq!(m.leader("t", 1), None);
        assert_eq!(
            m.topics["t"].partitions[&1].error,
            ErrorCode::LeaderNotAvailable
        );
        assert_eq!(m.leader("u", 0), None);
    }

    #[test]
    fn ipv6_addresses_get_brackets() {
        let b = BrokerInfo {
            id: 1,
            host: "::1".into(),
            port: 9,
            rack: None,
        };
        assert_eq!(b.address(), "[::1]:9");
    }
}
