//! Quota throttling (KIP-219): a broker answers at once with
//! `throttle_time_ms` and expects the client to hold back its next request
//! to it for that long. The scripted broker's `ThrottleTime` fault answers
//! so without muting the connection, so these tests see whether walfetch
//! waits: per broker (another broker is asked meanwhile), on the tokio
//! clock (paused: the times are exact), and counted in the replay's stats.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use tokio::time::Instant;
use walfetch::cluster::{Cluster, FetchParams};
use walfetch::consumer::{ReplayOptions, StrategyKind};
use walfetch::writer::WriterConfig;
use walfetch_support::recovery::{recover, write_partition, Written};
use walfetch_support::scripted::scripted_with_topic;
use walfetch_testkit::{Fault, FaultAction, ScriptedCluster};

const TOPIC: &str = "wal";
const THROTTLE: Duration = Duration::from_millis(700);

/// Two brokers; partition 0 led by broker 1, partition 1 by broker 2, each
/// with a few entries.
async fn setup() -> (
    ScriptedCluster,
    Arc<Cluster>,
    Written,
    Vec<walfetch::index::WalIndex>,
) {
    let (scripted, cluster) = scripted_with_topic(2, TOPIC, 2).await;
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..2 {
        let entries = (0..40u64).map(|n| (n % 3, Bytes::from(format!("p{p} n{n}"))));
        indexes.push(
            write_partition(&cluster, WriterConfig::new(TOPIC, p), entries, &mut written).await,
        );
    }
    (scripted, cluster, written, indexes)
}

#[tokio::test(start_paused = true)]
async fn a_throttled_broker_is_not_asked_again_before_its_throttle_ends() {
    let (scripted, cluster, _, _) = setup().await;
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(1)
            .then(FaultAction::ThrottleTime(THROTTLE)),
    );
    let fetch = |p| FetchParams::new(TOPIC, p, 0);
    let started = Instant::now();
    let first = cluster.fetch(&fetch(0)).await.unwrap();
    // Answered at once, with the throttle time.
    assert_eq!(first.throttle_time_ms, 700);
    assert_eq!(started.elapsed(), Duration::ZERO);
    // The other broker is not held back.
    cluster.fetch(&fetch(1)).await.unwrap();
    assert_eq!(started.elapsed(), Duration::ZERO);
    // Broker 1 is, until the throttle has passed.
    let before = scripted.stats(1).unwrap().requests_of(ApiKey::Fetch);
    let next = cluster.fetch(&fetch(0)).await.unwrap();
    assert_eq!(next.throttle_time_ms, 0);
    assert_eq!(started.elapsed(), THROTTLE);
    assert_eq!(
        scripted.stats(1).unwrap().requests_of(ApiKey::Fetch),
        before + 1
    );
    // Over: no more waiting.
    let again = Instant::now();
    cluster.fetch(&fetch(0)).await.unwrap();
    assert_eq!(again.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_throttle_on_metadata_holds_back_the_next_request_too() {
    let (scripted, cluster, _, _) = setup().await;
    scripted.script(Fault::on(ApiKey::Metadata).then(FaultAction::ThrottleTime(THROTTLE)));
    let started = Instant::now();
    cluster.metadata(None).await.unwrap();
    assert!(scripted.pending_faults().is_empty());
    assert_eq!(started.elapsed(), Duration::ZERO);
    // Whichever broker answered is held back, the other not.
    cluster.fetch(&FetchParams::new(TOPIC, 0, 0)).await.unwrap();
    cluster.fetch(&FetchParams::new(TOPIC, 1, 0)).await.unwrap();
    assert_eq!(started.elapsed(), THROTTLE);
}

#[tokio::test]
async fn a_replay_waits_out_throttles_and_counts_them() {
    let (scripted, cluster, written, indexes) = setup().await;
    let checkpoints = [((0, 1), 0), ((1, 2), 0)].into_iter().collect();
    let throttle = Duration::from_millis(150);
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(1)
            .times(2)
            .then(FaultAction::ThrottleTime(throttle)),
    );
    let started = std::time::Instant::now();
    let options = ReplayOptions::default().with_strategy(StrategyKind::Scan);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(scripted.pending_faults().is_empty(), "both throttles fired");
    // Entries exact.
    for (p, region) in checkpoints.keys() {
        assert_eq!(
            got[p][region], written[p][region],
            "partition {p} region {region}"
        );
    }
    // Both throttled answers counted once each (the first answered the
    // fetch confirming the log's end, before the replay proper), and the
    // replay's next request to broker 1 waited the first out.
    assert_eq!(stats.throttle_time, 2 * throttle, "{stats:?}");
    assert!(elapsed >= throttle, "{elapsed:?}");
}

/// A throttled answer to a Produce holds back the writer's next request to
/// that broker until the throttle has passed (it did not: the writer's
/// Produce answers were not looked at for it).
#[tokio::test(start_paused = true)]
async fn a_writer_throttled_by_its_broker_waits_before_its_next_produce() {
    use walfetch::writer::{WalEntry, WalWriter};

    let (scripted, cluster, _, _) = setup().await;
    let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    let leader = scripted.leader(TOPIC, 0).unwrap().node_id;
    scripted.script(
        Fault::on(ApiKey::Produce)
            .broker(leader)
            .then(FaultAction::ThrottleTime(THROTTLE)),
    );
    let before = scripted.stats(leader).unwrap().requests_of(ApiKey::Produce);
    let started = Instant::now();
    let first = writer.append(WalEntry::new(1, "one")).await.unwrap();
    first.await.unwrap();
    let throttled_at = started.elapsed();
    assert!(throttled_at < THROTTLE, "{throttled_at:?}");
    let second = writer.append(WalEntry::new(1, "two")).await.unwrap();
    second.await.unwrap();
    assert!(
        started.elapsed() >= THROTTLE,
        "the next Produce went after {:?}, within the {THROTTLE:?} throttle",
        started.elapsed()
    );
    assert_eq!(
        scripted.stats(leader).unwrap().requests_of(ApiKey::Produce),
        before + 2
    );
    writer.close().await.unwrap();
}
