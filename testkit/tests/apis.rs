//! Every API of the scripted broker over loopback TCP, at every version it
//! serves, decoded with kafka-protocol 0.18 and walfetch-codec.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest, FetchRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use uuid::Uuid;
use walfetch_codec::HEADER_LEN;
use walfetch_codec::{BatchBuilder, Compression, ControlType, NewRecord};
use walfetch_testkit::{Habits, ScriptedCluster, VersionRange, SERVED};

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn code(e: ResponseError) -> i16 {
    e.code()
}

#[tokio::test]
async fn api_versions_every_version_and_unsupported() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let addr = cluster.addr(1).expect("broker 1");
    let mut client = RawClient::connect(addr).await;
    let mut expected: Vec<(i16, i16, i16)> = SERVED
        .iter()
        .map(|(k, r)| (*k as i16, r.min, r.max))
        .collect();
    expected.sort();
    for version in 0..=3 {
        let response = client
            .call(version, &ApiVersionsRequest::default())
            .await
            .unwrap_or_else(|e| panic!("ApiVersions v{version}: {e:?}"));
        assert_eq!(response.error_code, 0);
        let got: Vec<_> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, expected, "v{version}");
    }
    // v4 is not served: UNSUPPORTED_VERSION in a v0 body, header v0.
    let id = client
        .send(4, &ApiVersionsRequest::default())
        .await
        .expect("send");
    let response: ApiVersionsResponse = client
        .recv::<ApiVersionsRequest>(0, id)
        .await
        .expect("a v0 answer");
    assert_eq!(response.error_code, code(ResponseError::UnsupportedVersion));
    assert_eq!(response.api_keys.len(), SERVED.len());
    // The connection is still usable.
    assert!(client.call(3, &ApiVersionsRequest::default()).await.is_ok());
}

#[tokio::test]
async fn limited_versions_are_advertised_and_enforced() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    cluster
        .limit_versions(1, ApiKey::Fetch, Some(VersionRange::new(0, 6)))
        .expect("limit");
    cluster
        .limit_versions(1, ApiKey::Produce, None)
        .expect("limit");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let response = client
        .call(3, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions");
    let fetch = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Fetch as i16)
        .expect("fetch");
    assert_eq!((fetch.min_version, fetch.max_version), (4, 6));
    assert!(!response
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
    // Fetch v7 is now refused: the connection closes.
    let request = fetch_request(7, &[], 1024, 0);
    assert!(client.call(7, &request).await.is_err());
    cluster.reset_versions(1).expect("reset");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    assert!(client.call(7, &request).await.is_ok());
}

#[tokio::test]
async fn metadata_advertises_the_address_it_is_given() {
    // A proxy in front of broker 1: clients that follow the metadata go
    // through it. Broker 2 has none and advertises its listener.
    let proxy: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let cluster = ScriptedCluster::builder()
        .brokers(2)
        .advertised_addrs([proxy])
        .start()
        .await
        .expect("start");
    let listener = cluster.addr(1).expect("broker 1");
    assert_ne!(listener, proxy, "the listener itself is unchanged");
    let mut client = RawClient::connect(listener).await;
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = client.call(12, &request).await.expect("Metadata v12");
    let brokers: Vec<_> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    let second = cluster.addr(2).expect("broker 2");
    assert_eq!(
        brokers,
        vec![
            (1, "127.0.0.1".to_string(), 9),
            (2, "127.0.0.1".to_string(), i32::from(second.port())),
        ]
    );
}

/// Each broker's node id and port, as Metadata v12 gives them.
async fn broker_ports(client: &mut RawClient) -> Vec<(i32, i32)> {
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = client.call(12, &request).await.expect("Metadata v12");
    response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.port))
        .collect()
}

/// A stopped broker refuses connections and closes those it had; the
/// others still name it in Metadata. Started again it listens at its
/// address; restarted elsewhere, Metadata gives its new address and the
/// old one is refused.
#[tokio::test]
async fn a_broker_stops_starts_and_moves_to_another_address() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let first = cluster.addr(1).expect("broker 1");
    let mut open = RawClient::connect(first).await;
    cluster.stop_broker(1).await.expect("stop");
    assert!(open.is_closed().await, "a connection survived the crash");
    assert!(tokio::net::TcpStream::connect(first).await.is_err());
    let mut other = RawClient::connect(cluster.addr(2).expect("broker 2")).await;
    let port = |a: std::net::SocketAddr| i32::from(a.port());
    assert_eq!(broker_ports(&mut other).await[0], (1, port(first)));
    assert_eq!(cluster.start_broker(1).await.expect("start"), first);
    let mut again = RawClient::connect(first).await;
    assert_eq!(broker_ports(&mut again).await[0], (1, port(first)));
    let moved = cluster.restart_broker_elsewhere(1).await.expect("move");
    assert_ne!(moved, first);
    assert_eq!(cluster.addr(1), Some(moved));
    assert!(again.is_closed().await);
    assert!(tokio::net::TcpStream::connect(first).await.is_err());
    assert_eq!(broker_ports(&mut other).await[0], (1, port(moved)));
    assert!(cluster.stop_broker(9).await.is_err());
}

#[tokio::test]
async fn metadata_every_version() {
    let cluster = ScriptedCluster::start(3).await.expect("start");
    let id = cluster.create_topic("wal", 4).expect("create");
    cluster.create_topic("other", 1).expect("create");
    cluster.move_leader("wal", 1, 3).expect("move");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    for version in 1..=12 {
        // All topics.
        let mut request = MetadataRequest::default();
        request.topics = None;
        let response = client
            .call(version, &request)
            .await
            .unwrap_or_else(|e| panic!("Metadata v{version}: {e:?}"));
        let brokers: Vec<_> = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.port))
            .collect();
        let expected: Vec<_> = cluster
            .addrs()
            .iter()
            .map(|(id, a)| (*id, i32::from(a.port())))
            .collect();
        assert_eq!(brokers, expected, "v{version}");
        assert!(response
            .brokers
            .iter()
            .all(|b| b.host.as_str() == "127.0.0.1"));
        assert_eq!(response.controller_id.0, 1);
        let names: Vec<_> = response
            .topics
            .iter()
            .map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect();
        assert_eq!(
            names,
            vec![Some("other".into()), Some("wal".into())],
            "v{version}"
        );
        let wal = &response.topics[1];
        assert_eq!(wal.error_code, 0);
        assert_eq!(wal.partitions.len(), 4);
        let leaders: Vec<_> = wal.partitions.iter().map(|p| p.leader_id.0).collect();
        assert_eq!(
            leaders,
            vec![1, 3, 3, 1],
            "round robin, partition 1 moved to 3"
        );
        assert!(wal
            .partitions
            .iter()
            .all(|p| p.replica_nodes.len() == 3 && p.isr_nodes.len() == 3));
        if version >= 7 {
            let epochs: Vec<_> = wal.partitions.iter().map(|p| p.leader_epoch).collect();
            assert_eq!(epochs, vec![0, 1, 0, 0]);
        }
        if version >= 10 {
            assert_eq!(wal.topic_id, id);
        }
        // One named topic, and an unknown one.
        let mut request = MetadataRequest::default();
        let mut wanted = MetadataRequestTopic::default();
        wanted.name = Some(name("wal"));
        let mut unknown = MetadataRequestTopic::default();
        unknown.name = Some(name("nope"));
        request.topics = Some(vec![wanted, unknown]);
        if version >= 4 {
            request.allow_auto_topic_creation = false;
        }
        let response = client.call(version, &request).await.expect("Metadata");
        assert_eq!(response.topics.len(), 2);
        assert_eq!(response.topics[0].partitions.len(), 4);
        assert_eq!(
            response.topics[1].error_code,
            code(ResponseError::UnknownTopicOrPartition)
        );
    }
    // v12: topics by id.
    let mut request = MetadataRequest::default();
    let mut by_id = MetadataRequestTopic::default();
    by_id.name = None;
    by_id.topic_id = id;
    let mut bad_id = MetadataRequestTopic::default();
    bad_id.name = None;
    bad_id.topic_id = Uuid::from_u128(42);
    request.topics = Some(vec![by_id, bad_id]);
    let response = client.call(12, &request).await.expect("Metadata v12");
    assert_eq!(
        response.topics[0].name.as_ref().map(|n| n.0.as_str()),
        Some("wal")
    );
    assert_eq!(
        response.topics[1].error_code,
        code(ResponseError::UnknownTopicId)
    );
}

#[tokio::test]
async fn metadata_auto_creates_topics_when_enabled() {
    let cluster = ScriptedCluster::builder()
        .auto_create_topics(true)
        .default_partitions(2)
        .start()
        .await
        .expect("start");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = MetadataRequest::default();
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(name("fresh"));
    request.topics = Some(vec![wanted]);
    let first = client.call(9, &request).await.expect("Metadata");
    assert_eq!(
        first.topics[0].error_code,
        code(ResponseError::LeaderNotAvailable)
    );
    let second = client.call(9, &request).await.expect("Metadata");
    assert_eq!(second.topics[0].error_code, 0);
    assert_eq!(second.topics[0].partitions.len(), 2);
    // Not when the client says so (v4+).
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(name("not-created"));
    request.topics = Some(vec![wanted]);
    request.allow_auto_topic_creation = false;
    let response = client.call(9, &request).await.expect("Metadata");
    assert_eq!(
        response.topics[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(cluster.topics(), vec!["fresh".to_string()]);
}

fn creatable(topic: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t
}

#[tokio::test]
async fn create_topics_every_version_and_errors() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    for version in 2..=7 {
        let topic = format!("t{version}");
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![creatable(&topic, 3, 2)];
        let response = client
            .call(version, &request)
            .await
            .unwrap_or_else(|e| panic!("CreateTopics v{version}: {e:?}"));
        let result = &response.topics[0];
        assert_eq!(
            result.error_code, 0,
            "v{version}: {:?}",
            result.error_message
        );
        if version >= 5 {
            assert_eq!((result.num_partitions, result.replication_factor), (3, 2));
        }
        if version >= 7 {
            assert_eq!(Some(result.topic_id), cluster.topic_id(&topic));
        }
        assert_eq!(cluster.leader(&topic, 2).map(|l| l.node_id).ok(), Some(1));
    }
    let mut assigned = creatable("assigned", -1, -1);
    assigned.assignments = (0..2)
        .map(|p| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = p;
            a.broker_ids = vec![BrokerId(2), BrokerId(1)];
            a
        })
        .collect();
    let mut validate = CreateTopicsRequest::default();
    validate.validate_only = true;
    validate.topics = vec![creatable("validated", 1, 1)];
    let response = client.call(7, &validate).await.expect("CreateTopics");
    assert_eq!(response.topics[0].error_code, 0);
    assert!(cluster.topic_id("validated").is_none());

    let mut request = CreateTopicsRequest::default();
    request.topics = vec![
        creatable("t2", 1, 1),
        creatable("bad/name", 1, 1),
        creatable("zero", 0, 1),
        creatable("rf", 1, 3),
        creatable("dup", 1, 1),
        creatable("dup", 1, 1),
        creatable("defaults", -1, -1),
        assigned,
    ];
    let response = client.call(7, &request).await.expect("CreateTopics");
    let codes: Vec<_> = response.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            code(ResponseError::TopicAlreadyExists),
            code(ResponseError::InvalidTopicException),
            code(ResponseError::InvalidPartitions),
            code(ResponseError::InvalidReplicationFactor),
            code(ResponseError::InvalidRequest),
            code(ResponseError::InvalidRequest),
            0,
            0,
        ]
    );
    assert!(response.topics[0].error_message.is_some());
    assert_eq!(
        cluster.leader("assigned", 0).map(|l| l.node_id).ok(),
        Some(2)
    );
    assert_eq!(
        cluster.leader("assigned", 1).map(|l| l.node_id).ok(),
        Some(2)
    );
}

#[tokio::test]
async fn produce_every_version_then_fetch_back() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let topic_id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut expected_base = 0;
    let mut written = Vec::new();
    for (i, version) in (3..=9).enumerate() {
        let compression = Compression::ALL[i % Compression::ALL.len()];
        let batch = batch_with(3, 20, 1000, compression);
        let response = client
            .call(version, &produce_request("wal", 0, batch.bytes.clone(), -1))
            .await
            .unwrap_or_else(|e| panic!("Produce v{version}: {e:?}"));
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, expected_base),
            "v{version}"
        );
        if version >= 5 {
            assert_eq!(p.log_start_offset, 0);
        }
        written.extend(expected_base..expected_base + 3);
        expected_base += 3;
    }
    // Two uncompressed batches in one request: consecutive offsets.
    let mut two = batch(2, 10, 0).bytes.to_vec();
    two.extend_from_slice(&batch(1, 10, 0).bytes);
    let response = client
        .call(9, &produce_request("wal", 0, two.into(), 1))
        .await
        .expect("Produce");
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 21);
    written.extend(21..24);
    assert_eq!(cluster.high_watermark("wal", 0).ok(), Some(24));

    // acks = 0: no response; the next request's response comes next.
    let id = client
        .send(7, &produce_request("wal", 0, batch(1, 10, 0).bytes, 0))
        .await
        .expect("send");
    let meta = client.call(9, &MetadataRequest::default()).await;
    assert!(meta.is_ok(), "the acks=0 produce got no response: {meta:?}");
    assert!(id > 0);
    written.push(24);

    for version in [4, 11, 12, 13, 17] {
        let request = fetch_request(
            version,
            &[Want::new("wal", topic_id, 0, 0, 1 << 20)],
            1 << 20,
            0,
        );
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, 25);
        let fetched = decode_records(p.records.as_ref().expect("records"));
        assert_eq!(fetched.offsets, written, "Fetch v{version}");
        assert_eq!(fetched.partial, None);
    }
}

#[tokio::test]
async fn produce_errors() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    cluster.create_topic("wal", 2).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let good = batch(2, 10, 0).bytes;
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let marker = BatchBuilder::new(0)
        .producer(5, 0, -1)
        .encode_marker(ControlType::Commit, 0, 0)
        .expect("marker")
        .bytes;
    let mut two_compressed = batch_with(2, 10, 0, Compression::Lz4).bytes.to_vec();
    two_compressed.extend_from_slice(&batch_with(2, 10, 0, Compression::Lz4).bytes);
    let cases: Vec<(&str, ProduceRequest, i16)> = vec![
        (
            "not the leader",
            produce_request("wal", 1, good.clone(), -1),
            code(ResponseError::NotLeaderOrFollower),
        ),
        (
            "unknown partition",
            produce_request("wal", 7, good.clone(), -1),
            code(ResponseError::UnknownTopicOrPartition),
        ),
        (
            "unknown topic",
            produce_request("nope", 0, good.clone(), -1),
            code(ResponseError::UnknownTopicOrPartition),
        ),
        (
            "bad CRC",
            produce_request("wal", 0, corrupt.into(), -1),
            code(ResponseError::CorruptMessage),
        ),
        (
            "partial batch",
            produce_request("wal", 0, good.slice(..good.len() - 3), -1),
            code(ResponseError::CorruptMessage),
        ),
        (
            "control batch",
            produce_request("wal", 0, marker, -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "two compressed batches",
            produce_request("wal", 0, two_compressed.into(), -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "empty records",
            produce_request("wal", 0, Bytes::new(), -1),
            code(ResponseError::InvalidRecord),
        ),
        (
            "acks = 2",
            produce_request("wal", 0, good.clone(), 2),
            code(ResponseError::InvalidRequiredAcks),
        ),
    ];
    for (what, request, expected) in cases {
        let response = client.call(9, &request).await.expect("Produce");
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (expected, -1), "{what}");
    }
    assert_eq!(
        cluster.high_watermark("wal", 0).ok(),
        Some(0),
        "nothing appended"
    );
}

fn list_offsets(
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

fn txn_batch(pid: i64, n: i32) -> Bytes {
    let records: Vec<_> = (0..n).map(|i| NewRecord::value(i, "txn")).collect();
    BatchBuilder::new(0)
        .producer(pid, 0, 0)
        .transactional(true)
        .encode(&records)
        .expect("encode")
        .bytes
}

fn marker(pid: i64, kind: ControlType) -> Bytes {
    BatchBuilder::new(0)
        .producer(pid, 0, -1)
        .encode_marker(kind, 0, 0)
        .expect("encode")
        .bytes
}

#[tokio::test]
async fn list_offsets_every_version() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    cluster.create_topic("wal", 2).expect("create");
    cluster
        .append("wal", 0, batch(3, 10, 100).bytes)
        .expect("append"); // 0..=2, ts 100..=102
    cluster
        .append("wal", 0, batch(3, 10, 200).bytes)
        .expect("append"); // 3..=5, ts 200..=202
    cluster
        .append("wal", 0, batch(2, 10, 150).bytes)
        .expect("append"); // 6..=7, ts 150..=151
    cluster.append("wal", 0, txn_batch(9, 2)).expect("append"); // 8..=9, open transaction
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 1..=7 {
        let ask = |ts: i64, isolation: i8| list_offsets("wal", 0, ts, isolation, -1);
        let mut check = vec![
            (ask(-2, 0), 0, -1),
            (ask(-1, 0), 10, -1),
            (ask(150, 0), 3, 200),
            (ask(101, 0), 1, 101),
            (ask(999, 0), -1, -1),
        ];
        if version >= 2 {
            check.push((ask(-1, 1), 8, -1));
        }
        if version >= 7 {
            check.push((ask(-3, 0), 5, 202));
        }
        for (request, offset, timestamp) in check {
            let response = client
                .call(version, &request)
                .await
                .unwrap_or_else(|e| panic!("ListOffsets v{version}: {e:?}"));
            let p = &response.topics[0].partitions[0];
            assert_eq!(
                (p.error_code, p.offset, p.timestamp),
                (0, offset, timestamp),
                "v{version} timestamp {}",
                request.topics[0].partitions[0].timestamp
            );
            if version >= 4 && offset >= 0 {
                assert_eq!(p.leader_epoch, 0);
            }
        }
    }
    let cases = [
        (
            list_offsets("wal", 1, -1, 0, -1),
            ResponseError::NotLeaderOrFollower,
        ),
        (
            list_offsets("wal", 5, -1, 0, -1),
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            list_offsets("nope", 0, -1, 0, -1),
            ResponseError::UnknownTopicOrPartition,
        ),
        (
            list_offsets("wal", 0, -1, 0, 3),
            ResponseError::UnknownLeaderEpoch,
        ),
    ];
    for (request, error) in cases {
        let response = client.call(7, &request).await.expect("ListOffsets");
        assert_eq!(
            response.topics[0].partitions[0].error_code,
            error.code(),
            "{error:?}"
        );
    }
    cluster.move_leader("wal", 0, 1).expect("move"); // epoch 1, same leader
    let response = client
        .call(7, &list_offsets("wal", 0, -1, 0, 0))
        .await
        .expect("ListOffsets");
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        code(ResponseError::FencedLeaderEpoch)
    );
}

/// A log of four batches: 0..=9 (≈ 10 × 20-byte values), 10..=19, 20..=24, 25..=29.
fn four_batches(cluster: &ScriptedCluster) -> Vec<(i64, usize)> {
    let mut out = Vec::new();
    for n in [10, 10, 5, 5] {
        let b = batch(n, 20, 0);
        let base = cluster.append("wal", 0, b.bytes.clone()).expect("append");
        out.push((base, b.bytes.len()));
    }
    out
}

#[tokio::test]
async fn fetch_follows_kafka_rules_at_every_version() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let sizes = four_batches(&cluster);
    let (b0, b1, b2) = (sizes[0].1, sizes[1].1, sizes[2].1);
    let total: usize = sizes.iter().map(|s| s.1).sum();
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 4..=17 {
        let fetch = |offset: i64, pmb: usize| {
            fetch_request(
                version,
                &[Want::new("wal", id, 0, offset, pmb as i32)],
                i32::MAX,
                0,
            )
        };
        // (what, request, error, record bytes, complete batches, partial batch base)
        type Case<'a> = (&'a str, FetchRequest, i16, usize, Vec<i64>, Option<i64>);
        let cases: Vec<Case<'_>> = vec![
            (
                "at a batch start",
                fetch(10, 1 << 20),
                0,
                total - b0,
                vec![10, 20, 25],
                None,
            ),
            (
                "mid-batch",
                fetch(15, 1 << 20),
                0,
                total - b0,
                vec![10, 20, 25],
                None,
            ),
            (
                "limit inside 2nd batch",
                fetch(0, b0 + 30),
                0,
                b0 + 30,
                vec![0],
                Some(10),
            ),
            (
                "limit at a boundary",
                fetch(0, b0 + b1),
                0,
                b0 + b1,
                vec![0, 10],
                None,
            ),
            (
                "first batch over the limit",
                fetch(12, 5),
                0,
                b1,
                vec![10],
                None,
            ),
            ("limit 0", fetch(20, 0), 0, b2, vec![20], None),
            ("offset == HW", fetch(30, 1 << 20), 0, 0, vec![], None),
            ("offset past HW", fetch(31, 1 << 20), 1, 0, vec![], None),
            ("negative offset", fetch(-1, 1 << 20), 1, 0, vec![], None),
        ];
        for (what, request, error, len, batches, partial) in cases {
            let response = client
                .call(version, &request)
                .await
                .unwrap_or_else(|e| panic!("Fetch v{version} {what}: {e:?}"));
            let p = only_partition(&response);
            assert_eq!(p.error_code, error, "v{version} {what}");
            let fetched = decode_records(p.records.as_ref().expect("records"));
            assert_eq!(fetched.len, len, "v{version} {what}");
            assert_eq!(fetched.batches, batches, "v{version} {what}");
            assert_eq!(
                fetched.partial.and_then(|p| p.0),
                partial,
                "v{version} {what}"
            );
            if error == 0 {
                assert_eq!((p.high_watermark, p.last_stable_offset), (30, 30));
                if version >= 5 {
                    assert_eq!(p.log_start_offset, 0);
                }
                assert!(
                    p.aborted_transactions.is_none(),
                    "read_uncommitted: null list"
                );
            } else {
                assert_eq!(p.high_watermark, -1);
            }
        }
        if version >= 13 {
            assert_eq!(response_topic_id(&mut client, version, id).await, id);
        }
    }
}

async fn response_topic_id(client: &mut RawClient, version: i16, id: Uuid) -> Uuid {
    let request = fetch_request(version, &[Want::new("wal", id, 0, 0, 1)], 1, 0);
    let response = client.call(version, &request).await.expect("Fetch");
    response.responses[0].topic_id
}

#[tokio::test]
async fn fetch_errors_at_every_version() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    cluster
        .append("wal", 0, batch(3, 10, 0).bytes)
        .expect("append");
    cluster
        .append("wal", 0, batch(3, 10, 0).bytes)
        .expect("append");
    cluster
        .advance_log_start("wal", 0, 3)
        .expect("delete records");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 4..=17 {
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut cases = vec![
            (
                "below log start",
                Want::new("wal", id, 0, 2, 1024),
                ResponseError::OffsetOutOfRange,
            ),
            (
                "not the leader",
                Want::new("wal", id, 1, 0, 1024),
                ResponseError::NotLeaderOrFollower,
            ),
            (
                "unknown partition",
                Want::new("wal", id, 9, 0, 1024),
                ResponseError::UnknownTopicOrPartition,
            ),
            (
                "unknown topic",
                Want::new("nope", Uuid::from_u128(7), 0, 0, 1024),
                unknown,
            ),
        ];
        if version >= 9 {
            let mut fenced = Want::new("wal", id, 0, 3, 1024);
            fenced.current_leader_epoch = 5;
            cases.push(("future epoch", fenced, ResponseError::UnknownLeaderEpoch));
        }
        for (what, want, error) in cases {
            let response = client
                .call(version, &fetch_request(version, &[want], i32::MAX, 0))
                .await
                .expect("Fetch");
            let p = only_partition(&response);
            assert_eq!(p.error_code, error.code(), "v{version} {what}");
            assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
            if version >= 16 && error == ResponseError::NotLeaderOrFollower {
                assert_eq!(p.current_leader.leader_id.0, 2);
                assert_eq!(response.node_endpoints.len(), 1);
                assert_eq!(
                    response.node_endpoints[0].port,
                    i32::from(cluster.addr(2).expect("addr").port())
                );
            }
        }
        // The log start offset is reported, and a fetch there works.
        let response = client
            .call(
                version,
                &fetch_request(version, &[Want::new("wal", id, 0, 3, 1024)], i32::MAX, 0),
            )
            .await
            .expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.error_code, 0);
        if version >= 5 {
            assert_eq!(p.log_start_offset, 3);
        }
        assert_eq!(
            decode_records(p.records.as_ref().expect("records")).batches,
            vec![3]
        );
    }
    cluster.move_leader("wal", 0, 1).expect("bump epoch");
    let mut stale = Want::new("wal", id, 0, 3, 1024);
    stale.current_leader_epoch = 0;
    let response = client
        .call(16, &fetch_request(16, &[stale], i32::MAX, 0))
        .await
        .expect("Fetch");
    let p = only_partition(&response);
    assert_eq!(p.error_code, code(ResponseError::FencedLeaderEpoch));
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (1, 1)
    );
}

#[tokio::test]
async fn fetch_sessions_are_refused_politely() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1024)], 1024, 0);
    request.session_epoch = 0; // "create a session": answered in full, no session
    let response = client.call(12, &request).await.expect("Fetch");
    assert_eq!((response.error_code, response.session_id), (0, 0));
    assert_eq!(only_partition(&response).error_code, 0);
    request.session_id = 77;
    request.session_epoch = 3;
    let response = client.call(12, &request).await.expect("Fetch");
    assert_eq!(
        response.error_code,
        code(ResponseError::FetchSessionIdNotFound)
    );
}

#[tokio::test]
async fn fetch_max_bytes_spans_partitions_as_kip_74_says() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let big = batch(10, 100, 0);
    let small = batch(2, 10, 0);
    cluster.append("wal", 0, big.bytes.clone()).expect("append");
    cluster.append("wal", 1, big.bytes.clone()).expect("append");
    cluster
        .append("wal", 1, small.bytes.clone())
        .expect("append");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let wants = [
        Want::new("wal", id, 0, 0, 1 << 20),
        Want::new("wal", id, 1, 0, 1 << 20),
    ];
    // max_bytes 100: the first partition's first batch comes whole (over the
    // limit); nothing is left for the second partition.
    let response = client
        .call(11, &fetch_request(11, &wants, 100, 0))
        .await
        .expect("Fetch");
    let lens: Vec<_> = response
        .responses
        .iter()
        .map(|t| t.partitions[0].records.as_ref().map_or(0, Bytes::len))
        .collect();
    assert_eq!(lens, vec![big.bytes.len(), 0]);
    // max_bytes a bit over the first batch: the second partition's first
    // batch does not fit what is left, and it gets no records (Kafka, for
    // Fetch v3+, answers an incomplete first batch with none rather than
    // cut it).
    let room = 50;
    let response = client
        .call(
            11,
            &fetch_request(11, &wants, (big.bytes.len() + room) as i32, 0),
        )
        .await
        .expect("Fetch");
    let second = decode_records(
        response.responses[1].partitions[0]
            .records
            .as_ref()
            .expect("records"),
    );
    assert_eq!((second.len, second.partial), (0, None));
    // Room for its first batch and a bit: that batch whole, the next one
    // cut at exactly what is left.
    let response = client
        .call(
            11,
            &fetch_request(11, &wants, (2 * big.bytes.len() + room) as i32, 0),
        )
        .await
        .expect("Fetch");
    let second = decode_records(
        response.responses[1].partitions[0]
            .records
            .as_ref()
            .expect("records"),
    );
    assert_eq!(second.batches, vec![0]);
    assert_eq!(
        second.partial,
        Some((Some(10), room, Some(small.bytes.len())))
    );
    // An empty first partition does not use up "min one batch".
    cluster
        .append("wal", 0, small.bytes.clone())
        .expect("append");
    let wants = [
        Want::new("wal", id, 0, 12, 1 << 20),
        Want::new("wal", id, 1, 0, 10),
    ];
    let response = client
        .call(11, &fetch_request(11, &wants, 10, 0))
        .await
        .expect("Fetch");
    let lens: Vec<_> = response
        .responses
        .iter()
        .map(|t| t.partitions[0].records.as_ref().map_or(0, Bytes::len))
        .collect();
    assert_eq!(lens, vec![0, big.bytes.len()]);
}

/// KIP-541: the broker's `fetch.max.bytes` caps a response whatever the
/// request asks for; the first batch still comes whole, and the partitions
/// past the cap get nothing, nor does one whose first batch would be cut.
#[tokio::test]
async fn the_brokers_fetch_max_bytes_caps_a_response_as_kip_541_says() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let big = batch(10, 100, 0);
    for p in 0..2 {
        for _ in 0..3 {
            cluster.append("wal", p, big.bytes.clone()).expect("append");
        }
    }
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let wants = [
        Want::new("wal", id, 0, 0, 1 << 20),
        Want::new("wal", id, 1, 0, 1 << 20),
    ];
    assert_eq!(walfetch_testkit::KAFKA_FETCH_MAX_BYTES, 55 << 20);
    let len = big.bytes.len();
    let half = len / 2;
    let cases = [
        // Kafka's default, 55 MiB: everything asked for.
        (
            walfetch_testkit::KAFKA_FETCH_MAX_BYTES,
            vec![3 * len, 3 * len],
        ),
        // One byte: the first batch of the first partition, whole.
        (1, vec![len, 0]),
        // Two batches and a half: the first partition is cut there, and
        // the second gets nothing.
        (2 * len + half, vec![2 * len + half, 0]),
        // Three batches and a half: what is left is less than the second
        // partition's first batch, which gets nothing (not a cut batch).
        (3 * len + half, vec![3 * len, 0]),
        // Four batches and a half: the second partition's first batch
        // whole, the next cut at what is left.
        (4 * len + half, vec![3 * len, len + half]),
    ];
    for (cap, want) in cases {
        cluster.set_fetch_max_bytes(1, cap).expect("broker");
        let response = client
            .call(11, &fetch_request(11, &wants, 8 << 20, 0))
            .await
            .expect("Fetch");
        let got: Vec<usize> = response
            .responses
            .iter()
            .map(|t| t.partitions[0].records.as_ref().map_or(0, Bytes::len))
            .collect();
        assert_eq!(got, want, "fetch.max.bytes {cap}");
    }
    assert!(cluster.set_fetch_max_bytes(9, 1).is_err(), "no broker 9");
}

#[tokio::test]
async fn fetch_read_committed_stops_at_lso_and_lists_aborted_transactions() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let append = |b: Bytes| cluster.append("wal", 0, b).expect("append");
    append(batch(2, 10, 0).bytes); // 0..=1
    append(txn_batch(7, 2)); // 2..=3 pid 7
    append(batch(1, 10, 0).bytes); // 4
    append(marker(7, ControlType::Abort)); // 5
    append(txn_batch(8, 2)); // 6..=7 pid 8, committed later
    append(txn_batch(9, 1)); // 8 pid 9, still open
    append(marker(8, ControlType::Commit)); // 9
    append(batch(1, 10, 0).bytes); // 10
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in [4, 11, 12, 17] {
        let request = fetch_request(version, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(
            (p.high_watermark, p.last_stable_offset),
            (11, 8),
            "v{version}"
        );
        let fetched = decode_records(p.records.as_ref().expect("records"));
        assert_eq!(
            fetched.batches,
            vec![0, 2, 4, 5, 6],
            "v{version}: stops before the LSO"
        );
        let aborted: Vec<_> = p
            .aborted_transactions
            .as_ref()
            .expect("read_committed: a list")
            .iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect();
        assert_eq!(aborted, vec![(7, 2)]);
        // From past the aborted transaction: none overlaps.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 6, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.aborted_transactions.as_ref().map(Vec::len), Some(0));
        // At the LSO: empty, no error.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 8, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(
            (p.error_code, p.records.as_ref().map(Bytes::len)),
            (0, Some(0))
        );
        // read_uncommitted sees everything.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 8, 1 << 20)], 1 << 20, 0);
        let response = client.call(version, &request).await.expect("Fetch");
        let fetched = decode_records(only_partition(&response).records.as_ref().expect("records"));
        assert_eq!(fetched.batches, vec![8, 9, 10]);
    }
}

#[tokio::test]
async fn fetch_waits_for_min_bytes_until_an_append_or_max_wait() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    request.min_bytes = 1;
    request.max_wait_ms = 300;
    // Nothing arrives: an empty answer after max_wait.
    let started = Instant::now();
    let response = client.call(12, &request).await.expect("Fetch");
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(
        only_partition(&response).records.as_ref().map(Bytes::len),
        Some(0)
    );
    // An append wakes the fetch long before max_wait.
    request.max_wait_ms = 30_000;
    let started = Instant::now();
    let id = client.send(12, &request).await.expect("send");
    tokio::time::sleep(Duration::from_millis(100)).await;
    cluster
        .append("wal", 0, batch(2, 10, 0).bytes)
        .expect("append");
    let response = client.recv::<FetchRequest>(12, id).await.expect("Fetch");
    assert!(started.elapsed() < Duration::from_secs(10));
    let fetched = decode_records(only_partition(&response).records.as_ref().expect("records"));
    assert_eq!(fetched.offsets, vec![0, 1]);
    // min_bytes 0 answers at once.
    request.min_bytes = 0;
    request.topics[0].partitions[0].fetch_offset = 2;
    let started = Instant::now();
    client.call(12, &request).await.expect("Fetch");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn habits_never_cut_skip_containing_batch_and_repeat_last_batch() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let sizes = four_batches(&cluster);
    cluster.move_leader("wal", 0, 2).expect("move");
    cluster.set_habits(2, Habits::TANSU_0_6).expect("habits");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    // The request's limit is the partition's: Tansu ignores the latter.
    let fetch = |offset: i64, pmb: usize| {
        fetch_request(
            11,
            &[Want::new("wal", id, 0, offset, pmb as i32)],
            pmb as i32,
            0,
        )
    };
    // A limit inside the second batch: whole batches only, added while
    // the bytes counted without batch headers are below the limit, so the
    // second batch comes whole.
    let response = client
        .call(11, &fetch(0, sizes[0].1 + 30))
        .await
        .expect("Fetch");
    let fetched = decode_records(only_partition(&response).records.as_ref().expect("records"));
    assert_eq!((fetched.batches, fetched.partial), (vec![0, 10], None));
    // The first batch counted without its header reaches the limit: it
    // alone.
    let response = client
        .call(11, &fetch(0, sizes[0].1 - HEADER_LEN))
        .await
        .expect("Fetch");
    let fetched = decode_records(only_partition(&response).records.as_ref().expect("records"));
    assert_eq!((fetched.batches, fetched.partial), (vec![0], None));
    // A limit of 1 byte: still one batch.
    let response = client.call(11, &fetch(0, 1)).await.expect("Fetch");
    assert_eq!(
        decode_records(only_partition(&response).records.as_ref().expect("records")).batches,
        vec![0]
    );
    // Mid-batch offset 3: starts at the next batch (10); reaching the
    // log's end, the last batch comes twice.
    let response = client.call(11, &fetch(3, 1 << 20)).await.expect("Fetch");
    assert_eq!(
        decode_records(only_partition(&response).records.as_ref().expect("records")).batches,
        vec![10, 20, 25, 25]
    );
    // Only broker 2 has the habit; back on Kafka's rules after a reset.
    cluster.set_habits(2, Habits::KAFKA).expect("habits");
    let response = client.call(11, &fetch(3, 1 << 20)).await.expect("Fetch");
    assert_eq!(
        decode_records(only_partition(&response).records.as_ref().expect("records")).batches,
        vec![0, 10, 20, 25]
    );
}

#[tokio::test]
async fn habit_omit_below_wait_leaves_the_partition_out_of_hurried_fetches() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    four_batches(&cluster);
    cluster
        .set_habits(1, Habits::OMITS_WHEN_HURRIED)
        .expect("habits");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(11, &[Want::new("wal", id, 0, 0, 1 << 20)], i32::MAX, 0);
    // max_wait_ms 0 (and 49): the topic is there, the partition is not.
    for wait in [0, 49] {
        request.max_wait_ms = wait;
        let response = client.call(11, &request).await.expect("Fetch");
        assert_eq!(response.error_code, 0);
        assert_eq!(response.responses.len(), 1);
        assert!(response.responses[0].partitions.is_empty(), "wait {wait}");
    }
    // Allowed to wait 50 ms: the partition's records, at once.
    request.max_wait_ms = 50;
    let response = client.call(11, &request).await.expect("Fetch");
    let records = only_partition(&response).records.clone().expect("records");
    assert_eq!(decode_records(&records).batches, vec![0, 10, 20, 25]);
}

#[tokio::test]
async fn habit_empty_below_wait_answers_hurried_fetches_with_no_records() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    four_batches(&cluster);
    cluster
        .set_habits(1, Habits::EMPTY_WHEN_HURRIED)
        .expect("habits");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(11, &[Want::new("wal", id, 0, 0, 1 << 20)], i32::MAX, 0);
    // max_wait_ms 0 (and 49): the partition, no error, its high watermark,
    // and no records.
    for wait in [0, 49] {
        request.max_wait_ms = wait;
        let response = client.call(11, &request).await.expect("Fetch");
        let partition = only_partition(&response);
        assert_eq!(partition.error_code, 0);
        assert_eq!(partition.high_watermark, 30, "wait {wait}");
        assert_eq!(partition.records.as_ref().map(Bytes::len), Some(0));
    }
    // Allowed to wait 50 ms: the partition's records, at once.
    request.max_wait_ms = 50;
    let response = client.call(11, &request).await.expect("Fetch");
    let records = only_partition(&response).records.clone().expect("records");
    assert_eq!(decode_records(&records).batches, vec![0, 10, 20, 25]);
}

/// Kafka reads one segment a response: with segments rolled by size, a
/// response stops at the end of the segment its first batch is in.
#[tokio::test]
async fn segments_end_a_response_at_the_segment_end() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let lens: Vec<usize> = four_batches(&cluster).iter().map(|b| b.1).collect();
    // Two batches a segment.
    let segment_bytes = u32::try_from(lens[0] + lens[1]).expect("small");
    cluster
        .set_habits(
            1,
            Habits {
                segment_bytes,
                ..Habits::KAFKA
            },
        )
        .expect("habits");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for (offset, batches) in [(0, vec![0, 10]), (5, vec![0, 10]), (22, vec![20, 25])] {
        let request = fetch_request(11, &[Want::new("wal", id, 0, offset, 1 << 20)], i32::MAX, 0);
        let response = client.call(11, &request).await.expect("Fetch");
        let records = only_partition(&response).records.clone().expect("records");
        let got = decode_records(&records);
        assert_eq!(
            (got.batches, got.partial),
            (batches, None),
            "offset {offset}"
        );
    }
}

#[tokio::test]
async fn leadership_moves_at_runtime() {
    let cluster = ScriptedCluster::start(3).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    cluster
        .append("wal", 0, batch(2, 10, 0).bytes)
        .expect("append");
    let mut one = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut three = RawClient::connect(cluster.addr(3).expect("addr")).await;
    let request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    assert_eq!(
        only_partition(&one.call(12, &request).await.expect("Fetch")).error_code,
        0
    );
    let leader = cluster.move_leader("wal", 0, 3).expect("move");
    assert_eq!((leader.node_id, leader.epoch), (3, 1));
    assert_eq!(
        only_partition(&one.call(12, &request).await.expect("Fetch")).error_code,
        code(ResponseError::NotLeaderOrFollower)
    );
    let p = three.call(12, &request).await.expect("Fetch");
    assert_eq!(
        decode_records(only_partition(&p).records.as_ref().expect("records")).offsets,
        vec![0, 1]
    );
    // Appends now carry the new epoch.
    cluster
        .append("wal", 0, batch(1, 10, 0).bytes)
        .expect("append");
    let log = cluster.log("wal", 0).expect("log");
    let epochs: Vec<_> = log
        .batches()
        .iter()
        .map(|b| b.header.partition_leader_epoch)
        .collect();
    assert_eq!(epochs, vec![0, 1]);
    assert!(cluster.move_leader("wal", 0, 9).is_err());
}

#[tokio::test]
async fn counters_count_requests_bytes_and_connections() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    cluster
        .append("wal", 0, batch(5, 100, 0).bytes)
        .expect("append");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut other = RawClient::connect(cluster.addr(1).expect("addr")).await;
    client
        .call(3, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions");
    let request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    client.call(12, &request).await.expect("Fetch");
    client.call(12, &request).await.expect("Fetch");
    other
        .call(9, &MetadataRequest::default())
        .await
        .expect("Metadata");
    let stats = cluster.stats(1).expect("stats");
    assert_eq!(stats.connections, 2);
    assert_eq!(stats.requests_of(ApiKey::Fetch), 2);
    assert_eq!(stats.requests_of(ApiKey::ApiVersions), 1);
    assert_eq!(stats.requests_of(ApiKey::Metadata), 1);
    assert_eq!(stats.total_requests(), 4);
    assert_eq!(
        stats.bytes_sent,
        client.bytes_received + other.bytes_received
    );
    assert_eq!(stats.bytes_received, client.bytes_sent + other.bytes_sent);
    assert_eq!(cluster.stats(2).map(|s| s.total_requests()), Some(0));
    cluster.reset_stats();
    assert_eq!(cluster.stats(1).map(|s| s.bytes_sent), Some(0));
}
