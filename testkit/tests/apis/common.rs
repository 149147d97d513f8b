//! Names, error codes, ListOffsets requests and the transactional and four-batch logs the API tests read.

pub(crate) use std::time::{Duration, Instant};

pub(crate) use crate::support::*;
pub(crate) use bytes::Bytes;
pub(crate) use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic,
};
pub(crate) use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
pub(crate) use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
pub(crate) use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest, FetchRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, TopicName,
};
pub(crate) use kafka_protocol::protocol::StrBytes;
pub(crate) use kafka_protocol::ResponseError;
pub(crate) use uuid::Uuid;
pub(crate) use walfetch_codec::HEADER_LEN;
pub(crate) use walfetch_codec::{BatchBuilder, Compression, ControlType, NewRecord};
pub(crate) use walfetch_testkit::{Habits, ScriptedCluster, VersionRange, SERVED};

pub(crate) fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

pub(crate) fn code(e: ResponseError) -> i16 {
    e.code()
}

pub(crate) fn list_offsets(
    topic: &str,
    partition: i32,
    timestamp: i64,
    isolation_level: i8,
    epoch: i32,
) -> ListOffsetsRequest {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = timestamp;
    p.current_leader_epoch = epoch;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = vec![p];
    let mut request = ListOffsetsRequest::default();
    request.replica_id = BrokerId(-1);
    request.isolation_level = isolation_level;
    request.topics = vec![t];
    request
}

pub(crate) fn txn_batch(pid: i64, n: i32) -> Bytes {
    let records: Vec<_> = (0..n).map(|i| NewRecord::value(i, "txn")).collect();
    BatchBuilder::new(0)
        .producer(pid, 0, 0)
        .transactional(true)
        .encode(&records)
        .expect("encode")
        .bytes
}

pub(crate) fn marker(pid: i64, kind: ControlType) -> Bytes {
    BatchBuilder::new(0)
        .producer(pid, 0, -1)
        .encode_marker(kind, 0, 0)
        .expect("encode")
        .bytes
}

/// A log of four batches: 0..=9 (≈ 10 × 20-byte values), 10..=19, 20..=24, 25..=29.
pub(crate) fn four_batches(cluster: &ScriptedCluster) -> Vec<(i64, usize)> {
    let mut out = Vec::new();
    for n in [10, 10, 5, 5] {
        let b = batch(n, 20, 0);
        let base = cluster.append("wal", 0, b.bytes.clone()).expect("append");
        out.push((base, b.bytes.len()));
    }
    out
}
