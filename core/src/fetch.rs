//! The wire side of Fetch, without IO: what to fetch ([`FetchParams`]),
//! the request for one or many partitions ([`fetch_request_for`]), and each
//! partition's answer read out of a response ([`read_fetch_partitions`]).
//!
//! The request is a sessionless full fetch (session id 0, epoch -1) from a
//! consumer (replica id -1). A partition's `records` is a [`Bytes`] view of
//! the response frame, handed on without a copy. The broker returns batches
//! from the start of the batch that contains the fetch offset, so the
//! buffer may start below it, may end with a partial batch, and may hold
//! less than asked for.
//!
//! # References
//! - Kafka protocol guide, "Fetch API":
//!   <https://kafka.apache.org/protocol#The_Messages_Fetch>
//! - KIP-74 (`max_bytes`, first batch returned whole), KIP-98
//!   (`isolation_level`, `last_stable_offset`, aborted transactions),
//!   KIP-227 (fetch sessions; not used), KIP-320 (`current_leader_epoch`),
//!   KIP-516 (topic ids, Fetch v13+), KIP-392 (`rack_id` and
//!   `preferred_read_replica`, Fetch v11+), KIP-219 (`throttle_time_ms`).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;
use walfetch_codec::AbortedTransaction;

use crate::error_code::ErrorCode;

/// Which records a fetch may return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum IsolationLevel {
    /// Everything up to the high watermark, aborted transactions included.
    #[default]
    ReadUncommitted,
    /// Only up to the last stable offset; the response lists the aborted
    /// transactions so the consumer can drop their records.
    ReadCommitted,
}

impl IsolationLevel {
    /// The wire value.
    pub const fn as_i8(self) -> i8 {
        match self {
            Self::ReadUncommitted => 0,
            Self::ReadCommitted => 1,
        }
    }
}

/// What to fetch: one partition from one offset, within byte limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchParams {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The fetch offset.
    pub offset: i64,
    /// The response-wide byte limit (`max_bytes`).
    pub max_bytes: i32,
    /// The partition's byte limit (`partition_max_bytes`).
    pub partition_max_bytes: i32,
    /// How many bytes the broker should wait for (`min_bytes`).
    pub min_bytes: i32,
    /// How long the broker may wait for `min_bytes` (`max_wait_ms`).
    pub max_wait: Duration,
    /// The isolation level.
    pub isolation: IsolationLevel,
    /// The topic id the fetch must read (KIP-516), nil for whatever topic
    /// has the name now: a topic deleted and recreated under the same name
    /// is `walfetch`'s `ClientError::TopicIdChanged` (see its `Cluster::fetch`
    /// for what is checked). Metadata giving no id (a broker without topic ids) is
    /// not compared.
    pub topic_id: Uuid,
}

impl FetchParams {
    /// Fetch `topic`/`partition` from `offset` with a consumer's defaults:
    /// 50 MiB per response, 1 MiB for the partition, `min_bytes` 1, wait at
    /// most 500 ms, `read_uncommitted`, any topic id.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> Self {
        Self {
            topic: topic.into(),
            partition,
            offset,
            max_bytes: 50 * 1024 * 1024,
            partition_max_bytes: 1024 * 1024,
            min_bytes: 1,
            max_wait: Duration::from_millis(500),
            isolation: IsolationLevel::ReadUncommitted,
            topic_id: Uuid::nil(),
        }
    }

    /// Sets both byte limits to `bytes`.
    pub fn with_max_bytes(mut self, bytes: i32) -> Self {
        self.max_bytes = bytes;
        self.partition_max_bytes = bytes;
        self
    }

    /// Sets `min_bytes`.
    pub fn with_min_bytes(mut self, bytes: i32) -> Self {
        self.min_bytes = bytes;
        self
    }

    /// Sets `max_wait`.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    /// Sets the isolation level.
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    /// Binds the fetch to the topic of id `topic_id` (nil: unbound); see
    /// [`FetchParams::topic_id`].
    pub fn with_topic_id(mut self, topic_id: Uuid) -> Self {
        self.topic_id = topic_id;
        self
    }
}

/// One partition's part of a Fetch response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The record batches, a view of the response frame; possibly empty,
    /// possibly starting below the fetch offset, possibly ending with a
    /// partial batch.
    pub records: Bytes,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset (-1 if unknown).
    pub last_stable_offset: i64,
    /// The log start offset (-1 if unknown).
    pub log_start_offset: i64,
    /// Aborted transactions overlapping the records (`read_committed` only),
    /// for [`walfetch_codec::TransactionFilter`].
    pub aborted_transactions: Vec<AbortedTransaction>,
    /// The partition's error code as the broker sent it.
    /// `walfetch`'s `Cluster::fetch` turns every code but `NONE` into an
    /// error or a retry; its `fetch_on` returns it as is.
    pub error_code: ErrorCode,
    /// Bytes the whole response took on the wire, length prefix included.
    pub wire_bytes: usize,
    /// The broker that answered.
    pub broker: String,
    /// The Fetch version used.
    pub version: i16,
    /// The broker's throttle time (KIP-219).
    pub throttle_time_ms: i32,
    /// The replica the leader prefers the client to fetch this partition
    /// from (KIP-392, Fetch v11+), -1 for none. `walfetch`'s `Cluster::fetch` follows
    /// it.
    pub preferred_read_replica: i32,
}

impl FetchedPartition {
    /// Where a fetch at `isolation` stops reading: the last stable offset
    /// for `read_committed` (when the broker gave one), else the high
    /// watermark.
    pub fn readable_end(&self, isolation: IsolationLevel) -> i64 {
        match isolation {
            IsolationLevel::ReadCommitted if self.last_stable_offset >= 0 => {
                self.last_stable_offset
            }
            _ => self.high_watermark,
        }
    }
}

/// One partition of a Fetch request: what to fetch, and what metadata says
/// of its leader.
#[derive(Debug, Clone, Copy)]
pub struct FetchTarget<'a> {
    /// The partition, offset and limits.
    pub params: &'a FetchParams,
    /// The leader epoch (-1 if unknown): lets the broker fence a stale
    /// leader (v9+).
    pub leader_epoch: i32,
    /// The topic id (nil if unknown): names the topic in v13+.
    pub topic_id: Uuid,
}

/// The Fetch request for `params` in `version`. `leader_epoch` (-1 if
/// unknown) lets the broker fence a stale leader (v9+); `topic_id` names the
/// topic in v13+.
pub fn fetch_request(
    params: &FetchParams,
    leader_epoch: i32,
    topic_id: Uuid,
    version: i16,
) -> FetchRequest {
    let target = FetchTarget {
        params,
        leader_epoch,
        topic_id,
    };
    fetch_request_for(&[target], version)
}

/// One Fetch request for every partition of `targets`, in their order (the
/// broker fills the response in that order, and only the first partition
/// that returns data gets its first batch whole past its limit, KIP-74).
/// Wait, `min_bytes` and isolation come from the first target; the
/// request's `max_bytes` is the sum of the partitions' `max_bytes`.
pub fn fetch_request_for(targets: &[FetchTarget<'_>], version: i16) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut last: Option<(&str, Uuid)> = None;
    for t in targets {
        let p = t.params;
        let partition = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(if version >= 9 { t.leader_epoch } else { -1 })
            .with_fetch_offset(p.offset)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(p.partition_max_bytes);
        let same_topic = last.is_some_and(|(name, id)| name == p.topic && id == t.topic_id);
        match topics.last_mut() {
            Some(topic) if same_topic => topic.partitions.push(partition),
            _ => {
                let mut topic = FetchTopic::default().with_partitions(vec![partition]);
                if version >= 13 {
                    topic.topic_id = t.topic_id;
                } else {
                    topic.topic = TopicName(StrBytes::from_string(p.topic.clone()));
                }
                topics.push(topic);
            }
        }
        last = Some((p.topic.as_str(), t.topic_id));
    }
    let first = targets.first().map(|t| t.params);
    let max_bytes = targets
        .iter()
        .fold(0i32, |sum, t| sum.saturating_add(t.params.max_bytes.max(0)));
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(first.map_or(0, |p| {
            i32::try_from(p.max_wait.as_millis()).unwrap_or(i32::MAX)
        }))
        .with_min_bytes(first.map_or(1, |p| p.min_bytes))
        .with_max_bytes(max_bytes)
        .with_isolation_level(first.map_or(0, |p| p.isolation.as_i8()))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
}

/// Picks every partition of `targets` out of a Fetch response `body` of
/// `version` that took `wire_bytes` on the wire, in their order: each the
/// partition's answer (its error code in it), or `None` where the response
/// lacks it. A top-level error code fails them all: `Err` with that code.
/// The response's bytes on the wire are shared out: each partition's
/// records, plus an even share of the rest.
pub fn read_fetch_partitions(
    targets: &[FetchTarget<'_>],
    broker: &str,
    body: FetchResponse,
    version: i16,
    wire_bytes: usize,
) -> Result<Vec<Option<FetchedPartition>>, ErrorCode> {
    let top = ErrorCode::from(body.error_code);
    if !top.is_ok() {
        return Err(top);
    }
    let mut topics = body.responses;
    let mut picked: Vec<Option<PartitionData>> = Vec::with_capacity(targets.len());
    for t in targets {
        let found = topics
            .iter_mut()
            .filter(|topic| {
                if version >= 13 {
                    topic.topic_id == t.topic_id
                } else {
                    topic.topic.0.as_str() == t.params.topic
                }
            })
            .find_map(|topic| {
                let at = topic
                    .partitions
                    .iter()
                    .position(|p| p.partition_index == t.params.partition)?;
                Some(topic.partitions.swap_remove(at))
            });
        picked.push(found);
    }
    let records: usize = picked
        .iter()
        .flatten()
        .map(|p| p.records.as_ref().map_or(0, Bytes::len))
        .sum();
    let overhead = wire_bytes.saturating_sub(records) / targets.len().max(1);
    Ok(picked
        .into_iter()
        .map(|partition| {
            let partition = partition?;
            let records = partition.records.unwrap_or_default();
            Some(FetchedPartition {
                wire_bytes: records.len() + overhead,
                records,
                high_watermark: partition.high_watermark,
                last_stable_offset: partition.last_stable_offset,
                log_start_offset: partition.log_start_offset,
                aborted_transactions: partition
                    .aborted_transactions
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| AbortedTransaction {
                        first_offset: a.first_offset,
                        producer_id: a.producer_id.0,
                    })
                    .collect(),
                error_code: ErrorCode::from(partition.error_code),
                broker: broker.to_owned(),
                version,
                throttle_time_ms: body.throttle_time_ms,
                preferred_read_replica: partition.preferred_read_replica.0,
            })
        })
        .collect())
}
