//! Failover on a real 3-node Apache Kafka KRaft cluster (started by the
//! harness): replication factor 3, `min.insync.replicas` 2, 4 partitions,
//! a region-pure lz4 WAL written by walfetch's writer. A partition leader
//! killed (SIGKILL) in the middle of a one-pass recovery, a broker killed
//! and restarted mid-recovery, a stale leader epoch fenced by Kafka, every
//! broker down, and a log truncated below indexed offsets (DeleteRecords).
//!
//! Each test starts a cluster of its own (kills must not leak between
//! tests), one test at a time (three JVMs per test on a small machine).
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use walfetch::cluster::{fetch_on, Cluster, ClusterConfig, FetchParams, RetryPolicy};
use walfetch::consumer::Recovery;
use walfetch::error::Error;
use walfetch::error_code::ErrorCode;
use walfetch_support::failover::{
    assert_exactly, client, leader_node, pull_until, recovery, start_cluster, total, write_wal,
};
use walfetch_support::recovery::{from_start, Written};

/// One test at a time: each starts three JVMs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Pulls `recovery` to its end, calling `at_quarter` once after a
/// quarter of `total` entries; what every region got.
async fn pull_slowly(
    recovery: &mut Recovery,
    total: usize,
    at_quarter: impl FnOnce(),
) -> Result<Written, Error> {
    let mut got = Written::new();
    pull_until(recovery, &mut got, total / 4).await?;
    at_quarter();
    pull_until(recovery, &mut got, usize::MAX).await?;
    Ok(got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_mid_recovery() {
    let _serial = SERIAL.lock().await;
    let mut kafka = start_cluster().await;
    let cluster = client(&kafka).await;
    let topic = "failover-kill";
    let (written, indexes) = write_wal(&cluster, topic, 1500, 1).await;
    let victim_partition = 2;
    let victim = leader_node(&kafka, &cluster, topic, victim_partition).await;
    let mut recovery = recovery(&cluster, topic, &indexes, &from_start(&written))
        .await
        .unwrap();
    let total = total(&written);
    let got = pull_slowly(&mut recovery, total, || kafka.kill(victim))
        .await
        .unwrap_or_else(|e| panic!("recovery across the kill: {e}"));
    assert!(!kafka.running().contains(&victim));
    let after = leader_node(&kafka, &cluster, topic, victim_partition).await;
    assert_ne!(after, victim, "a new leader took over");
    assert_exactly(&got, &written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restarted_mid_recovery() {
    let _serial = SERIAL.lock().await;
    let mut kafka = start_cluster().await;
    let cluster = client(&kafka).await;
    let topic = "failover-restart";
    let (written, indexes) = write_wal(&cluster, topic, 1500, 2).await;
    let victim = leader_node(&kafka, &cluster, topic, 0).await;
    let mut recovery = recovery(&cluster, topic, &indexes, &from_start(&written))
        .await
        .unwrap();
    let total = total(&written);
    let mut got = Written::new();
    // A quarter read, the leader killed; half read, it comes back while
    // the recovery is still open; then the rest.
    let across = |e: Error| panic!("recovery across the restart: {e}");
    let mut n = pull_until(&mut recovery, &mut got, total / 4)
        .await
        .unwrap_or_else(across);
    kafka.kill(victim);
    n += pull_until(&mut recovery, &mut got, total / 4)
        .await
        .unwrap_or_else(across);
    kafka.restart(victim).await.unwrap();
    assert!(kafka.running().contains(&victim));
    n += pull_until(&mut recovery, &mut got, usize::MAX)
        .await
        .unwrap_or_else(across);
    assert_eq!(n, total);
    assert_exactly(&got, &written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_leader_epoch_is_fenced_and_walfetch_refreshes() {
    let _serial = SERIAL.lock().await;
    let mut kafka = start_cluster().await;
    let cluster = client(&kafka).await;
    let topic = "failover-epoch";
    let (written, _) = write_wal(&cluster, topic, 200, 3).await;
    let before = cluster
        .metadata(Some(&[topic]))
        .await
        .unwrap()
        .leader(topic, 1)
        .unwrap();
    kafka.kill(kafka.index_of(before.broker_id).unwrap());
    // Wait for the new leader to be known (metadata of a live node).
    let fresh = Cluster::connect(kafka.cluster_config()).await.unwrap();
    let after = loop {
        let m = fresh.metadata(Some(&[topic])).await.unwrap();
        match m.leader(topic, 1) {
            Some(l) if l.broker_id != before.broker_id && l.broker_id >= 0 => break l,
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    assert!(
        after.leader_epoch > before.leader_epoch,
        "{before:?} -> {after:?}"
    );
    let connection = fresh.connection(&after.address).await.unwrap();
    let params = FetchParams::new(topic, 1, 0);
    let stale = fetch_on(
        &connection,
        &params,
        before.leader_epoch,
        after.topic_id,
        None,
    )
    .await
    .unwrap();
    assert_eq!(stale.error_code, ErrorCode::FencedLeaderEpoch, "{stale:?}");
    let current = fetch_on(
        &connection,
        &params,
        after.leader_epoch,
        after.topic_id,
        None,
    )
    .await
    .unwrap();
    assert_eq!(current.error_code, ErrorCode::None);
    // The client whose cache still names the old leader and epoch goes on
    // from the new leader.
    let fetched = cluster.fetch(&params).await.unwrap();
    assert_eq!(fetched.error_code, ErrorCode::None);
    let end = written[&1]
        .values()
        .flatten()
        .map(|(o, _)| *o)
        .max()
        .unwrap();
    assert_eq!(fetched.high_watermark, end + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_brokers_down_is_a_clear_error() {
    let _serial = SERIAL.lock().await;
    let mut kafka = start_cluster().await;
    let mut config: ClusterConfig = kafka.cluster_config();
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(4),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let topic = "failover-down";
    let (written, indexes) = write_wal(&cluster, topic, 600, 4).await;
    let mut recovery = recovery(&cluster, topic, &indexes, &from_start(&written))
        .await
        .unwrap();
    let total = total(&written);
    let error = pull_slowly(&mut recovery, total, || {
        for i in 0..3 {
            kafka.kill(i);
        }
    })
    .await
    .expect_err("no broker is left");
    let text = error.to_string();
    assert!(matches!(error, Error::Client(_)), "{error:?}");
    assert!(text.contains(topic) || text.contains("127.0.0.1"), "{text}");
    eprintln!("all brokers down: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_deleted_below_indexed_offsets_are_lost_offsets() {
    let _serial = SERIAL.lock().await;
    let kafka = start_cluster().await;
    let cluster = client(&kafka).await;
    let topic = "failover-deleted";
    let (written, indexes) = write_wal(&cluster, topic, 400, 5).await;
    let cut = 100;
    let leader = cluster.leader(topic, 3).await.unwrap();
    let connection = cluster.connection(&leader.address).await.unwrap();
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(topic)))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(3)
                .with_offset(cut)])]);
    let answer = connection.request(&request).await.unwrap().body;
    let p = &answer.topics[0].partitions[0];
    assert_eq!((p.error_code, p.low_watermark), (0, cut), "{answer:?}");
    let mut recovery = recovery(&cluster, topic, &indexes, &from_start(&written))
        .await
        .unwrap();
    let mut error = None;
    while let Some(entry) = recovery.next().await {
        if let Err(e) = entry {
            error = Some(e);
            break;
        }
    }
    match error.expect("the recovery fails") {
        Error::LostOffsets {
            topic: t,
            partition,
            region,
            offsets,
            ..
        } => {
            assert_eq!((t.as_str(), partition), (topic, 3));
            let want: Vec<i64> = written[&3][&region]
                .iter()
                .map(|(o, _)| *o)
                .filter(|&o| o < cut)
                .collect();
            assert_eq!(offsets, want, "region {region}");
        }
        other => panic!("not LostOffsets: {other:?}"),
    }
}
