//! The cluster's shared state: brokers, topics and their partition logs,
//! leadership, habits, version limits and the fault queue, behind one lock
//! that is never held across an await.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use tokio::sync::watch;
use uuid::Uuid;

use crate::faults::FaultQueue;
use crate::fetch_rules::Habits;
use crate::log::PartitionLog;
use crate::producers::{DuplicateAnswer, ProducerStates};
use crate::stats::Counters;
use crate::versions::{self, VersionRange};

/// The longest topic name Kafka accepts.
const MAX_TOPIC_NAME: usize = 249;

pub(crate) struct PartitionState {
    pub(crate) log: PartitionLog,
    pub(crate) leader: i32,
    pub(crate) leader_epoch: i32,
    /// Idempotent producers' sequences (see `producers.rs`).
    pub(crate) producers: ProducerStates,
}

pub(crate) struct TopicState {
    pub(crate) id: Uuid,
    pub(crate) partitions: Vec<PartitionState>,
    /// The topic's `max.message.bytes`: the largest record batch Produce
    /// takes (`MESSAGE_TOO_LARGE` past it); `None`, no limit.
    pub(crate) max_message_bytes: Option<usize>,
}

pub(crate) struct BrokerState {
    pub(crate) node_id: i32,
    pub(crate) addr: SocketAddr,
    /// The address Metadata and Fetch leader hints give out: the listener's
    /// unless the builder set another (e.g. a proxy in front of the broker).
    pub(crate) advertised: SocketAddr,
    pub(crate) habits: Habits,
    /// The broker's `fetch.max.bytes` (KIP-541): the most a Fetch response
    /// carries, whatever the request's `max_bytes`.
    pub(crate) fetch_max_bytes: usize,
    /// The broker's rack (`broker.rack`), if any.
    pub(crate) rack: Option<String>,
    /// API key → versions served, narrowed from [`versions::SERVED`]; a
    /// missing key is not served.
    pub(crate) versions: BTreeMap<i16, VersionRange>,
    pub(crate) counters: Arc<Counters>,
}

impl BrokerState {
    pub(crate) fn new(node_id: i32, addr: SocketAddr, habits: Habits) -> Self {
        Self {
            node_id,
            addr,
            advertised: addr,
            habits,
            fetch_max_bytes: KAFKA_FETCH_MAX_BYTES,
            rack: None,
            versions: versions::SERVED
                .iter()
                .map(|(k, r)| (*k as i16, *r))
                .collect(),
            counters: Arc::new(Counters::default()),
        }
    }

    pub(crate) fn serves(&self, api_key: ApiKey) -> Option<VersionRange> {
        self.versions.get(&(api_key as i16)).copied()
    }
}

/// Kafka's default `fetch.max.bytes` (KIP-541): 55 MiB.
pub const KAFKA_FETCH_MAX_BYTES: usize = 55 << 20;

/// Everything the lock protects.
pub(crate) struct ClusterState {
    pub(crate) cluster_id: String,
    pub(crate) brokers: Vec<BrokerState>,
    pub(crate) topics: BTreeMap<String, TopicState>,
    pub(crate) faults: FaultQueue,
    pub(crate) auto_create_topics: bool,
    pub(crate) default_partitions: i32,
    /// Whether leaders point consumers in other racks at a replica of
    /// theirs and followers serve consumer fetches (KIP-392).
    pub(crate) follower_fetching: bool,
    next_topic_id: u64,
    /// The next id InitProducerId hands out.
    pub(crate) next_producer_id: i64,
    /// How Produce answers a duplicate batch.
    pub(crate) duplicate_answer: DuplicateAnswer,
}

/// Why a topic could not be created: a Kafka error code and a message.
pub(crate) type CreateError = (i16, String);

impl ClusterState {
    pub(crate) fn new(
        brokers: Vec<BrokerState>,
        auto_create_topics: bool,
        default_partitions: i32,
    ) -> Self {
        Self {
            cluster_id: "walfetch-testkit".into(),
            brokers,
            topics: BTreeMap::new(),
            faults: FaultQueue::default(),
            auto_create_topics,
            default_partitions,
            follower_fetching: false,
            next_topic_id: 1,
            next_producer_id: 1000,
            duplicate_answer: DuplicateAnswer::default(),
        }
    }

    pub(crate) fn broker(&self, node_id: i32) -> Option<&BrokerState> {
        self.brokers.iter().find(|b| b.node_id == node_id)
    }

    pub(crate) fn broker_mut(&mut self, node_id: i32) -> Option<&mut BrokerState> {
        self.brokers.iter_mut().find(|b| b.node_id == node_id)
    }

    pub(crate) fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionState> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get(topic)?.partitions.get(index)
    }

    pub(crate) fn partition_mut(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Option<&mut PartitionState> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get_mut(topic)?.partitions.get_mut(index)
    }

    pub(crate) fn topic_name_by_id(&self, id: Uuid) -> Option<&str> {
        self.topics
            .iter()
            .find(|(_, t)| t.id == id)
            .map(|(name, _)| name.as_str())
    }

    /// Creates a topic. `leaders` gives each partition's leader; `None`
    /// assigns partition `p` to the `p`-th broker, round robin.
    pub(crate) fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        leaders: Option<Vec<i32>>,
    ) -> Result<Uuid, CreateError> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err((
                ResponseError::TopicAlreadyExists.code(),
                format!("Topic '{name}' already exists."),
            ));
        }
        let leaders = match leaders {
            Some(leaders) => {
                if let Some(bad) = leaders.iter().find(|id| self.broker(**id).is_none()) {
                    return Err((
                        ResponseError::InvalidReplicaAssignment.code(),
                        format!("Broker {bad} of the replica assignment does not exist."),
                    ));
                }
                leaders
            }
            None => {
                if partitions < 1 {
                    return Err((
                        ResponseError::InvalidPartitions.code(),
                        format!("Number of partitions must be larger than 0, not {partitions}."),
                    ));
                }
                (0..partitions)
                    .map(|p| {
                        let index = usize::try_from(p).unwrap_or(0) % self.brokers.len().max(1);
                        self.brokers.get(index).map_or(-1, |b| b.node_id)
                    })
                    .collect()
            }
        };
        let id = Uuid::from_u64_pair(0x7761_6c66_6574_6368, self.next_topic_id);
        self.next_topic_id += 1;
        let partitions = leaders
            .into_iter()
            .map(|leader| PartitionState {
                log: PartitionLog::new(),
                leader,
                leader_epoch: 0,
                producers: ProducerStates::default(),
            })
            .collect();
        self.topics.insert(
            name.to_owned(),
            TopicState {
                id,
                partitions,
                max_message_bytes: None,
            },
        );
        Ok(id)
    }

    /// Makes `to` the leader of a partition; returns the new leader epoch.
    pub(crate) fn move_leader(&mut self, topic: &str, partition: i32, to: i32) -> Option<i32> {
        self.broker(to)?;
        let state = self.partition_mut(topic, partition)?;
        state.leader = to;
        state.leader_epoch += 1;
        Some(state.leader_epoch)
    }
}

pub(crate) fn validate_topic_name(name: &str) -> Result<(), CreateError> {
    let invalid = |why: String| Err((ResponseError::InvalidTopicException.code(), why));
    if name.is_empty() || name == "." || name == ".." {
        return invalid(format!("Topic name '{name}' is illegal."));
    }
    if name.len() > MAX_TOPIC_NAME {
        return invalid(format!(
            "Topic name is longer than {MAX_TOPIC_NAME} characters."
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return invalid(format!(
            "Topic name '{name}' is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'."
        ));
    }
    Ok(())
}

/// The state plus the append notification that wakes waiting fetches.
pub(crate) struct Shared {
    state: Mutex<ClusterState>,
    appended: watch::Sender<u64>,
}

impl Shared {
    pub(crate) fn new(state: ClusterState) -> Self {
        Self {
            state: Mutex::new(state),
            appended: watch::Sender::new(0),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes every fetch waiting for data.
    pub(crate) fn notify_append(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver that sees the next append.
    pub(crate) fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }
}
