//! Tansu 0.6.0's habits that differ from Apache Kafka, pinned down so that
//! a broker upgrade that changes one is noticed. walfetch must be correct
//! whether or not a broker has them (DESIGN.md: correctness never depends
//! on one broker's habits); the fetch planner and the replay tests rely on
//! knowing which ones the test broker has.
//!
//! Every test states the Kafka behaviour it differs from. Numbers come from
//! batches of 7 records with 100-byte values: 824 bytes each (61 bytes of
//! batch header, 763 of records).
//!
//! Run with `cargo test -p walfetch --test tansu_habits`. Needs Tansu:
//! `scripts/setup-broker.sh`.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::ApiKey;
use walfetch::cluster::{fetch_on, ClientError, Cluster, FetchParams, IsolationLevel, OffsetSpec};
use walfetch::codec::{BatchBuilder, NewRecord, HEADER_LEN};
use walfetch::connection::{ConnectionError, VersionRange};
use walfetch::error_code::ErrorCode;
use walfetch_support::leader::fetch_on_leader;
use walfetch_support::tansu::Tansu;
use walfetch_support::{batch_offsets, produce_batches};

const BATCH_LEN: usize = 824;

/// A broker with topic `t` holding three 7-record batches: offsets 0–6,
/// 7–13, 14–20.
async fn three_batches() -> (Tansu, Cluster) {
    let broker = Tansu::start().await;
    let cluster = broker.cluster_with_topic("t", 1).await;
    let produced = produce_batches(&cluster, "t", 3, 7, 100).await;
    for (_, bytes) in &produced {
        assert_eq!(
            bytes.len(),
            BATCH_LEN,
            "sample batch size changed: fix the numbers below"
        );
    }
    (broker, cluster)
}

async fn fetch(cluster: &Cluster, params: FetchParams) -> bytes::Bytes {
    cluster.fetch(&params).await.expect("fetch").records
}

/// Kafka cuts the response at the byte limit, leaving a partial last batch
/// (except that the first batch comes whole, KIP-74). Tansu never cuts a
/// batch: `max_bytes` 1 or 300 returns one whole 824-byte batch.
#[tokio::test]
async fn tansu_never_cuts_a_batch() {
    let (_broker, cluster) = three_batches().await;
    for max_bytes in [1, 300, 823] {
        let records = fetch(
            &cluster,
            FetchParams::new("t", 0, 0).with_max_bytes(max_bytes),
        )
        .await;
        assert_eq!(
            records.len() % BATCH_LEN,
            0,
            "max_bytes {max_bytes}: a cut batch"
        );
        assert_eq!(batch_offsets(&records)[0], (0, 6), "max_bytes {max_bytes}");
    }
}

/// Tansu adds whole batches while the bytes it counted so far are below
/// `max_bytes`, counting each batch without its 61-byte header (763 here):
/// so a response overshoots `max_bytes` by up to a whole batch. Kafka stops
/// at `max_bytes` exactly (cutting the last batch).
#[tokio::test]
async fn tansu_counts_max_bytes_without_batch_headers_and_overshoots() {
    let (_broker, cluster) = three_batches().await;
    let counted = (BATCH_LEN - HEADER_LEN) as i32;
    assert_eq!(counted, 763);
    let expectations = [
        (counted, 1),
        (counted + 1, 2),
        (BATCH_LEN as i32, 2),
        (2 * counted, 2),
        (2 * counted + 1, 3),
        (100_000, 3),
    ];
    for (max_bytes, batches) in expectations {
        let records = fetch(
            &cluster,
            FetchParams::new("t", 0, 0).with_max_bytes(max_bytes),
        )
        .await;
        assert_eq!(
            records.len(),
            batches * BATCH_LEN,
            "max_bytes {max_bytes}: expected {batches} whole batch(es)"
        );
    }
}

/// Kafka applies both `max_bytes` and `partition_max_bytes`. Tansu ignores
/// `partition_max_bytes`: with it at 1 and `max_bytes` large, every batch
/// comes back.
#[tokio::test]
async fn tansu_ignores_partition_max_bytes() {
    let (_broker, cluster) = three_batches().await;
    let mut params = FetchParams::new("t", 0, 0);
    params.max_bytes = 100_000;
    params.partition_max_bytes = 1;
    assert_eq!(batch_offsets(&fetch(&cluster, params).await).len(), 3);
    let mut params = FetchParams::new("t", 0, 0);
    params.max_bytes = 1;
    params.partition_max_bytes = 100_000;
    assert_eq!(batch_offsets(&fetch(&cluster, params).await).len(), 1);
}

/// Kafka gives each partition of a request up to its `partition_max_bytes`
/// (the first partition's first batch whole, KIP-74). Tansu spends the
/// request's `max_bytes` on the first partition (three batches here, with
/// room asked for one in each partition) and answers the second with no
/// records below its high watermark. `fetch_many` sees the starved
/// partition and fetches it again on its own: two requests, not one.
#[tokio::test]
async fn tansu_spends_a_requests_max_bytes_on_its_first_partitions() {
    let broker = Tansu::start().await;
    let cluster = broker.cluster_with_topic("t", 2).await;
    for p in 0..2 {
        for b in 0..3 {
            let encoded = BatchBuilder::new(0)
                .encode(&walfetch_support::sample_records(b, 7, 100))
                .expect("encode batch");
            cluster
                .produce("t", p, encoded.bytes)
                .await
                .expect("produce");
        }
    }
    let params: Vec<FetchParams> = (0..2)
        .map(|p| FetchParams::new("t", p, 0).with_max_bytes(BATCH_LEN as i32))
        .collect();
    let many = cluster.fetch_many(&params).await;
    assert_eq!(many.requests, 2, "the second partition fetched again");
    let batches: Vec<usize> = many
        .partitions
        .iter()
        .map(|p| batch_offsets(&p.as_ref().expect("fetched").records).len())
        .collect();
    assert_eq!(batches[0], 3, "the first partition took every batch");
    assert!(
        batches[1] >= 1,
        "the second partition, alone, got its first"
    );
}

/// Kafka returns the batch that contains the fetch offset, from its start.
/// Tansu skips it: a fetch at offset 3 of the batch holding 0–6 starts at 7,
/// and one at 10 starts at 14. Offsets at a batch's start are served
/// normally. A consumer relying on Kafka's rule would lose records 3–6.
#[tokio::test]
async fn tansu_skips_the_batch_containing_a_mid_batch_offset() {
    let (_broker, cluster) = three_batches().await;
    let first_batch = |offset: i64| {
        let cluster = &cluster;
        async move {
            batch_offsets(&fetch(cluster, FetchParams::new("t", 0, offset)).await)
                .first()
                .copied()
        }
    };
    assert_eq!(first_batch(0).await, Some((0, 6)));
    assert_eq!(first_batch(3).await, Some((7, 13)));
    assert_eq!(first_batch(6).await, Some((7, 13)));
    assert_eq!(first_batch(7).await, Some((7, 13)));
    assert_eq!(first_batch(8).await, Some((14, 20)));
    assert_eq!(first_batch(10).await, Some((14, 20)));
    assert_eq!(first_batch(15).await, None);
}

/// Tansu advertises Fetch v0–v17, but its v12–v15 responses carry the
/// top-level tagged field 0 (`NodeEndpoints`), which Kafka defines only
/// from v16, and `kafka-protocol` 0.18 rejects them ("Tag 0 is not valid
/// for version 12"). v4–v11 and v16–v17 decode. This is why walfetch caps
/// Fetch at v11 by default.
#[tokio::test]
async fn tansu_fetch_v12_to_v15_do_not_decode() {
    let (_broker, cluster) = three_batches().await;
    let (connection, leader) = cluster.leader_connection("t", 0).await.expect("leader");
    assert_eq!(
        connection.versions().advertised(ApiKey::Fetch),
        Some(VersionRange::new(0, 17))
    );
    let params = FetchParams::new("t", 0, 0);
    // A Fetch at `version` (`None`: the highest both sides speak).
    let fetch = |version| fetch_on_leader(&connection, &leader, &params, version);
    for version in (4..=11).chain(16..=17) {
        let fetched = fetch(Some(version))
            .await
            .unwrap_or_else(|e| panic!("Fetch v{version}: {e}"));
        assert_eq!(batch_offsets(&fetched.records).len(), 3, "Fetch v{version}");
    }
    for version in 12..=15 {
        let err = fetch(Some(version)).await.expect_err("does not decode");
        match err {
            ClientError::Connection(ConnectionError::Decode {
                version: v,
                message,
                ..
            }) => {
                assert_eq!(v, version);
                assert_eq!(message, format!("Tag 0 is not valid for version {version}"));
            }
            other => panic!("Fetch v{version}: unexpected {other:?}"),
        }
    }
    // A decode failure is about one response: the connection stays usable.
    assert!(!connection.is_closed());
    fetch(None).await.expect("v11 after the failures");
}

/// Kafka's ListOffsets "latest" is the high watermark (21 here). Tansu
/// answers the last batch's base offset + 1 (15), ignoring the batch's other
/// records. The end of a partition must come from Fetch's high watermark.
#[tokio::test]
async fn tansu_list_offsets_latest_is_last_batch_base_plus_one() {
    let (_broker, cluster) = three_batches().await;
    let latest = cluster
        .list_offsets("t", 0, OffsetSpec::Latest, IsolationLevel::ReadUncommitted)
        .await
        .expect("latest");
    assert_eq!(latest.offset, Some(15));
    let fetched = cluster
        .fetch(&FetchParams::new("t", 0, 0))
        .await
        .expect("fetch");
    assert_eq!(fetched.high_watermark, 21);
}

/// A `read_committed` fetch (a replay's default) reads up to the last
/// stable offset, and Kafka lists the aborted transactions among the
/// records it returns. On a log with no transaction open Tansu gives a last
/// stable offset, the high watermark (21), as Kafka does, and the same
/// batches as `read_uncommitted`; ListOffsets(latest) answers as it does
/// for `read_uncommitted` (15). Unlike Kafka, Tansu lists no aborted
/// transactions in any answer (tansu-storage 0.6.0, `service/fetch.rs`):
/// the records of a transaction it aborted are read as committed.
#[tokio::test]
async fn tansu_read_committed_reads_to_the_high_watermark_listing_no_aborted_transactions() {
    let (_broker, cluster) = three_batches().await;
    let params = FetchParams::new("t", 0, 0);
    let committed = cluster
        .fetch(&params.clone().with_isolation(IsolationLevel::ReadCommitted))
        .await
        .expect("read_committed fetch");
    let uncommitted = cluster.fetch(&params).await.expect("fetch");
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (21, 21)
    );
    assert_eq!(committed.readable_end(IsolationLevel::ReadCommitted), 21);
    assert!(committed.aborted_transactions.is_empty());
    assert_eq!(
        batch_offsets(&committed.records),
        batch_offsets(&uncommitted.records)
    );
    let latest = cluster
        .list_offsets("t", 0, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
        .await
        .expect("latest");
    assert_eq!(latest.offset, Some(15));
}

/// Kafka looks offsets up by the records' timestamps (CreateTime topics)
/// and answers offset -1 when every record is older. Tansu looks up the
/// time it appended each batch, and answers offset 0 with timestamp -1 when
/// nothing was appended at or after the time asked for.
#[tokio::test]
async fn tansu_list_offsets_by_timestamp_uses_append_time() {
    let broker = Tansu::start().await;
    let cluster = broker.cluster_with_topic("t", 1).await;
    let now = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("fits");
    let hour = 3_600_000;
    // Batch A (offsets 0–6) stamped in 1970, batch B (7–13) an hour ahead.
    for stamp in [1_000, now + hour] {
        let records: Vec<NewRecord> = (0..7)
            .map(|i| NewRecord {
                timestamp: stamp + i64::from(i),
                ..NewRecord::value(i, "v")
            })
            .collect();
        let batch = BatchBuilder::new(0).encode(&records).expect("encode");
        cluster.produce("t", 0, batch.bytes).await.expect("produce");
    }
    let lookup = |ts: i64| {
        let cluster = &cluster;
        async move {
            cluster
                .list_offsets(
                    "t",
                    0,
                    OffsetSpec::Timestamp(ts),
                    IsolationLevel::ReadUncommitted,
                )
                .await
                .expect("list offsets")
        }
    };
    // Kafka: offset 7 (the first record stamped at or after 2000).
    let old = lookup(2_000).await;
    assert_eq!(old.offset, Some(0), "{old:?}");
    assert!(
        old.timestamp.is_some_and(|ts| ts >= now - 60_000),
        "append time expected: {old:?}"
    );
    // Kafka: offset 7 (batch B is stamped an hour ahead).
    let ahead = lookup(now + hour / 2).await;
    assert_eq!(
        (ahead.offset, ahead.timestamp),
        (Some(0), None),
        "{ahead:?}"
    );
}

/// Kafka answers a fetch outside the log with OFFSET_OUT_OF_RANGE. Tansu
/// answers NONE: past the end it waits `max_wait` and returns nothing; at a
/// negative offset it serves the log from its start.
#[tokio::test]
async fn tansu_fetch_outside_the_log_is_not_an_error() {
    let (_broker, cluster) = three_batches().await;
    let (connection, leader) = cluster.leader_connection("t", 0).await.expect("leader");
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let past = fetch_on(
        &connection,
        &FetchParams::new("t", 0, 100).with_max_wait(wait),
        leader.leader_epoch,
        leader.topic_id,
        None,
    )
    .await
    .expect("past the end");
    assert!(
        started.elapsed() >= wait,
        "answered before max_wait: {:?}",
        started.elapsed()
    );
    assert_eq!(
        (past.error_code, past.records.len(), past.high_watermark),
        (ErrorCode::None, 0, 21)
    );
    let negative = fetch_on(
        &connection,
        &FetchParams::new("t", 0, -5),
        leader.leader_epoch,
        leader.topic_id,
        None,
    )
    .await
    .expect("negative offset");
    assert_eq!(negative.error_code, ErrorCode::None);
    assert_eq!(batch_offsets(&negative.records).len(), 3);
}

/// Kafka answers a fetch for an unknown topic or partition with
/// UNKNOWN_TOPIC_OR_PARTITION. Tansu answers NONE with no records and a
/// high watermark of 0; `Cluster::fetch` still fails (Metadata knows the
/// topic is missing), but a raw fetch cannot tell.
#[tokio::test]
async fn tansu_fetch_of_an_unknown_partition_is_not_an_error() {
    let (_broker, cluster) = three_batches().await;
    let (connection, leader) = cluster.leader_connection("t", 0).await.expect("leader");
    for (topic, partition) in [("nope", 0), ("t", 5)] {
        let params = FetchParams::new(topic, partition, 0).with_max_wait(Duration::from_millis(50));
        let fetched = fetch_on_leader(&connection, &leader, &params, None)
            .await
            .expect("answered");
        assert_eq!(
            (
                fetched.error_code,
                fetched.records.len(),
                fetched.high_watermark
            ),
            (ErrorCode::None, 0, 0),
            "{topic}/{partition}"
        );
    }
}

/// Kafka fences a fetch whose `current_leader_epoch` differs from the
/// leader's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). Tansu reports
/// epoch 0 in Metadata and ignores the field.
#[tokio::test]
async fn tansu_ignores_the_current_leader_epoch() {
    let (_broker, cluster) = three_batches().await;
    let (connection, leader) = cluster.leader_connection("t", 0).await.expect("leader");
    assert_eq!(leader.leader_epoch, 0);
    for epoch in [-1, 0, 1, 99] {
        let fetched = fetch_on(
            &connection,
            &FetchParams::new("t", 0, 0),
            epoch,
            leader.topic_id,
            None,
        )
        .await
        .expect("fetch");
        assert_eq!(fetched.error_code, ErrorCode::None, "epoch {epoch}");
    }
}

/// Kafka rewrites a produced batch's base offset and partition leader
/// epoch. Tansu rewrites only the base offset: the rest of every batch,
/// partition leader epoch (-1) and CRC included, is served byte for byte
/// as produced.
#[tokio::test]
async fn tansu_serves_batches_as_produced() {
    let broker = Tansu::start().await;
    let cluster = broker.cluster_with_topic("t", 1).await;
    let produced = produce_batches(&cluster, "t", 3, 7, 100).await;
    let records = fetch(&cluster, FetchParams::new("t", 0, 0)).await;
    let mut at = 0;
    for (base, bytes) in &produced {
        let served = &records[at..at + bytes.len()];
        assert_eq!(&served[..8], &base.to_be_bytes(), "base offset at {at}");
        assert_eq!(&served[8..], &bytes[8..], "batch at offset {base}");
        at += bytes.len();
    }
    assert_eq!(at, records.len());
}

/// The versions Tansu 0.6.0 advertises for the APIs walfetch uses.
#[tokio::test]
async fn tansu_advertised_versions() {
    let (_broker, cluster) = three_batches().await;
    let (connection, _) = cluster.leader_connection("t", 0).await.expect("leader");
    let v = connection.versions();
    let expected = [
        (ApiKey::ApiVersions, 4),
        (ApiKey::Metadata, 12),
        (ApiKey::Fetch, 17),
        (ApiKey::ListOffsets, 9),
        (ApiKey::Produce, 11),
        (ApiKey::CreateTopics, 7),
    ];
    for (api, max) in expected {
        assert_eq!(
            v.advertised(api),
            Some(VersionRange::new(0, max)),
            "{api:?}"
        );
    }
}
