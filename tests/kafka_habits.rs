//! Apache Kafka 4.4's answers to the probes of `tests/tansu_habits.rs`,
//! pinned: the same batches (three of 7 records with 100-byte values, 824
//! bytes each), the same requests, and what Kafka does — the rules the
//! scripted broker and the floor are built on (`tests/fetch_rules_kafka.rs`
//! checks them against Kafka at random; these are the named cases). Each
//! test's name says the rule; its doc says where Tansu 0.6 differs.
//!
//! On the binary's shared Kafka node (`walfetch_support::kafka`), a topic each.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use walfetch::cluster::{
    fetch_on, Cluster, FetchParams, FetchedPartition, IsolationLevel, NewTopic, OffsetSpec,
};
use walfetch::codec::{BatchBuilder, NewRecord};
use walfetch::error_code::ErrorCode;
use walfetch_support::{batch_offsets, produce_batches};

const BATCH_LEN: usize = 824;

/// A client of the shared node and a fresh topic of `partitions`.
async fn topic(partitions: i32) -> (Cluster, String) {
    let node = walfetch_support::kafka::shared();
    let cluster = Cluster::connect(node.cluster_config()).await.unwrap();
    let topic = walfetch_support::kafka::unique_topic("habits");
    cluster
        .create_topics(&[NewTopic::new(&topic, partitions)])
        .await
        .unwrap();
    (cluster, topic)
}

/// A topic holding three 7-record batches: offsets 0–6, 7–13, 14–20.
async fn three_batches() -> (Cluster, String) {
    let (cluster, topic) = topic(1).await;
    let produced = produce_batches(&cluster, &topic, 3, 7, 100).await;
    for (_, bytes) in &produced {
        assert_eq!(bytes.len(), BATCH_LEN, "sample batch size changed");
    }
    (cluster, topic)
}

async fn fetch(cluster: &Cluster, params: FetchParams) -> FetchedPartition {
    cluster.fetch(&params).await.expect("fetch")
}

/// A raw fetch on the leader (no retry, no Metadata check), at `epoch`
/// (`None`: the leader's) and `version` (`None`: the negotiated one).
async fn raw(
    cluster: &Cluster,
    topic: &str,
    params: FetchParams,
    epoch: Option<i32>,
    version: Option<i16>,
) -> FetchedPartition {
    let (connection, leader) = cluster.leader_connection(topic, 0).await.expect("leader");
    fetch_on(
        &connection,
        &params,
        epoch.unwrap_or(leader.leader_epoch),
        leader.topic_id,
        version,
    )
    .await
    .unwrap_or_else(|e| panic!("{params:?}: {e}"))
}

/// The first batch comes whole whatever the limit (KIP-74); after it the
/// response is cut at exactly `max_bytes`, mid-batch. (Tansu never cuts,
/// and overshoots.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_cuts_at_the_byte_limit_after_a_whole_first_batch() {
    let (cluster, topic) = three_batches().await;
    for (max_bytes, len) in [
        (1, BATCH_LEN),
        (300, BATCH_LEN),
        (BATCH_LEN as i32, BATCH_LEN),
        (1_000, 1_000),
        (2 * BATCH_LEN as i32, 2 * BATCH_LEN),
        (100_000, 3 * BATCH_LEN),
    ] {
        let params = FetchParams::new(&topic, 0, 0).with_max_bytes(max_bytes);
        let records = fetch(&cluster, params).await.records;
        assert_eq!(records.len(), len, "max_bytes {max_bytes}");
    }
}

/// Both limits apply: `partition_max_bytes` 1 with a large `max_bytes`
/// still returns the first batch whole, and no more; 1,000 cuts there.
/// (Tansu ignores `partition_max_bytes`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_applies_partition_max_bytes() {
    let (cluster, topic) = three_batches().await;
    for (max_bytes, partition_max_bytes, len) in [
        (100_000, 1, BATCH_LEN),
        (1, 100_000, BATCH_LEN),
        (100_000, 1_000, 1_000),
    ] {
        let mut params = FetchParams::new(&topic, 0, 0);
        params.max_bytes = max_bytes;
        params.partition_max_bytes = partition_max_bytes;
        let records = fetch(&cluster, params).await.records;
        assert_eq!(records.len(), len, "{max_bytes}/{partition_max_bytes}");
    }
}

/// Each partition of a request reads up to its own `partition_max_bytes`
/// (and what is left of `max_bytes`): two partitions asking for a batch
/// each get one each, in one request. (Tansu spends `max_bytes` on the
/// first partition and starves the second.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_gives_each_partition_its_own_limit() {
    let (cluster, topic) = topic(2).await;
    for p in 0..2 {
        for b in 0..3 {
            let encoded = BatchBuilder::new(0)
                .encode(&walfetch_support::sample_records(b, 7, 100))
                .unwrap();
            cluster.produce(&topic, p, encoded.bytes).await.unwrap();
        }
    }
    let params: Vec<FetchParams> = (0..2)
        .map(|p| FetchParams::new(&topic, p, 0).with_max_bytes(BATCH_LEN as i32))
        .collect();
    let many = cluster.fetch_many(&params).await;
    assert_eq!(many.requests, 1, "one request for both");
    let batches: Vec<usize> = many
        .partitions
        .iter()
        .map(|p| batch_offsets(&p.as_ref().expect("fetched").records).len())
        .collect();
    assert_eq!(batches, vec![1, 1]);
}

/// A fetch at an offset inside a batch returns that batch from its first
/// byte. (Tansu skips to the next batch.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_starts_at_the_batch_containing_a_mid_batch_offset() {
    let (cluster, topic) = three_batches().await;
    for (offset, first) in [
        (0, Some((0, 6))),
        (3, Some((0, 6))),
        (6, Some((0, 6))),
        (7, Some((7, 13))),
        (10, Some((7, 13))),
        (15, Some((14, 20))),
        (21, None),
    ] {
        let records = fetch(&cluster, FetchParams::new(&topic, 0, offset))
            .await
            .records;
        assert_eq!(
            batch_offsets(&records).first().copied(),
            first,
            "offset {offset}"
        );
    }
}

/// Every Fetch version walfetch can send decodes, v4 to v17, by name up
/// to v12 and by topic id from v13 (KIP-516). (Tansu's v12–v15 carry a
/// tagged field those versions do not define and fail to decode.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_fetch_every_version_decodes() {
    let (cluster, topic) = three_batches().await;
    for version in 4..=17 {
        let fetched = raw(
            &cluster,
            &topic,
            FetchParams::new(&topic, 0, 0),
            None,
            Some(version),
        )
        .await;
        assert_eq!(fetched.version, version);
        assert_eq!(batch_offsets(&fetched.records).len(), 3, "Fetch v{version}");
    }
}

/// ListOffsets "latest" is the high watermark, 21, under both isolation
/// levels when no transaction is open, and a `read_committed` fetch reads
/// to the last stable offset (also 21) listing no aborted transactions.
/// (Tansu answers the last batch's base offset + 1, 15.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_list_offsets_latest_is_the_high_watermark() {
    let (cluster, topic) = three_batches().await;
    for isolation in [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
    ] {
        let latest = cluster
            .list_offsets(&topic, 0, OffsetSpec::Latest, isolation)
            .await
            .unwrap();
        assert_eq!(latest.offset, Some(21), "{isolation:?}");
    }
    let committed = fetch(
        &cluster,
        FetchParams::new(&topic, 0, 0).with_isolation(IsolationLevel::ReadCommitted),
    )
    .await;
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (21, 21)
    );
    assert!(committed.aborted_transactions.is_empty());
    assert_eq!(batch_offsets(&committed.records).len(), 3);
}

/// ListOffsets by timestamp looks at the records' own timestamps
/// (CreateTime): the first offset stamped at or after the time asked for,
/// and none (offset -1) past every record. (Tansu looks at append time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_list_offsets_by_timestamp_uses_create_time() {
    let (cluster, topic) = topic(1).await;
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    // Kafka 4 refuses timestamps more than an hour ahead
    // (`log.message.timestamp.after.max.ms`): batch B is 30 minutes ahead.
    let ahead = now + 30 * 60_000;
    for stamp in [1_000, ahead] {
        let records: Vec<NewRecord> = (0..7)
            .map(|i| NewRecord {
                timestamp: stamp + i64::from(i),
                ..NewRecord::value(i, "v")
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).unwrap();
        cluster.produce(&topic, 0, batch.bytes).await.unwrap();
    }
    let lookup = |ts: i64| {
        let (cluster, topic) = (&cluster, &topic);
        async move {
            cluster
                .list_offsets(
                    topic,
                    0,
                    OffsetSpec::Timestamp(ts),
                    IsolationLevel::ReadUncommitted,
                )
                .await
                .unwrap()
        }
    };
    let old = lookup(2_000).await;
    assert_eq!(
        (old.offset, old.timestamp),
        (Some(7), Some(ahead)),
        "{old:?}"
    );
    let soon = lookup(now).await;
    assert_eq!(soon.offset, Some(7), "{soon:?}");
    let past_all = lookup(ahead + 60_000).await;
    assert_eq!(past_all.offset, None, "{past_all:?}");
}

/// A fetch outside `[log start, log end]` is OFFSET_OUT_OF_RANGE, at
/// once (no `max_wait`), past the end and below the start alike. (Tansu
/// answers NONE.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_fetch_outside_the_log_is_offset_out_of_range() {
    let (cluster, topic) = three_batches().await;
    for offset in [22, 100, -5] {
        let started = Instant::now();
        let params = FetchParams::new(&topic, 0, offset).with_max_wait(Duration::from_secs(5));
        let fetched = raw(&cluster, &topic, params, None, None).await;
        assert_eq!(
            fetched.error_code,
            ErrorCode::OffsetOutOfRange,
            "offset {offset}"
        );
        assert!(fetched.records.is_empty());
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "offset {offset}: waited {:?}",
            started.elapsed()
        );
    }
    // At the log end itself: no error, no records.
    let at_end = raw(
        &cluster,
        &topic,
        FetchParams::new(&topic, 0, 21),
        None,
        None,
    )
    .await;
    assert_eq!(
        (at_end.error_code, at_end.records.len()),
        (ErrorCode::None, 0)
    );
}

/// A fetch of a partition the topic does not have, or of a topic that
/// does not exist, is UNKNOWN_TOPIC_OR_PARTITION. (Tansu answers NONE.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_fetch_of_an_unknown_partition_is_an_error() {
    let (cluster, topic) = three_batches().await;
    for (name, partition) in [("no-such-topic", 0), (topic.as_str(), 5)] {
        let params = FetchParams::new(name, partition, 0);
        let (connection, leader) = cluster.leader_connection(&topic, 0).await.unwrap();
        let fetched = fetch_on(&connection, &params, -1, leader.topic_id, Some(11))
            .await
            .unwrap();
        assert_eq!(
            fetched.error_code,
            ErrorCode::UnknownTopicOrPartition,
            "{name}/{partition}"
        );
    }
}

/// The leader checks `current_leader_epoch` (KIP-320): -1 (unknown) and
/// the leader's own epoch are served, a later epoch is
/// UNKNOWN_LEADER_EPOCH (a stale one is FENCED_LEADER_EPOCH: see
/// `tests/failover_kafka.rs`). (Tansu ignores the field.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_checks_the_current_leader_epoch() {
    let (cluster, topic) = three_batches().await;
    let (_, leader) = cluster.leader_connection(&topic, 0).await.unwrap();
    let current = leader.leader_epoch;
    for (epoch, code) in [
        (-1, ErrorCode::None),
        (current, ErrorCode::None),
        (current + 1, ErrorCode::UnknownLeaderEpoch),
        (current + 99, ErrorCode::UnknownLeaderEpoch),
    ] {
        let fetched = raw(
            &cluster,
            &topic,
            FetchParams::new(&topic, 0, 0),
            Some(epoch),
            None,
        )
        .await;
        assert_eq!(
            fetched.error_code, code,
            "epoch {epoch} (leader's {current})"
        );
    }
}

/// A produced batch is stored as sent except its base offset and its
/// partition leader epoch, which Kafka sets (neither is under the CRC).
/// (Tansu leaves the leader epoch at -1.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_rewrites_only_base_offset_and_leader_epoch() {
    let (cluster, topic) = topic(1).await;
    let produced = produce_batches(&cluster, &topic, 3, 7, 100).await;
    let (_, leader) = cluster.leader_connection(&topic, 0).await.unwrap();
    let records = fetch(&cluster, FetchParams::new(&topic, 0, 0))
        .await
        .records;
    let mut at = 0;
    for (base, bytes) in &produced {
        let served = &records[at..at + bytes.len()];
        assert_eq!(&served[..8], &base.to_be_bytes(), "base offset at {at}");
        assert_eq!(&served[8..12], &bytes[8..12], "batch length");
        assert_eq!(
            &served[12..16],
            &leader.leader_epoch.to_be_bytes(),
            "partition leader epoch"
        );
        assert_eq!(&served[16..], &bytes[16..], "batch at offset {base}");
        at += bytes.len();
    }
    assert_eq!(at, records.len());
}
