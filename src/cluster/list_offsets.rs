//! ListOffsets: the earliest and latest offsets of a partition, or the
//! first offset at or after a timestamp.
//!
//! # References
//! - Kafka protocol guide, "ListOffsets API":
//!   <https://kafka.apache.org/protocol#The_Messages_ListOffsets>
//! - KIP-79 (lookup by timestamp, v1+), KIP-98 (`isolation_level`, v2+),
//!   KIP-320 (`current_leader_epoch`, v4+).

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::error::Asked;
use super::{ClientError, Cluster, IsolationLevel};

/// Which offset to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The offset the next record will get (the high watermark, or the last
    /// stable offset under `read_committed`).
    Latest,
    /// The first offset whose record's timestamp is at or after this one
    /// (milliseconds since the epoch).
    Timestamp(i64),
}

impl OffsetSpec {
    /// The `timestamp` field's value: -2 earliest, -1 latest.
    pub const fn as_timestamp(self) -> i64 {
        match self {
            Self::Earliest => -2,
            Self::Latest => -1,
            Self::Timestamp(ts) => ts,
        }
    }
}

/// A ListOffsets answer for one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset, `None` when no record matches (a timestamp after every
    /// record's).
    pub offset: Option<i64>,
    /// The matching record's timestamp, `None` for earliest/latest or when
    /// the broker sent -1.
    pub timestamp: Option<i64>,
    /// The leader epoch of the offset, `None` if unknown (v4+).
    pub leader_epoch: Option<i32>,
}

/// The ListOffsets request for one partition in `version`.
pub fn list_offsets_request(
    topic: &str,
    partition: i32,
    spec: OffsetSpec,
    isolation: IsolationLevel,
    leader_epoch: i32,
    version: i16,
) -> ListOffsetsRequest {
    let partition = ListOffsetsPartition::default()
        .with_partition_index(partition)
        .with_current_leader_epoch(if version >= 4 { leader_epoch } else { -1 })
        .with_timestamp(spec.as_timestamp());
    let mut request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![partition])]);
    if version >= 2 {
        request.isolation_level = isolation.as_i8();
    }
    request
}

/// Picks the partition's answer out of a ListOffsets response.
pub fn read_list_offsets_response(
    topic: &str,
    partition: i32,
    broker: &str,
    response: &ListOffsetsResponse,
) -> Result<ListedOffset, ClientError> {
    let named = response
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == topic);
    let p = Asked::new(ApiKey::ListOffsets, broker, topic, partition).answer(
        named.flat_map(|t| &t.partitions),
        |p| (p.partition_index, p.error_code),
        |_| None,
    )?;
    Ok(ListedOffset {
        offset: (p.offset >= 0).then_some(p.offset),
        timestamp: (p.timestamp >= 0).then_some(p.timestamp),
        leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
    })
}

impl Cluster {
    /// Looks up an offset of a partition.
    pub async fn list_offsets(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset, ClientError> {
        let describe = || {
            let what = match spec {
                OffsetSpec::Earliest => "earliest".to_owned(),
                OffsetSpec::Latest => "latest".to_owned(),
                OffsetSpec::Timestamp(ts) => format!("at timestamp {ts}"),
            };
            format!("ListOffsets ({what}) of topic {topic:?} partition {partition}")
        };
        self.retrying(describe, true, Some(topic), || {
            self.list_offsets_once(topic, partition, spec, isolation)
        })
        .await
    }

    /// The partition's log start offset (its earliest offset, whatever
    /// the isolation level); `None` when the broker names none.
    pub async fn log_start(&self, topic: &str, partition: i32) -> Result<Option<i64>, ClientError> {
        let listed = self
            .list_offsets(
                topic,
                partition,
                OffsetSpec::Earliest,
                IsolationLevel::ReadUncommitted,
            )
            .await?;
        Ok(listed.offset)
    }

    async fn list_offsets_once(
        &self,
        topic: &str,
        partition: i32,
        spec: OffsetSpec,
        isolation: IsolationLevel,
    ) -> Result<ListedOffset, ClientError> {
        let (connection, leader) = self.leader_connection(topic, partition).await?;
        let result = async {
            let version = connection.version(ApiKey::ListOffsets)?;
            let request = list_offsets_request(
                topic,
                partition,
                spec,
                isolation,
                leader.leader_epoch,
                version,
            );
            let response = connection.request(&request).await?;
            self.pool
                .throttled(connection.broker(), response.body.throttle_time_ms);
            read_list_offsets_response(topic, partition, connection.broker(), &response.body)
        }
        .await;
        self.evict_if_lost(&connection, &result);
        result
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::list_offsets_response::{
        ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
    };

    use super::*;
    use crate::error_code::ErrorCode;

    #[test]
    fn request_fields_follow_version() {
        let r = list_offsets_request(
            "t",
            2,
            OffsetSpec::Earliest,
            IsolationLevel::ReadCommitted,
            4,
            1,
        );
        assert_eq!((r.replica_id.0, r.isolation_level), (-1, 0));
        assert_eq!(r.topics[0].partitions[0].timestamp, -2);
        assert_eq!(r.topics[0].partitions[0].current_leader_epoch, -1);
        let r = list_offsets_request(
            "t",
            2,
            OffsetSpec::Timestamp(99),
            IsolationLevel::ReadCommitted,
            4,
            7,
        );
        assert_eq!(
            (r.isolation_level, r.topics[0].partitions[0].timestamp),
            (1, 99)
        );
        assert_eq!(r.topics[0].partitions[0].current_leader_epoch, 4);
    }

    #[test]
    fn reads_offsets_and_errors() {
        let response = |code: i16, offset: i64| {
            ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![ListOffsetsPartitionResponse::default()
                    .with_partition_index(2)
                    .with_error_code(code)
                    .with_timestamp(-1)
                    .with_offset(offset)])])
        };
        let got = read_list_offsets_response("t", 2, "b:1", &response(0, 17)).expect("offset");
        assert_eq!((got.offset, got.timestamp), (Some(17), None));
        let got = read_list_offsets_response("t", 2, "b:1", &response(0, -1)).expect("none");
        assert_eq!(got.offset, None);
        let err = read_list_offsets_response("t", 2, "b:1", &response(6, 0)).expect_err("error");
        assert_eq!(err.code(), Some(ErrorCode::NotLeaderOrFollower));
        let msg = err.to_string();
        assert!(
            msg.contains("\"t\" partition 2") && msg.contains("b:1"),
            "{msg}"
        );
        assert!(read_list_offsets_response("t", 3, "b:1", &response(0, 1)).is_err());
    }
}
