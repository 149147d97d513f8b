//! Leadership moving while walfetch works, on the scripted multi-broker
//! cluster (Kafka's rules: the old leader answers
//! `NOT_LEADER_OR_FOLLOWER`, a stale leader epoch is fenced): a recovery
//! of many partitions led by different brokers, and the WAL writer with
//! five requests in flight, lose, duplicate and reorder nothing; a flood
//! of leaderless answers does not become a flood of Metadata requests.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams, RetryPolicy};
use walfetch::consumer::ReplayOptions;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};
use walfetch_support::partition_log::read_log;
use walfetch_support::recovery::{
    checkpoints, expected, from_start, recover, start_recovery, time_to_recover_partition,
    write_interleaved_partitions,
};
use walfetch_support::wal_log::check_written;
use walfetch_testkit::{Fault, FaultAction, ScriptedCluster};

const TOPIC: &str = "wal";

/// A cluster client of `scripted` whose retries end after `deadline`.
async fn client(scripted: &ScriptedCluster, deadline: Duration) -> Arc<Cluster> {
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline,
        ..RetryPolicy::default()
    };
    Arc::new(Cluster::connect(config).await.unwrap())
}

/// Moves the leadership of a random partition of `partitions` to a random
/// broker every `every`, until `stop` is set.
fn keep_moving_leaders(
    scripted: Arc<ScriptedCluster>,
    partitions: i32,
    every: Duration,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut rng = StdRng::seed_from_u64(seed);
        let nodes = scripted.node_ids();
        let mut moves = 0;
        while !stop.load(Ordering::Relaxed) {
            let p = rng.random_range(0..partitions);
            let to = nodes[rng.random_range(0..nodes.len())];
            scripted.move_leader(TOPIC, p, to).unwrap();
            moves += 1;
            tokio::time::sleep(every).await;
        }
        moves
    })
}

/// Nine partitions led round robin by three brokers, each written by its
/// own writer, recovered in one pass while leaders keep moving (and some
/// move while a fetch is on its way to them), one broker slow: every
/// region gets exactly its entries, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_of_many_partitions_gets_every_entry_while_leaders_move() {
    const PARTITIONS: i32 = 9;
    let scripted = Arc::new(ScriptedCluster::start(3).await.unwrap());
    scripted.create_topic(TOPIC, PARTITIONS).unwrap();
    let cluster = client(&scripted, Duration::from_secs(20)).await;
    let (written, indexes) =
        write_interleaved_partitions(&cluster, TOPIC, PARTITIONS, 2 << 10, |p| {
            (0..400).map(move |n| {
                let payload = format!("p{p} n{n} {}", "z".repeat(n * 31 % 250));
                (
                    p as RegionId * 100 + n as RegionId % 4,
                    Bytes::from(payload),
                )
            })
        })
        .await;
    let checkpoints = checkpoints(&written, 11);
    let want = expected(&written, &checkpoints);
    // Broker 3 answers every fetch 20 ms late; some fetches find their
    // partition's leadership moved as they arrive.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(3)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_millis(20))),
    );
    for (p, to) in [(0, 2), (4, 3), (8, 1)] {
        scripted.script(
            Fault::on(ApiKey::Fetch)
                .partition(p)
                .then(FaultAction::MoveLeader { to }),
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mover = keep_moving_leaders(
        Arc::clone(&scripted),
        PARTITIONS,
        Duration::from_millis(3),
        Arc::clone(&stop),
        7,
    );
    // Small fetches, many of them, so leadership moves between them.
    let plan = walfetch::plan::PlanConfig {
        max_fetch_bytes: 8 << 10,
        ..walfetch::plan::PlanConfig::default()
    };
    let options = ReplayOptions::default().with_plan(plan);
    let result = recover(&cluster, TOPIC, &indexes, &checkpoints, options).await;
    stop.store(true, Ordering::Relaxed);
    let moves = mover.await.unwrap();
    let (got, _stats) = result.unwrap();
    assert!(moves > 10, "only {moves} moves");
    for (p, regions) in &want {
        for (region, entries) in regions {
            assert!(
                got[p][region] == *entries,
                "partition {p} region {region}: {} entries, {} wanted",
                got[p][region].len(),
                entries.len()
            );
        }
    }
}

/// The writer, five requests in flight, while the partition's leadership
/// keeps moving between three brokers (each move fails the requests in
/// flight at the old leader with `NOT_LEADER_OR_FOLLOWER`, and some move
/// as a Produce arrives): every entry is written once, at the offset its
/// append returned, regions in append order, the index exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_loses_duplicates_and_reorders_nothing_while_the_leader_moves() {
    let scripted = Arc::new(ScriptedCluster::start(3).await.unwrap());
    scripted.create_topic(TOPIC, 1).unwrap();
    let cluster = client(&scripted, Duration::from_secs(20)).await;
    for to in [2, 3, 1, 3] {
        scripted.script(
            Fault::on(ApiKey::Produce)
                .times(1)
                .then(FaultAction::MoveLeader { to }),
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mover = keep_moving_leaders(
        Arc::clone(&scripted),
        1,
        Duration::from_millis(4),
        Arc::clone(&stop),
        3,
    );
    let config = WriterConfig::new(TOPIC, 0)
        .with_mode(WriterMode::Clustered)
        .with_max_batch_bytes(1 << 10)
        .with_linger(Duration::from_millis(1));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut pending = Vec::new();
    for n in 0..3000usize {
        let region = (n % 7) as RegionId;
        let payload = Bytes::from(format!(
            "entry {n} of region {region} {}",
            "y".repeat(n % 90)
        ));
        let appended = writer
            .append(WalEntry::new(region, payload.clone()))
            .await
            .unwrap();
        pending.push((region, payload, appended));
        if n % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let mut appended = Vec::new();
    for (region, payload, ack) in pending {
        let offset = ack.await.unwrap_or_else(|e| panic!("not written: {e}"));
        appended.push((region, payload, offset));
    }
    let index: WalIndex = writer.close().await.unwrap();
    stop.store(true, Ordering::Relaxed);
    let moves = mover.await.unwrap();
    assert!(moves > 10, "only {moves} moves");
    let log = read_log(&cluster, TOPIC, 0).await;
    check_written(&log, &appended, &index, true);
}

/// Requests to the partitions' leaders while metadata names no leader
/// (an election under way, `LEADER_NOT_AVAILABLE`): each operation retries
/// with its backoff, but the client reads Metadata no more often than its
/// first backoff, whatever the number of partitions waiting, as Kafka
/// clients do (`retry.backoff.ms`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_without_a_leader_do_not_flood_the_cluster_with_metadata_requests() {
    const PARTITIONS: i32 = 16;
    let scripted = ScriptedCluster::start(2).await.unwrap();
    scripted.create_topic(TOPIC, PARTITIONS).unwrap();
    let cluster = client(&scripted, Duration::from_secs(10)).await;
    for p in 0..PARTITIONS {
        let batch = walfetch::codec::BatchBuilder::new(0)
            .encode(&[walfetch::codec::NewRecord::value(0, format!("p{p}"))])
            .unwrap();
        scripted.append(TOPIC, p, batch.bytes).unwrap();
    }
    // Every partition is known, then their leaders go.
    cluster.metadata(Some(&[TOPIC])).await.unwrap();
    cluster.invalidate(TOPIC);
    let leaderless = Duration::from_millis(1000);
    let fault = Fault::on(ApiKey::Metadata).then(FaultAction::PartitionError(5));
    let during = metadata_requests_while(&scripted, &cluster, PARTITIONS, fault, leaderless).await;
    // One a first backoff (50 ms) at most, and a few in flight at the edges.
    let bound = (leaderless.as_millis() / 50) as u64 + 4;
    assert!(
        during <= bound,
        "{during} Metadata requests in {leaderless:?} for {PARTITIONS} leaderless partitions \
         (at most {bound} wanted)"
    );

    // Then every fetch is answered NOT_LEADER_OR_FOLLOWER for a second
    // (a broker whose metadata lags names the old leader): each answer
    // drops the topic's metadata, and reading it again is paced the same.
    let fault = Fault::on(ApiKey::Fetch).then(FaultAction::PartitionError(6));
    let during = metadata_requests_while(&scripted, &cluster, PARTITIONS, fault, leaderless).await;
    assert!(
        during <= bound,
        "{during} Metadata requests in {leaderless:?} of NOT_LEADER_OR_FOLLOWER answers to \
         {PARTITIONS} partitions (at most {bound} wanted)"
    );
}

/// Fetches each of `partitions` partitions while `fault` meets every
/// request of its kind about [`TOPIC`], for `lasting`, then lifts it; how
/// many Metadata requests the brokers received meanwhile. Every fetch then
/// returns its partition's records.
async fn metadata_requests_while(
    scripted: &ScriptedCluster,
    cluster: &Arc<Cluster>,
    partitions: i32,
    fault: Fault,
    lasting: Duration,
) -> u64 {
    scripted.script(fault.topic(TOPIC).times(u32::MAX));
    scripted.reset_stats();
    let fetches: Vec<_> = (0..partitions)
        .map(|p| {
            let cluster = Arc::clone(cluster);
            tokio::spawn(async move { cluster.fetch(&FetchParams::new(TOPIC, p, 0)).await })
        })
        .collect();
    tokio::time::sleep(lasting).await;
    let during = scripted
        .node_ids()
        .iter()
        .map(|&n| scripted.stats(n).unwrap().requests_of(ApiKey::Metadata))
        .sum();
    scripted.clear_faults();
    for fetch in fetches {
        assert!(!fetch.await.unwrap().unwrap().records.is_empty());
    }
    during
}

/// Every append of `results` succeeded, and partition 0 holds each entry
/// once, in order, where the writer said, with `index` exact.
async fn every_entry_written_once(
    cluster: &Cluster,
    results: Vec<(RegionId, Bytes, Result<i64, walfetch::error::Error>)>,
    index: &WalIndex,
) {
    let appended: Vec<(RegionId, Bytes, i64)> = results
        .into_iter()
        .map(|(r, p, o)| (r, p, o.unwrap_or_else(|e| panic!("entry not written: {e}"))))
        .collect();
    let log = read_log(cluster, TOPIC, 0).await;
    check_written(&log, &appended, index, true);
}

/// Appends `count` entries of three regions and waits for each; what each
/// append returned.
async fn append_and_wait(
    writer: &WalWriter,
    from: usize,
    count: usize,
) -> Vec<(RegionId, Bytes, Result<i64, walfetch::error::Error>)> {
    let mut pending = Vec::new();
    for n in from..from + count {
        let region = (n % 3) as RegionId;
        let payload = Bytes::from(format!("entry {n} of region {region}"));
        let ack = writer
            .append(WalEntry::new(region, payload.clone()))
            .await
            .unwrap();
        pending.push((region, payload, ack));
    }
    let mut out = Vec::new();
    for (region, payload, ack) in pending {
        out.push((region, payload, ack.await));
    }
    out
}

/// The leader's broker crashes; the cluster names it the leader for a
/// while (the controller has not noticed), then elects another. The
/// writer, refused by the dead broker's address, must look the leader up
/// again, and write to the new one within its deadline; it kept the dead
/// address from its cache until the deadline ran out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_follows_a_new_leader_elected_after_its_leader_crashed() {
    let scripted = Arc::new(ScriptedCluster::start(3).await.unwrap());
    scripted.create_topic(TOPIC, 1).unwrap();
    // Bootstrap from broker 2, which stays up.
    let mut config = ClusterConfig::new([scripted.addr(2).unwrap().to_string()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(4),
        ..RetryPolicy::default()
    };
    config.produce_timeout = Duration::from_millis(500);
    config.connection.request_timeout = Duration::from_millis(500);
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(1));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut results = append_and_wait(&writer, 0, 50).await;
    assert_eq!(scripted.leader(TOPIC, 0).unwrap().node_id, 1);
    // Broker 1 appends the next batches but answers them 30 ms late, and
    // crashes with some in flight: their answers are lost.
    scripted.script(
        Fault::on(ApiKey::Produce)
            .broker(1)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_millis(30))),
    );
    let elect = {
        let scripted = Arc::clone(&scripted);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            scripted.stop_broker(1).await.unwrap();
            tokio::time::sleep(Duration::from_millis(600)).await;
            scripted.move_leader(TOPIC, 0, 2).unwrap();
        })
    };
    scripted.reset_stats();
    results.extend(append_and_wait(&writer, 50, 300).await);
    let produced = |node| scripted.stats(node).unwrap().requests_of(ApiKey::Produce);
    assert!(
        produced(1) > 0 && produced(2) > 0,
        "no batch in flight at the crash ({} Produce requests to broker 1, {} to broker 2)",
        produced(1),
        produced(2)
    );
    elect.await.unwrap();
    let index = writer.close().await.unwrap();
    every_entry_written_once(&cluster, results, &index).await;
}

/// Every broker crashes during a recovery of partitions led by all of
/// them, and comes back a moment later, one of them at another address,
/// which metadata then gives: the recovery resumes and every region gets
/// exactly its entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_resumes_after_every_broker_was_briefly_down() {
    const PARTITIONS: i32 = 6;
    let scripted = Arc::new(ScriptedCluster::start(3).await.unwrap());
    scripted.create_topic(TOPIC, PARTITIONS).unwrap();
    let bootstrap = scripted.addrs().into_iter().map(|(_, a)| a.to_string());
    let mut config = ClusterConfig::new(bootstrap);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let (written, indexes) =
        write_interleaved_partitions(&cluster, TOPIC, PARTITIONS, 2 << 10, |p| {
            (0..600).map(move |n| {
                let payload = format!("p{p} n{n} {}", "q".repeat(n * 17 % 200));
                (p as RegionId * 10 + n as RegionId % 3, Bytes::from(payload))
            })
        })
        .await;
    let checkpoints = checkpoints(&written, 5);
    let want = expected(&written, &checkpoints);
    // Slow fetches, so the crash comes mid-recovery.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_millis(20))),
    );
    let plan = walfetch::plan::PlanConfig {
        max_fetch_bytes: 4 << 10,
        ..walfetch::plan::PlanConfig::default()
    };
    let options = ReplayOptions::default().with_plan(plan);
    let crash = {
        let scripted = Arc::clone(&scripted);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            for node in scripted.node_ids() {
                scripted.stop_broker(node).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(400)).await;
            scripted.start_broker(1).await.unwrap();
            scripted.restart_broker_elsewhere(2).await.unwrap();
            scripted.start_broker(3).await.unwrap();
        })
    };
    let result = recover(&cluster, TOPIC, &indexes, &checkpoints, options).await;
    assert!(
        crash.is_finished(),
        "the recovery ended before the brokers were back: no crash in the middle of it"
    );
    crash.await.unwrap();
    let (got, stats) = result.unwrap();
    assert!(got == want, "regions differ");
    assert!(stats.fetches > 20, "{} fetches", stats.fetches);
}

/// The leader's broker comes back at another address (a new host or
/// port), which metadata then gives, while the writer is idle: the
/// writer's next batch, refused at the old address, goes to the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_follows_its_leader_to_a_new_address() {
    let scripted = ScriptedCluster::start(2).await.unwrap();
    scripted.create_topic(TOPIC, 1).unwrap();
    let mut config = ClusterConfig::new([scripted.addr(2).unwrap().to_string()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(3),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let config = WriterConfig::new(TOPIC, 0).with_linger(Duration::from_millis(1));
    let writer = WalWriter::new(Arc::clone(&cluster), config);
    let mut results = append_and_wait(&writer, 0, 20).await;
    let moved = scripted.restart_broker_elsewhere(1).await.unwrap();
    assert_eq!(scripted.leader(TOPIC, 0).unwrap().node_id, 1);
    results.extend(append_and_wait(&writer, 20, 20).await);
    let index = writer.close().await.unwrap();
    every_entry_written_once(&cluster, results, &index).await;
    assert!(
        cluster.stats().iter().any(|(a, _)| *a == moved.to_string()),
        "nothing went to the new address {moved}"
    );
}

/// A partition's leader crashes during a recovery whose other partition
/// is led by a slow broker, and another is elected: reading metadata again
/// went to the only broker with a connection open, the slow one, on the
/// connection its slow fetch was on, and waited behind that fetch (a broker
/// serves a connection's requests in order): the healthy partition waited
/// for the slow broker. Metadata now goes on an idle connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_crashes_a_slow_broker_still_holds_back_no_other_partition() {
    let scripted = Arc::new(ScriptedCluster::start(3).await.unwrap());
    scripted.create_topic(TOPIC, 2).unwrap();
    let slow = scripted.leader(TOPIC, 1).unwrap().node_id;
    let crashing = scripted.leader(TOPIC, 0).unwrap().node_id;
    let mut config = ClusterConfig::new([scripted.addr(slow).unwrap().to_string()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(20),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let (written, indexes) = write_interleaved_partitions(&cluster, TOPIC, 2, 4 << 10, |p| {
        (0..300).map(move |n| {
            let payload = format!("p{p} n{n} {}", "z".repeat(200));
            (
                p as RegionId * 100 + n as RegionId % 3,
                Bytes::from(payload),
            )
        })
    })
    .await;
    let checkpoints = from_start(&written);
    let options = ReplayOptions::default();
    let mut recovery = start_recovery(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(slow)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_secs(3))),
    );
    scripted.stop_broker(crashing).await.unwrap();
    let elected = scripted
        .node_ids()
        .into_iter()
        .find(|n| ![slow, crashing].contains(n))
        .unwrap();
    scripted.move_leader(TOPIC, 0, elected).unwrap();
    let done = time_to_recover_partition(&mut recovery, &written, 0).await;
    assert!(
        done < Duration::from_millis(1500),
        "partition 0, whose new leader is healthy, took {done:?}: held back by partition 1's \
         slow broker"
    );
}
