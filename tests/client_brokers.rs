//! The connection layer and cluster client against the real brokers:
//! Apache Kafka (one node shared by this binary) and Tansu 0.6.0 (one per
//! test), every test body on both (`walfetch_support::broker`).
//!
//! Run with `cargo test -p walfetch --test client_brokers`. Needs Kafka
//! and Tansu: `scripts/setup-kafka.sh`, `scripts/setup-broker.sh`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::future::join_all;
use kafka_protocol::messages::{ApiKey, ListOffsetsRequest, MetadataRequest};
use walfetch::cluster::{
    list_offsets_request, metadata_request, read_list_offsets_response, ClientError, Cluster,
    FetchParams, IsolationLevel, NewTopic, OffsetSpec, RetryPolicy,
};
use walfetch::codec::{BatchBuilder, Batches, DecodeOptions, NewRecord};
use walfetch::connection::{
    Connection, ConnectionConfig, ConnectionError, VersionPolicy, VersionRange,
};
use walfetch::error_code::ErrorCode;
use walfetch_support::broker::{BrokerKind, TestBroker};
use walfetch_support::leader::fetch_on_leader;
use walfetch_support::on_brokers;
use walfetch_support::{batch_offsets, produce_batches, sample_records, EVERY_CODEC};

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit i64")
}

/// Without the broker binary a test fails, saying how to install it.
#[test]
fn a_missing_broker_fails_with_install_instructions() {
    let why = walfetch_support::tansu::find_tansu(|_| None).expect_err("nothing to find");
    assert!(why.contains("scripts/setup-broker.sh"), "{why}");
    assert!(
        why.contains("cargo install tansu --version 0.6.0 --locked --features dynostore"),
        "{why}"
    );
    // `Tansu::start` turns this error into a panic: the test fails, never skips.
}

async fn metadata_lists_the_broker_and_every_partition_leader(broker: &TestBroker) {
    let orders: &str = &broker.topic("orders");
    let missing: &str = &broker.topic("missing");
    let cluster = broker.cluster_with_topic(orders, 3).await;

    let metadata = cluster
        .metadata(Some(&[orders, missing]))
        .await
        .expect("metadata");
    assert_eq!(metadata.brokers.len(), 1, "{metadata:?}");
    let (&id, info) = metadata.brokers.iter().next().expect("one broker");
    assert_eq!(info.address(), broker.address());

    let topic = &metadata.topics[orders];
    assert_eq!(topic.error, ErrorCode::None);
    assert!(!topic.id.is_nil(), "Metadata v10+ carries topic ids");
    assert_eq!(
        topic.partitions.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    for p in topic.partitions.values() {
        assert_eq!(p.leader_id, id);
        assert!(p.leader_epoch >= 0, "leader epoch {}", p.leader_epoch);
        let leader = cluster.leader(orders, p.partition).await.expect("leader");
        assert_eq!(
            (leader.broker_id, leader.address.as_str()),
            (id, broker.address().as_str())
        );
        assert_eq!(leader.topic_id, topic.id);
    }
    assert_eq!(
        metadata.topics[missing].error,
        ErrorCode::UnknownTopicOrPartition
    );
}

async fn creating_an_existing_topic_names_topic_and_broker(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    let err = cluster
        .create_topics(&[NewTopic::new(t, 1)])
        .await
        .expect_err("already exists");
    assert_eq!(err.code(), Some(ErrorCode::TopicAlreadyExists));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{t:?}")) && msg.contains(&broker.address()),
        "{msg}"
    );
}

async fn list_offsets_earliest_latest_and_by_timestamp(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    let offset = |spec| {
        let cluster = &cluster;
        async move {
            cluster
                .list_offsets(t, 0, spec, IsolationLevel::ReadUncommitted)
                .await
                .expect("list offsets")
                .offset
        }
    };
    assert_eq!(offset(OffsetSpec::Earliest).await, Some(0));
    assert_eq!(offset(OffsetSpec::Latest).await, Some(0));

    // One-record batches, timestamped when produced: on these, Kafka's and
    // Tansu's answers agree (see tansu_habits.rs for where they differ).
    let produce_now = |value: &'static str| {
        let cluster = &cluster;
        async move {
            let record = NewRecord {
                timestamp: now_ms(),
                ..NewRecord::value(0, value)
            };
            let batch = BatchBuilder::new(0).encode(&[record]).expect("encode");
            cluster.produce(t, 0, batch.bytes).await.expect("produce")
        }
    };
    assert_eq!(produce_now("a").await, 0);
    assert_eq!(produce_now("b").await, 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let between = now_ms();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(produce_now("c").await, 2);

    assert_eq!(offset(OffsetSpec::Earliest).await, Some(0));
    assert_eq!(offset(OffsetSpec::Latest).await, Some(3));
    let by_time = cluster
        .list_offsets(
            t,
            0,
            OffsetSpec::Timestamp(between),
            IsolationLevel::ReadUncommitted,
        )
        .await
        .expect("by timestamp");
    assert_eq!(by_time.offset, Some(2));
    assert!(
        by_time.timestamp.is_some_and(|ts| ts >= between),
        "{by_time:?}"
    );
}

/// Records with keys, null values, headers and odd timestamps, for the
/// round trip.
fn varied_records() -> Vec<NewRecord> {
    (0..20)
        .map(|i| NewRecord {
            offset_delta: i,
            timestamp: 1_700_000_000_000 + i64::from(i) * 37,
            key: (i % 3 != 0).then(|| Bytes::from(format!("key-{i}"))),
            value: (i % 5 != 4).then(|| Bytes::from(format!("value-{i}-").repeat(i as usize + 1))),
            headers: (0..i % 3)
                .map(|h| {
                    (
                        Bytes::from(format!("h{h}")),
                        (h % 2 == 0).then(|| Bytes::from(format!("hv{i}"))),
                    )
                })
                .collect(),
        })
        .collect()
}

async fn produce_then_fetch_round_trips_every_compression(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    let records = varied_records();
    for (compression, framing) in EVERY_CODEC {
        let batch = BatchBuilder::new(0)
            .compression(compression)
            .snappy_framing(framing)
            .encode(&records)
            .expect("encode");
        let base = cluster
            .produce(t, 0, batch.bytes.clone())
            .await
            .expect("produce");
        let fetched = cluster
            .fetch(&FetchParams::new(t, 0, base))
            .await
            .expect("fetch");
        assert_eq!(fetched.error_code, ErrorCode::None);
        assert!(fetched.wire_bytes > fetched.records.len());

        let mut batches = Batches::new(fetched.records.clone(), DecodeOptions::default());
        let first = batches.next().expect("a batch").expect("valid batch");
        assert_eq!(first.base_offset(), base, "{compression:?}");
        assert_eq!(first.compression(), compression);
        let decoded: Vec<_> = first
            .records()
            .expect("records")
            .map(|r| r.expect("record"))
            .collect();
        assert_eq!(decoded.len(), records.len(), "{compression:?}");
        for (got, want) in decoded.iter().zip(&records) {
            let context = format!("{compression:?}/{framing:?} offset {}", got.offset());
            assert_eq!(
                got.offset(),
                base + i64::from(want.offset_delta),
                "{context}"
            );
            assert_eq!(got.timestamp(), want.timestamp, "{context}");
            assert_eq!(got.key(), want.key.as_deref(), "{context}");
            assert_eq!(got.value(), want.value.as_deref(), "{context}");
            let headers: Vec<(Vec<u8>, Option<Vec<u8>>)> = got
                .headers()
                .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                .collect();
            let expected: Vec<(Vec<u8>, Option<Vec<u8>>)> = want
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.as_ref().map(|v| v.to_vec())))
                .collect();
            assert_eq!(headers, expected, "{context}");
        }
    }
}

async fn fetch_reports_watermarks_and_wire_bytes(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    let produced = produce_batches(&cluster, t, 3, 7, 100).await;
    assert_eq!(
        produced.iter().map(|(base, _)| *base).collect::<Vec<_>>(),
        vec![0, 7, 14]
    );

    let (connection, _) = cluster.leader_connection(t, 0).await.expect("leader");
    let before = connection.stats();
    let fetched = cluster
        .fetch(&FetchParams::new(t, 0, 0))
        .await
        .expect("fetch");
    let after = connection.stats();
    assert_eq!(
        batch_offsets(&fetched.records),
        vec![(0, 6), (7, 13), (14, 20)]
    );
    assert_eq!(fetched.high_watermark, 21);
    assert_eq!(fetched.last_stable_offset, 21);
    assert_eq!(fetched.log_start_offset, 0);
    assert!(fetched.aborted_transactions.is_empty());
    assert_eq!(fetched.version, 11);
    assert_eq!(fetched.broker, broker.address());
    // The response's wire size is what the connection counted for it.
    assert_eq!(
        after.bytes_received - before.bytes_received,
        fetched.wire_bytes as u64
    );
    assert_eq!(after.requests - before.requests, 1);
    assert_eq!(after.responses - before.responses, 1);
    assert!(after.bytes_sent > before.bytes_sent);
    assert_eq!(after.in_flight, 0);

    let committed = cluster
        .fetch(&FetchParams::new(t, 0, 0).with_isolation(IsolationLevel::ReadCommitted))
        .await
        .expect("read_committed fetch");
    assert_eq!(
        batch_offsets(&committed.records),
        vec![(0, 6), (7, 13), (14, 20)]
    );
}

/// Ten fetches in flight on one connection at once, each for a different
/// offset: every one gets the batch it asked for.
async fn pipelined_fetches_on_one_connection(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    produce_batches(&cluster, t, 10, 1, 50).await;
    let (connection, leader) = cluster.leader_connection(t, 0).await.expect("leader");
    let before = connection.stats();

    // Both brokers answer max_bytes 1 with exactly one whole batch (KIP-74:
    // the first batch is returned whole, however small the limit).
    let params: Vec<FetchParams> = (0..10)
        .rev()
        .map(|o| FetchParams::new(t, 0, o).with_max_bytes(1))
        .collect();
    let results = join_all(
        params
            .iter()
            .map(|p| fetch_on_leader(&connection, &leader, p, None)),
    )
    .await;
    for (p, result) in params.iter().zip(results) {
        let fetched = result.expect("fetch");
        assert_eq!(batch_offsets(&fetched.records), vec![(p.offset, p.offset)]);
        let batch = Batches::new(fetched.records, DecodeOptions::default())
            .next()
            .expect("batch")
            .expect("valid");
        let record = batch
            .records()
            .expect("records")
            .next()
            .expect("record")
            .expect("valid");
        assert!(record
            .value()
            .expect("value")
            .starts_with(format!("b{}-", p.offset).as_bytes()));
    }
    let after = connection.stats();
    assert_eq!(after.requests - before.requests, 10);
    assert_eq!(after.responses - before.responses, 10);
}

/// Requests of different APIs in flight together: each response is decoded
/// as its own request's type, so a confused correlation id would fail.
async fn pipelined_requests_of_different_apis_are_not_confused(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    produce_batches(&cluster, t, 2, 3, 10).await;
    let (connection, leader) = cluster.leader_connection(t, 0).await.expect("leader");
    let connection: Arc<Connection> = connection;

    let metadata_version = connection
        .version(ApiKey::Metadata)
        .expect("metadata version");
    let list_version = connection
        .version(ApiKey::ListOffsets)
        .expect("list offsets version");
    let metadata: MetadataRequest = metadata_request(Some(&[t]), metadata_version);
    let latest: ListOffsetsRequest = list_offsets_request(
        t,
        0,
        OffsetSpec::Earliest,
        IsolationLevel::ReadUncommitted,
        leader.leader_epoch,
        list_version,
    );
    let fetch = FetchParams::new(t, 0, 3).with_max_bytes(1);
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (m, l, f) = tokio::join!(
            connection.request(&metadata),
            connection.request(&latest),
            fetch_on_leader(&connection, &leader, &fetch, None),
        );
        let m = m.expect("metadata");
        let l = l.expect("list offsets");
        assert_eq!(m.body.topics.len(), 1);
        let listed =
            read_list_offsets_response(t, 0, connection.broker(), &l.body).expect("offset");
        assert_eq!(listed.offset, Some(0));
        assert_eq!(batch_offsets(&f.expect("fetch").records), vec![(3, 5)]);
        ids.extend([m.correlation_id, l.correlation_id]);
    }
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "correlation ids reused: {ids:?}");
}

async fn version_negotiation_picks_the_highest_common_version(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let connection = Connection::connect(broker.address(), ConnectionConfig::default())
        .await
        .expect("connect");
    let versions = connection.versions();
    // What each broker advertises for Fetch, and the versions negotiated
    // where the broker's maximum is lower than the message types': Fetch,
    // Metadata, Produce, ListOffsets, CreateTopics. walfetch caps Fetch at
    // v11 (later versions add nothing a WAL replay uses).
    let (fetch_range, negotiated) = match broker.kind() {
        BrokerKind::Tansu => (VersionRange::new(0, 17), [11, 12, 11, 9, 7]),
        BrokerKind::Kafka => (VersionRange::new(4, 18), [11, 13, 12, 10, 7]),
    };
    assert_eq!(versions.advertised(ApiKey::Fetch), Some(fetch_range));
    let apis = [
        ApiKey::Fetch,
        ApiKey::Metadata,
        ApiKey::Produce,
        ApiKey::ListOffsets,
        ApiKey::CreateTopics,
    ];
    let got: Vec<i16> = apis
        .iter()
        .map(|&api| connection.version(api).expect("negotiated"))
        .collect();
    assert_eq!(got, negotiated, "{apis:?} on {}", broker.name());

    // Raising the cap: Fetch v17 addresses the topic by id (from Metadata).
    let mut config = broker.cluster_config();
    config.connection.versions = VersionPolicy::default().with_max(ApiKey::Fetch, 17);
    let cluster = Cluster::connect(config).await.expect("bootstrap");
    cluster
        .create_topics(&[NewTopic::new(t, 1)])
        .await
        .expect("create");
    produce_batches(&cluster, t, 2, 2, 10).await;
    let fetched = cluster
        .fetch(&FetchParams::new(t, 0, 0))
        .await
        .expect("fetch v17");
    assert_eq!(fetched.version, 17);
    assert_eq!(batch_offsets(&fetched.records), vec![(0, 1), (2, 3)]);
}

async fn no_common_version_is_a_clear_error_and_not_retried(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let mut config = broker.cluster_config();
    // Fetch versions the broker does not serve: past Tansu's maximum;
    // below Kafka 4's minimum (it removed Fetch v0..=3, KIP-896, and so did
    // the message types, which leaves walfetch no version at all).
    let (advertised, wanted, ours) = match broker.kind() {
        BrokerKind::Tansu => ("v0..=17", VersionRange::new(18, 18), "v18..=18"),
        BrokerKind::Kafka => ("v4..=18", VersionRange::new(0, 3), "no version"),
    };
    config.connection.versions = VersionPolicy::default().with_range(ApiKey::Fetch, wanted);
    let cluster = Cluster::connect(config).await.expect("bootstrap");
    cluster
        .create_topics(&[NewTopic::new(t, 1)])
        .await
        .expect("create");
    let started = std::time::Instant::now();
    let err = cluster
        .fetch(&FetchParams::new(t, 0, 0))
        .await
        .expect_err("no common version");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "retried: {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            ClientError::Connection(ConnectionError::NoCommonVersion {
                api: ApiKey::Fetch,
                ..
            })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    for part in ["Fetch", advertised, ours, broker.address().as_str()] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
}

async fn unknown_topic_is_retried_until_the_deadline(broker: &TestBroker) {
    let nope: &str = &broker.topic("nope");
    let mut config = broker.cluster_config();
    config.retry = RetryPolicy {
        deadline: Duration::from_millis(800),
        ..RetryPolicy::default()
    };
    let cluster = Cluster::connect(config).await.expect("bootstrap");
    let started = std::time::Instant::now();
    let err = cluster
        .fetch(&FetchParams::new(nope, 0, 0))
        .await
        .expect_err("unknown topic");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert!(
        matches!(err, ClientError::RetriesExhausted { attempts, .. } if attempts > 1),
        "{err:?}"
    );
    assert_eq!(err.code(), Some(ErrorCode::UnknownTopicOrPartition));
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{nope:?} partition 0")) && msg.contains(&broker.address()),
        "{msg}"
    );
}

/// The broker goes away while a long-poll fetch is in flight: the request
/// fails at once with the connection's error, not at its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_requests_in_flight_promptly_on_kafka() {
    a_dropped_connection_fails_requests_in_flight_promptly(
        TestBroker::start_own(BrokerKind::Kafka).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_fails_requests_in_flight_promptly_on_tansu() {
    a_dropped_connection_fails_requests_in_flight_promptly(
        TestBroker::start_own(BrokerKind::Tansu).await,
    )
    .await;
}

async fn a_dropped_connection_fails_requests_in_flight_promptly(broker: TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    // Kafka answers UNKNOWN_LEADER_EPOCH for a moment after CreateTopics
    // (the leader has not applied the epoch Metadata reported); the
    // retrying fetch waits that out, the raw one below would not.
    cluster
        .fetch(&FetchParams::new(t, 0, 0).with_max_wait(Duration::ZERO))
        .await
        .expect("the new partition serves fetches");
    let (connection, leader) = cluster.leader_connection(t, 0).await.expect("leader");
    // Nothing to read at offset 0 yet: the broker holds the request for max_wait.
    let params = FetchParams::new(t, 0, 0).with_max_wait(Duration::from_secs(20));
    let started = std::time::Instant::now();
    let (result, ()) = tokio::join!(
        fetch_on_leader(&connection, &leader, &params, None),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            drop(broker);
        }
    );
    let elapsed = started.elapsed();
    let err = result.expect_err("broker gone");
    assert!(elapsed < Duration::from_secs(8), "took {elapsed:?}");
    assert!(
        matches!(&err, ClientError::Connection(e) if e.is_connection_lost()),
        "{err:?}"
    );
    assert!(connection.is_closed());
    // Later requests fail at once with the same error.
    let again = fetch_on_leader(&connection, &leader, &params, None)
        .await
        .expect_err("closed");
    assert_eq!(again.to_string(), err.to_string());
}

async fn produce_round_trip_through_many_small_batches_keeps_order(broker: &TestBroker) {
    let t: &str = &broker.topic("t");
    let cluster = broker.cluster_with_topic(t, 1).await;
    let produced = produce_batches(&cluster, t, 20, 3, 8).await;
    let bases: Vec<i64> = produced.iter().map(|(b, _)| *b).collect();
    assert_eq!(bases, (0..20).map(|b| b * 3).collect::<Vec<_>>());
    let fetched = cluster
        .fetch(&FetchParams::new(t, 0, 0))
        .await
        .expect("fetch");
    let values: Vec<Vec<u8>> = Batches::new(fetched.records, DecodeOptions::default())
        .flat_map(|b| {
            let b = b.expect("batch");
            b.records()
                .expect("records")
                .map(|r| r.expect("record").value().expect("value").to_vec())
                .collect::<Vec<_>>()
        })
        .collect();
    let expected: Vec<Vec<u8>> = (0..20)
        .flat_map(|b| sample_records(b, 3, 8))
        .map(|r| r.value.expect("value").to_vec())
        .collect();
    assert_eq!(values, expected);
}

on_brokers!(
    metadata_lists_the_broker_and_every_partition_leader,
    creating_an_existing_topic_names_topic_and_broker,
    list_offsets_earliest_latest_and_by_timestamp,
    produce_then_fetch_round_trips_every_compression,
    fetch_reports_watermarks_and_wire_bytes,
    pipelined_fetches_on_one_connection,
    pipelined_requests_of_different_apis_are_not_confused,
    version_negotiation_picks_the_highest_common_version,
    no_common_version_is_a_clear_error_and_not_retried,
    unknown_topic_is_retried_until_the_deadline,
    produce_round_trip_through_many_small_batches_keeps_order,
);
