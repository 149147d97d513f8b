//! Fetching from the closest replica (KIP-392) against the scripted
//! broker: three brokers in racks a, b and c, every partition led by the
//! broker in rack a. A client in rack b is pointed at broker 2 by the
//! leader and reads from it; a replay from the follower yields exactly the
//! entries, and the brokers' counters show who served the fetches. A
//! follower that fails a fetch sends the partition back to its leader.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use walfetch::cluster::{Cluster, ClusterConfig, FetchParams};
use walfetch::consumer::{ReplayOptions, StrategyKind};
use walfetch::error_code::ErrorCode;
use walfetch::index::{RegionId, WalIndex};
use walfetch::writer::WriterConfig;
use walfetch_support::recovery::{recover, recover_with_defaults, write_partition, Written};
use walfetch_testkit::{Fault, FaultAction, ScriptedCluster};

const TOPIC: &str = "wal";
const PARTITIONS: i32 = 2;

/// The scripted cluster (racks a, b, c; broker 1 leads every partition),
/// a client in `rack`, what was written and the writers' indexes.
async fn setup(rack: Option<&str>) -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
    let scripted = ScriptedCluster::builder()
        .brokers(3)
        .racks(["a", "b", "c"])
        .start()
        .await
        .unwrap();
    scripted.create_topic(TOPIC, PARTITIONS).unwrap();
    for p in 0..PARTITIONS {
        if scripted.leader(TOPIC, p).unwrap().node_id != 1 {
            scripted.move_leader(TOPIC, p, 1).unwrap();
        }
    }
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.client_rack = rack.map(str::to_owned);
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut writer = WriterConfig::new(TOPIC, p);
        writer.max_batch_bytes = 1 << 10;
        let entries =
            (0..300u64).map(|n| (n % 5, Bytes::from(format!("p{p} n{n} {}", "x".repeat(40)))));
        indexes.push(write_partition(&cluster, writer, entries, &mut written).await);
    }
    scripted.reset_stats();
    (scripted, cluster, written, indexes)
}

fn fetches(scripted: &ScriptedCluster, node: i32) -> u64 {
    scripted.stats(node).unwrap().requests_of(ApiKey::Fetch)
}

/// Every region of every partition, from offset 0 for even regions and
/// from the middle for odd ones.
fn checkpoints(written: &Written) -> BTreeMap<(i32, RegionId), i64> {
    written
        .iter()
        .flat_map(|(&p, regions)| {
            regions.iter().map(move |(&r, entries)| {
                (
                    (p, r),
                    if r % 2 == 0 {
                        0
                    } else {
                        entries[entries.len() / 2].0
                    },
                )
            })
        })
        .collect()
}

/// What `checkpoints` must yield.
fn expected(written: &Written, checkpoints: &BTreeMap<(i32, RegionId), i64>) -> Written {
    let mut want = Written::new();
    for (&(p, r), &from) in checkpoints {
        let entries = written[&p][&r]
            .iter()
            .filter(|(o, _)| *o >= from)
            .cloned()
            .collect();
        want.entry(p).or_default().insert(r, entries);
    }
    want
}

#[tokio::test]
async fn a_replay_reads_from_the_follower_in_the_clients_rack() {
    let (scripted, cluster, written, indexes) = setup(Some("b")).await;
    let checkpoints = checkpoints(&written);
    let want = expected(&written, &checkpoints);
    for strategy in [StrategyKind::Index, StrategyKind::Scan] {
        scripted.reset_stats();
        let options = ReplayOptions::default().with_strategy(strategy);
        let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
            .await
            .unwrap();
        assert!(got == want, "{strategy:?}: entries differ");
        let (leader, follower, other) = (
            fetches(&scripted, 1),
            fetches(&scripted, 2),
            fetches(&scripted, 3),
        );
        // The leader answers at most the first fetch of each partition
        // (with the replica to use) before the client knows; the replica
        // in rack b serves the rest; the one in rack c none.
        assert!(
            leader <= u64::from(PARTITIONS.unsigned_abs()),
            "{strategy:?}: leader served {leader}"
        );
        assert!(
            follower >= stats.requests - leader,
            "{strategy:?}: follower served {follower} of {}",
            stats.requests
        );
        assert!(follower > 0, "{strategy:?}");
        assert_eq!(other, 0, "{strategy:?}");
    }
}

#[tokio::test]
async fn without_a_rack_every_fetch_goes_to_the_leader() {
    let (scripted, cluster, written, indexes) = setup(None).await;
    let checkpoints = checkpoints(&written);
    let (got, stats) = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
        .await
        .unwrap();
    assert!(got == expected(&written, &checkpoints));
    assert_eq!(fetches(&scripted, 1), stats.requests);
    assert_eq!((fetches(&scripted, 2), fetches(&scripted, 3)), (0, 0));
}

/// A client in the leader's own rack stays with the leader.
#[tokio::test]
async fn a_client_in_the_leaders_rack_stays_with_the_leader() {
    let (scripted, cluster, _, _) = setup(Some("a")).await;
    for _ in 0..3 {
        let fetched = cluster.fetch(&FetchParams::new(TOPIC, 0, 0)).await.unwrap();
        assert!(!fetched.records.is_empty());
        assert_eq!(fetched.preferred_read_replica, -1);
    }
    assert_eq!((fetches(&scripted, 1), fetches(&scripted, 2)), (3, 0));
}

/// The leader's redirect is followed within one `fetch`; a follower that
/// fails (each error in turn, and a lost connection) sends the fetch back
/// to the leader at once, which points at the follower again.
#[tokio::test]
async fn a_failing_follower_sends_the_partition_back_to_the_leader() {
    let (scripted, cluster, written, _) = setup(Some("b")).await;
    let first = written[&0]
        .values()
        .flatten()
        .map(|(o, _)| *o)
        .min()
        .unwrap();
    let params = FetchParams::new(TOPIC, 0, 0);
    let fetch = || cluster.fetch(&params);
    let fetched = fetch().await.unwrap();
    assert_eq!(fetched.broker, scripted.addr(2).unwrap().to_string());
    assert!(batch_base(&fetched.records) <= first);
    assert_eq!((fetches(&scripted, 1), fetches(&scripted, 2)), (1, 1));

    let faults = [
        FaultAction::PartitionError(ErrorCode::NotLeaderOrFollower.code()),
        FaultAction::PartitionError(ErrorCode::OffsetOutOfRange.code()),
        FaultAction::PartitionError(ErrorCode::FencedLeaderEpoch.code()),
        FaultAction::CutBeforeResponse,
    ];
    for action in faults {
        scripted.reset_stats();
        scripted.script(Fault::on(ApiKey::Fetch).broker(2).then(action.clone()));
        let fetched = fetch().await.unwrap_or_else(|e| panic!("{action:?}: {e}"));
        assert!(scripted.pending_faults().is_empty(), "{action:?}");
        // Follower (failed), leader (answered with the replica again and
        // no records), follower (answered).
        assert_eq!(
            (fetches(&scripted, 2), fetches(&scripted, 1)),
            (2, 1),
            "{action:?}"
        );
        assert_eq!(
            fetched.broker,
            scripted.addr(2).unwrap().to_string(),
            "{action:?}"
        );
        assert!(!fetched.records.is_empty(), "{action:?}");
    }
}

/// The base offset of the first batch of `records`.
fn batch_base(records: &Bytes) -> i64 {
    i64::from_be_bytes(records[..8].try_into().unwrap())
}

/// Partitions sharing a request follow the same rules: the leader's
/// redirect sends both to the replica, where they share a request again;
/// a partition the replica fails goes back to the leader, alone, and
/// returns to the replica; the other is answered by the shared request.
#[tokio::test]
async fn shared_requests_follow_the_replica_and_fall_back_per_partition() {
    let (scripted, cluster, _, _) = setup(Some("b")).await;
    let metadata = cluster.cached_metadata();
    assert_eq!(
        metadata.brokers[&2].rack.as_deref(),
        Some("b"),
        "Metadata gives racks"
    );
    let params: Vec<FetchParams> = (0..PARTITIONS)
        .map(|p| FetchParams::new(TOPIC, p, 0).with_max_bytes(1 << 10))
        .collect();
    let follower = scripted.addr(2).unwrap().to_string();
    // One request to the leader: both redirected, each fetched alone.
    let many = cluster.fetch_many(&params).await;
    assert_eq!((fetches(&scripted, 1), fetches(&scripted, 2)), (1, 2));
    for answer in &many.partitions {
        let fetched = answer.as_ref().unwrap();
        assert_eq!(fetched.broker, follower);
        assert!(!fetched.records.is_empty());
    }
    // Now shared on the replica; partition 0 fails there.
    scripted.reset_stats();
    scripted.script(Fault::on(ApiKey::Fetch).broker(2).partition(0).then(
        FaultAction::PartitionError(ErrorCode::OffsetOutOfRange.code()),
    ));
    let many = cluster.fetch_many(&params).await;
    assert!(scripted.pending_faults().is_empty());
    // Replica (shared, partition 0 failed), leader (partition 0 alone:
    // redirected again), replica (partition 0 alone).
    assert_eq!((fetches(&scripted, 2), fetches(&scripted, 1)), (2, 1));
    for (p, answer) in many.partitions.iter().enumerate() {
        let fetched = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("partition {p}: {e}"));
        assert_eq!(fetched.broker, follower, "partition {p}");
        assert!(!fetched.records.is_empty(), "partition {p}");
    }
}
