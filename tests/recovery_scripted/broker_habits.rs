//! Broker habits: containing batches skipped, partitions omitted or starved, hurried fetches answered with nothing.

use crate::common::*;

#[tokio::test]
async fn a_broker_that_skips_the_containing_batch_still_gives_every_region_its_entries() {
    every_region_gets_its_entries_under(Habits::TANSU_0_6).await;
}

/// A broker that leaves partitions out of responses to fetches that may
/// not wait (as some do when they cannot read storage in time): the
/// recovery asks again with a wait, counts the omissions, and loses
/// nothing.
#[tokio::test]
async fn a_broker_that_omits_partitions_when_hurried_still_gives_every_region_its_entries() {
    let stats = every_region_gets_its_entries_under(Habits::OMITS_WHEN_HURRIED).await;
    assert!(stats.omitted > 0, "{stats:?}");
    let stats = every_region_gets_its_entries_under(Habits {
        omit_below_wait_ms: 50,
        ..Habits::TANSU_0_6
    })
    .await;
    assert!(stats.omitted > 0, "{stats:?}");
}

/// A broker that answers fetches that may not wait with no records and no
/// error below the high watermark (storage slower than the wait; Kafka
/// answers so when a tiered-storage read outlasts its
/// `remote.fetch.max.wait.ms`): the recovery asks again allowing a wait,
/// and loses nothing. Before, it asked again and again without one and
/// ended stalled.
#[tokio::test]
async fn a_broker_that_answers_hurried_fetches_with_no_records_still_gives_every_region_its_entries(
) {
    every_region_gets_its_entries_under(Habits::EMPTY_WHEN_HURRIED).await;
    every_region_gets_its_entries_under(Habits {
        empty_below_wait_ms: 50,
        ..Habits::TANSU_0_6
    })
    .await;
}

/// A broker that never answers for a partition, however long it may wait:
/// an error naming the habit, the partition and the broker, not a hang and
/// not a silent end.
#[tokio::test]
async fn a_broker_that_always_omits_a_partition_is_an_error_naming_the_habit() {
    let (broker, cluster, written, indexes) = setup(100, Compression::None).await;
    for node in broker.node_ids() {
        let habits = Habits {
            omit_below_wait_ms: 10_000,
            ..Habits::KAFKA
        };
        broker.set_habits(node, habits).unwrap();
    }
    let checkpoints = checkpoints(&written, 3);
    let started = std::time::Instant::now();
    let err = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("omits a partition it cannot read in time"),
        "{msg}"
    );
    assert!(msg.contains("10 Fetch responses in a row"), "{msg}");
    assert!(msg.contains("topic \"wal\" partition"), "{msg}");
    assert!(msg.contains(&broker.bootstrap()), "{msg}");
    // The waits: 10, 20, 40, ..., capped at 500 ms, about 3 s in all.
    assert!(started.elapsed() < Duration::from_secs(15), "{msg}");
}

/// Every region of every partition recovered under `habits`, with the
/// writer's index and offsets only; the last recovery's stats.
async fn every_region_gets_its_entries_under(habits: Habits) -> ReplayStats {
    let (broker, cluster, written, indexes) = setup(600, Compression::None).await;
    for node in broker.node_ids() {
        broker.set_habits(node, habits).unwrap();
    }
    let checkpoints = checkpoints(&written, 3);
    let want = expected(&written, &checkpoints);
    let offsets_only: Vec<WalIndex> = indexes.iter().map(WalIndex::without_hints).collect();
    let mut last = ReplayStats::default();
    for indexes in [&indexes, &offsets_only] {
        let (got, stats) = recover_with_defaults(&cluster, TOPIC, indexes, &checkpoints)
            .await
            .unwrap();
        assert!(got == want, "{habits:?}");
        last = stats;
    }
    last
}

/// A broker that spends a Fetch request's `max_bytes` on its first
/// partitions and answers the others with nothing (Tansu 0.6, one of its
/// habits here): a byte-minimal recovery whose whole-batch fetches share
/// requests, many in flight, still gives every region exactly its entries.
/// (Before `fetch_many` fetched a starved partition again on its own, the
/// replay bench's restart on Tansu failed as stalled now and then: each
/// empty answer was a fetch without progress.)
#[tokio::test]
async fn a_broker_that_spends_a_request_on_its_first_partitions_still_gives_every_region_its_entries(
) {
    let (broker, cluster, written, indexes) = setup(3000, Compression::None).await;
    for node in broker.node_ids() {
        broker.set_habits(node, Habits::TANSU_0_6).unwrap();
    }
    // The coldest region of each partition: its entries lie far apart, a
    // fetch each.
    let mut checkpoints = checkpoints(&written, 3);
    checkpoints.retain(|&(p, region), _| region == region_of(p, 3));
    let want = expected(&written, &checkpoints);
    let mut plan = PlanConfig::default();
    plan.cost.round_trip = Duration::ZERO;
    // Whole batches, sized to fit: fetches that may share a request.
    let options = ReplayOptions::default()
        .with_plan(plan)
        .with_max_in_flight(64)
        .with_cut_records(CutRecords::Never)
        // Kept as given: learning the link's round trip from the first
        // answer would merge the entries' fetches.
        .with_learn_link(false);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    assert!(got == want);
    assert!(stats.fetches > 20, "many fetches: {stats:?}");
}
