//! Recovering many regions over many partitions in one pass, against the
//! scripted broker that follows Kafka's fetch rules: every region gets
//! exactly its entries from its checkpoint on, in order, nothing of other
//! regions, with the index complete or with `last_index` halfway (the rest
//! read once by a scan split by region), and one pass reads no more than
//! replaying the regions one by one.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use support::recovery::{
    checkpoints, expected, from_start, halfway, recover, start_recovery, write_partition, Written,
};
use walfetch::cluster::{Cluster, ClusterConfig, RetryPolicy};
use walfetch::codec::Compression;
use walfetch::consumer::{
    Consumer, CutRecords, Recovery, ReplayOptions, ReplayRange, ReplayStats, StrategyKind,
};
use walfetch::index::{RegionId, WalIndex};
use walfetch::plan::{CostModel, PlanConfig};
use walfetch::writer::{WalEntry, WalWriter, WriterConfig, WriterMode};
use walfetch_testkit::{Fault, FaultAction, Habits, ScriptedCluster};

const TOPIC: &str = "wal";
const PARTITIONS: i32 = 3;
const REGIONS_PER_PARTITION: u64 = 6;

/// The regions of partition `p`: distinct over partitions, as region ids
/// of one node are.
fn region_of(p: i32, k: u64) -> RegionId {
    u64::try_from(p).unwrap() * 100 + k
}

/// A scripted cluster with `PARTITIONS` partitions, each written by its
/// own WAL writer with `entries` entries of skewed regions, and the
/// writers' indexes.
async fn setup(
    entries_per_partition: usize,
    compression: Compression,
) -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, PARTITIONS).expect("topic");
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline: Duration::from_secs(20),
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.expect("connect"));
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..PARTITIONS {
        let mut writer_config = WriterConfig::new(TOPIC, p);
        writer_config.compression = compression;
        writer_config.max_batch_bytes = 4 << 10;
        // Regions mixed in every batch: a cold region's entries lie far
        // apart, many small fetches (a clustered layout needs fewer).
        writer_config.mode = WriterMode::Interleaved;
        let mut entries = Vec::new();
        for n in 0..entries_per_partition {
            // Skewed: low regions are hot.
            let k = rng
                .random_range(0..REGIONS_PER_PARTITION)
                .min(rng.random_range(0..REGIONS_PER_PARTITION));
            let region = region_of(p, k);
            let len = rng.random_range(0..600);
            let payload = Bytes::from(format!("p{p} r{region} n{n} {}", "z".repeat(len)));
            entries.push((region, payload));
        }
        indexes.push(write_partition(&cluster, writer_config, entries, &mut written).await);
    }
    (scripted, cluster, written, indexes)
}

#[tokio::test]
async fn one_pass_recovers_every_region_of_every_partition_exactly() {
    for compression in [Compression::None, Compression::Lz4] {
        let (_broker, cluster, written, full) = setup(900, compression).await;
        let halfway = halfway(&full, &written);
        let checkpoints = checkpoints(&written, 7);
        let want = expected(&written, &checkpoints);
        for (name, indexes) in [("complete", &full), ("last_index halfway", &halfway)] {
            // The index strategy also with the link learned as it goes.
            for (strategy, learn) in [
                (StrategyKind::Index, false),
                (StrategyKind::Index, true),
                (StrategyKind::Estimate, false),
                (StrategyKind::Scan, false),
            ] {
                let options = ReplayOptions::default()
                    .with_strategy(strategy)
                    .with_learn_link(learn);
                let (got, stats) = recover(&cluster, TOPIC, indexes, &checkpoints, options)
                    .await
                    .unwrap_or_else(|e| panic!("{compression:?} {name} {strategy:?}: {e}"));
                assert!(
                    got == want,
                    "{compression:?} {name} {strategy:?}: regions differ"
                );
                let total: usize = want.values().flat_map(|r| r.values()).map(Vec::len).sum();
                assert_eq!(
                    stats.entries + stats.tail_records,
                    total as u64,
                    "{compression:?} {name} {strategy:?}: counted"
                );
                for regions in want.values() {
                    for (region, entries) in regions {
                        let s = &stats.regions[region];
                        assert_eq!(s.entries + s.tail_records, entries.len() as u64);
                    }
                }
            }
        }
    }
}

#[tokio::test]
async fn one_pass_reads_no_more_than_region_by_region() {
    let (_broker, cluster, written, indexes) = setup(1200, Compression::None).await;
    let checkpoints = checkpoints(&written, 11);
    let (_, one_pass) = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    let mut by_region = ReplayStats::default();
    for (&(p, region), &from) in &checkpoints {
        let range = ReplayRange {
            topic: TOPIC.into(),
            partition: p,
            region,
            from,
            to: None,
        };
        let index = &indexes[usize::try_from(p).unwrap()];
        let mut consumer =
            Consumer::new(Arc::clone(&cluster), index, range, ReplayOptions::default())
                .await
                .unwrap();
        while let Some(record) = consumer.next().await {
            record.unwrap();
        }
        by_region.add(&consumer.stats());
    }
    assert_eq!(one_pass.entries, by_region.entries);
    assert_eq!(
        by_region.requests, by_region.fetches,
        "one partition's fetches never share a request"
    );
    assert!(
        one_pass.requests < one_pass.fetches,
        "partitions on one broker share requests: {} requests for {} fetches",
        one_pass.requests,
        one_pass.fetches
    );
    assert!(
        one_pass.records_bytes <= by_region.records_bytes,
        "one pass {} bytes, region by region {}",
        one_pass.records_bytes,
        by_region.records_bytes
    );
    assert!(
        one_pass.fetches < by_region.fetches,
        "one pass {} fetches, region by region {}",
        one_pass.fetches,
        by_region.fetches
    );
}

/// Every region of `written` from offset 0.
fn from_the_start(written: &Written) -> BTreeMap<(i32, RegionId), i64> {
    written
        .iter()
        .flat_map(|(&p, regions)| regions.keys().map(move |&region| ((p, region), 0)))
        .collect()
}

/// Partitions on one broker share a request while their fetches together
/// ask for at most 1 MiB; a larger fetch goes in a request of its own,
/// which another connection carries and the broker may serve beside the
/// others, not after them.
#[tokio::test]
async fn large_fetches_of_several_partitions_go_in_requests_of_their_own() {
    let (_broker, cluster, written, indexes) = setup(5000, Compression::None).await;
    // Every region from the start: each partition is one run of about
    // 1.7 MB, read in one fetch.
    let everything = from_the_start(&written);
    let (got, stats) = recover(
        &cluster,
        TOPIC,
        &indexes,
        &everything,
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    assert!(got == written);
    assert!(
        stats.records_bytes > u64::try_from(PARTITIONS).unwrap() << 20,
        "more than a MiB per partition: {stats:?}"
    );
    // Each partition's lookup of its end, then its one large fetch: every
    // one in a request of its own (together, the large ones would have
    // shared one).
    assert_eq!(stats.fetches, 2 * u64::try_from(PARTITIONS).unwrap());
    assert_eq!(stats.requests, stats.fetches, "{stats:?}");
}

/// One memory cap covers the whole recovery: with every region of every
/// partition wanted from the start (about 1.7 MB a partition, which the
/// default cap lets each partition ask for at once), a cap of 256 KiB
/// holds the fetches' limits and the records buffered, but for what a
/// batch (4 KiB here) can bring past a limit, whatever the strategy; and
/// every region still gets exactly its entries.
#[tokio::test]
async fn one_memory_cap_holds_over_every_partition() {
    const CAP: u64 = 256 << 10;
    let (_broker, cluster, written, indexes) = setup(5000, Compression::None).await;
    let everything = from_the_start(&written);
    for strategy in [
        StrategyKind::Index,
        StrategyKind::Estimate,
        StrategyKind::Scan,
    ] {
        let options = ReplayOptions::default()
            .with_strategy(strategy)
            .with_max_buffered_bytes(CAP);
        let (got, stats) = recover(&cluster, TOPIC, &indexes, &everything, options)
            .await
            .unwrap();
        assert!(got == written, "{strategy:?}");
        // Past the cap by a batch a partition at most (4 KiB, and its
        // framing), and one more: the fetch sent while room was left.
        let batch = 5 << 10;
        let partitions = u64::try_from(PARTITIONS).unwrap();
        assert!(
            stats.peak_buffered_bytes <= CAP + (partitions + 1) * batch,
            "{strategy:?}: {stats:?}"
        );
        // Planned within what is left only where that is a fair part of
        // the cap, not in the crumbs answers free: a fetch brings an eighth
        // of the cap on average at least (52-85 fetches here; 228 when
        // every crumb went out).
        assert!(
            stats.fetches <= 8 * stats.records_bytes / CAP,
            "{strategy:?}: {stats:?}"
        );
    }
}

/// The cap is split evenly over the partitions still fetching: a scan of
/// every partition (each about 100 KB, read with fetches asking for as much
/// as they may) reads each partition in one fetch of its share at once,
/// rather than the first partition taking the whole cap while the others
/// go on a batch a round trip (4 KiB each).
#[tokio::test]
async fn the_memory_cap_is_shared_by_the_partitions() {
    let (_broker, cluster, written, indexes) = setup(300, Compression::None).await;
    let everything = from_the_start(&written);
    let share = 128 << 10;
    let options = ReplayOptions::default()
        .with_strategy(StrategyKind::Scan)
        .with_max_buffered_bytes(u64::try_from(PARTITIONS).unwrap() * share);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &everything, options)
        .await
        .unwrap();
    assert!(got == written);
    let partitions = u64::try_from(PARTITIONS).unwrap();
    assert!(stats.records_bytes < partitions * share, "{stats:?}");
    // The lookups of the logs' ends, one fetch for each partition, and
    // the empty answers past the ends.
    assert!(stats.round_trips <= 3, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_dropped_while_its_large_fetches_are_in_flight_ends_them() {
    let (broker, cluster, written, indexes) = setup(5000, Compression::None).await;
    let mut builder = Recovery::builder(Arc::clone(&cluster));
    for (p, index) in indexes.iter().enumerate() {
        builder = builder.index(TOPIC, i32::try_from(p).unwrap(), index);
    }
    for (&p, regions) in &written {
        for &region in regions.keys() {
            builder = builder.region(TOPIC, p, region, 0);
        }
    }
    let mut recovery = builder.build().await.unwrap();
    // Every partition's one large fetch (about 1.7 MB: run, and decoded,
    // in a task of its own) is answered only after a minute.
    broker.script(
        Fault::on(ApiKey::Fetch)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_secs(60))),
    );
    let before = Arc::strong_count(&cluster);
    let polled = tokio::time::timeout(Duration::from_millis(300), recovery.next()).await;
    assert!(polled.is_err(), "nothing is answered yet");
    assert!(
        Arc::strong_count(&cluster) > before,
        "the fetches' tasks hold the cluster"
    );
    drop(recovery);
    // Dropping the recovery aborts its tasks: they let go of the cluster
    // (and of what they hold) now, not when the answers come.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while Arc::strong_count(&cluster) >= before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        Arc::strong_count(&cluster) < before,
        "the tasks were left running"
    );
}

/// A broker whose `fetch.max.bytes` (KIP-541) is below what the fetches ask
/// for sends less than they asked: the recovery reads on from where each
/// answer ended and every region gets exactly its entries.
#[tokio::test]
async fn a_broker_that_caps_its_responses_below_the_fetches_limits_loses_nothing() {
    let (broker, cluster, written, indexes) = setup(3000, Compression::None).await;
    for node in broker.node_ids() {
        broker.set_fetch_max_bytes(node, 64 << 10).unwrap();
    }
    let checkpoints = checkpoints(&written, 5);
    let (got, stats) = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default(),
    )
    .await
    .unwrap();
    assert!(got == expected(&written, &checkpoints));
    // Each answer carried at most the cap (or one batch of at most 4 KiB
    // past it), so it took that many fetches at least.
    assert!(
        stats.fetches >= stats.records_bytes / ((64 << 10) + (4 << 10)),
        "{stats:?}"
    );
    assert!(stats.records_bytes > 4 * (64 << 10), "{stats:?}");
}

/// Recovers the coldest region of every partition of `entries` entries
/// from offset 0 (many small fetches, far apart) on a cluster client with
/// `connections` per broker, the broker taking `fetch_delay` to serve each
/// fetch; the stats and the connections the broker accepted meanwhile.
async fn cold_regions(
    entries: usize,
    connections: usize,
    fetch_delay: Option<Duration>,
    options: ReplayOptions,
) -> (ReplayStats, u64) {
    let (broker, _, written, indexes) = setup(entries, Compression::None).await;
    let mut config = ClusterConfig::new([broker.bootstrap()]);
    config.connections_per_broker = connections;
    let cluster = Arc::new(Cluster::connect(config).await.expect("connect"));
    if let Some(delay) = fetch_delay {
        broker.script(
            Fault::on(ApiKey::Fetch)
                .times(100_000)
                .then(FaultAction::Delay(delay)),
        );
    }
    let checkpoints = (0..PARTITIONS)
        .map(|p| ((p, region_of(p, REGIONS_PER_PARTITION - 1)), 0))
        .collect();
    let node = broker.node_ids()[0];
    let before = broker.stats(node).unwrap().connections;
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    assert_eq!(got, expected(&written, &checkpoints));
    (stats, broker.stats(node).unwrap().connections - before)
}

#[tokio::test]
async fn small_fetches_travel_side_by_side_bounded_by_bytes_over_several_connections() {
    // A plan that never reads a gap to save a fetch: one fetch per run.
    let mut plan = PlanConfig::default();
    plan.cost.round_trip = Duration::ZERO;
    let options = ReplayOptions::default().with_plan(plan);
    let (stats, opened) = cold_regions(900, 4, None, options.clone()).await;
    assert!(
        stats.fetches > 12,
        "the workload needs many fetches: {stats:?}"
    );
    // More than the old limit of 4 fetches were in flight at once: fewer
    // round trips than fetches / 4.
    assert!(
        stats.round_trips * 4 < stats.fetches,
        "{} round trips for {} fetches",
        stats.round_trips,
        stats.fetches
    );
    assert!(
        (1..=4).contains(&opened),
        "fetches spread over more connections, at most 4: {opened} opened"
    );

    // One byte in flight: past it only a partition with nothing in flight
    // and nothing to yield may send (a replay never stalls on the limit),
    // so at most one fetch per partition is in flight.
    let (serial, _) = cold_regions(900, 4, None, options.clone().with_max_in_flight_bytes(1)).await;
    assert!(
        serial.round_trips * u64::try_from(PARTITIONS).unwrap() >= serial.fetches,
        "{serial:?}"
    );

    // One connection per broker: the one opened to bootstrap serves all.
    let (_, opened) = cold_regions(900, 1, None, options).await;
    assert_eq!(opened, 0);
}

/// One in-flight setting: the planner prices a fetch at the round trip's
/// share among the fetches that may be in flight, so many in flight plan
/// small fetches that skip other regions' batches, and one in flight merges
/// runs across them to save round trips.
#[tokio::test]
async fn the_fetches_in_flight_set_what_a_fetch_costs_the_plan() {
    let (pipelined, _) = cold_regions(
        900,
        4,
        None,
        ReplayOptions::default().with_max_in_flight(64),
    )
    .await;
    let (serial, _) =
        cold_regions(900, 4, None, ReplayOptions::default().with_max_in_flight(1)).await;
    assert!(
        pipelined.fetches > serial.fetches && pipelined.wire_bytes < serial.wire_bytes,
        "64 in flight: {} fetches, {} bytes; 1 in flight: {} fetches, {} bytes",
        pipelined.fetches,
        pipelined.wire_bytes,
        serial.fetches,
        serial.wire_bytes
    );
}

/// A broker that takes milliseconds to serve a fetch: the recovery learns
/// it from its own requests and merges runs across other regions' batches
/// (fewer fetches, more bytes); told not to learn, it keeps the default
/// cost model's plan.
#[tokio::test]
async fn a_broker_whose_fetches_are_dear_gets_fewer_larger_fetches() {
    // One connection: the broker serves one fetch at a time.
    let dear = Some(Duration::from_millis(3));
    let (learned, _) = cold_regions(900, 1, dear, ReplayOptions::default()).await;
    let kept = ReplayOptions::default().with_learn_link(false);
    let (kept, _) = cold_regions(900, 1, dear, kept).await;
    assert!(
        learned.fetches < kept.fetches && learned.wire_bytes > kept.wire_bytes,
        "learned: {} fetches, {} bytes; kept: {} fetches, {} bytes",
        learned.fetches,
        learned.wire_bytes,
        kept.fetches,
        kept.wire_bytes
    );
    // The stats say what was learned, and what the plan spent on it.
    let [(_, link)] = <[_; 1]>::try_from(learned.links.into_iter().collect::<Vec<_>>())
        .expect("one broker's link");
    assert!(link.dear_answers > 0 && link.answers >= 8, "{link:?}");
    assert!(
        link.dearest_per_fetch
            .is_some_and(|d| d > Duration::from_micros(150)),
        "{link:?}"
    );
    assert!(
        link.widest_merge_gap_bytes > CostModel::default().merge_gap_bytes(),
        "{link:?}"
    );
    assert!(kept.links.is_empty(), "not learned: {:?}", kept.links);
}

/// Once the link is learned, every partition plans with it, not only the
/// one whose answer taught it: the in-flight limit opens then, and a
/// partition still pricing fetches for a cheap link filled it with
/// single-batch fetches that queued at the dear broker (57–68 fetches here,
/// against 31; on Tansu, four partitions, 87–93 against 31).
#[tokio::test]
async fn every_partition_plans_with_the_learned_link() {
    let dear = Some(Duration::from_millis(3));
    let (stats, _) = cold_regions(1500, 1, dear, ReplayOptions::default()).await;
    // Those sent before the link was learned (8 in flight, then each
    // partition's next) and the merged ones after.
    assert!(stats.fetches <= 44, "{} fetches", stats.fetches);
}

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
    let err = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default(),
    )
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
        let (got, stats) = recover(
            &cluster,
            TOPIC,
            indexes,
            &checkpoints,
            ReplayOptions::default(),
        )
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
        .with_cut_records(CutRecords::Never);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    assert!(got == want);
    assert!(stats.fetches > 20, "many fetches: {stats:?}");
}

#[tokio::test]
async fn a_recovery_says_what_is_wrong_with_what_it_was_asked() {
    let (_broker, cluster, _, indexes) = setup(50, Compression::None).await;
    let err = Recovery::builder(Arc::clone(&cluster))
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at least one region"), "{err}");
    let err = Recovery::builder(Arc::clone(&cluster))
        .index(TOPIC, 0, &indexes[0])
        .region(TOPIC, 1, 100, 0)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("no index for topic \"wal\" partition 1"),
        "{err}"
    );
    let err = Recovery::builder(Arc::clone(&cluster))
        .index(TOPIC, 0, &indexes[0])
        .region(TOPIC, 0, 1, 0)
        .region(TOPIC, 0, 1, 5)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("region 1 is asked for twice"),
        "{err}"
    );
    let err = Recovery::builder(Arc::clone(&cluster))
        .index(TOPIC, 0, &indexes[0])
        .region(TOPIC, 0, 1, -3)
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("negative"), "{err}");
    // A checkpoint past the log's end (it said "the range 1000000..N is
    // inverted", naming an end the caller never gave).
    let err = Recovery::builder(cluster)
        .index(TOPIC, 0, &indexes[0])
        .region(TOPIC, 0, 1, 1_000_000)
        .build()
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("region 1: the checkpoint 1000000 is past the log's end"),
        "{err}"
    );
}

/// Two writers share a partition, each with its index. Given both for the
/// partition, the builder kept the last one only and the recovery ended
/// well with half the region's entries: the first writer's, below the
/// second's `last_index` and not in its index, were skipped unsaid. Two
/// indexes for one partition are now refused (the merged index is the
/// way), and the same index given twice is still one.
#[tokio::test]
async fn two_indexes_of_one_partition_are_refused_not_half_read() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted broker");
    scripted.create_topic(TOPIC, 1).expect("topic");
    let cluster = Arc::new(
        Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
            .await
            .expect("connect"),
    );
    let first = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    let second = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
    for n in 0..20 {
        for writer in [&first, &second] {
            let entry = WalEntry::new(1, format!("entry {n}"));
            writer.append(entry).await.unwrap().await.unwrap();
        }
    }
    let (first, second) = (first.close().await.unwrap(), second.close().await.unwrap());
    let entries = |index: &WalIndex| {
        let cluster = Arc::clone(&cluster);
        let index = index.clone();
        async move {
            let recovery = Recovery::builder(cluster)
                .index(TOPIC, 0, &index)
                .index(TOPIC, 0, &index)
                .region(TOPIC, 0, 1, 0)
                .build()
                .await?;
            let got: Vec<_> = recovery.collect().await;
            got.into_iter()
                .collect::<Result<Vec<_>, _>>()
                .map(|e| e.len())
        }
    };
    let err = Recovery::builder(Arc::clone(&cluster))
        .index(TOPIC, 0, &first)
        .index(TOPIC, 0, &second)
        .region(TOPIC, 0, 1, 0)
        .build()
        .await
        .expect_err("two indexes of one partition");
    assert!(
        err.to_string()
            .contains("topic \"wal\" partition 0 is given more than one index"),
        "{err}"
    );
    let mut merged = first.clone();
    merged.merge(&second).unwrap();
    assert_eq!(entries(&merged).await.unwrap(), 40);
}

/// Retention that removes records past `last_index` a region still had to
/// scan: those records cannot be named (no index lists them), but they are
/// gone, and the recovery must say so rather than end well without them.
/// Found by the fault soak (seed 22, round 195: an entry at 215 in the scan
/// past `last_index`, the log start moved to 219, the recovery ended well
/// without it).
#[tokio::test]
async fn retention_inside_the_scan_past_last_index_is_an_error_not_a_silent_gap() {
    let (broker, cluster, written, full) = setup(300, Compression::None).await;
    let indexes = halfway(&full, &written);
    let last_index = indexes[0].last_index().unwrap();
    // A region of partition 0 with an entry past `last_index`, and a batch
    // boundary past that entry for the new log start.
    let (region, entry) = written[&0]
        .iter()
        .find_map(|(&r, entries)| {
            let e = entries.iter().find(|(o, _)| *o > last_index)?;
            Some((r, e.0))
        })
        .unwrap();
    let log = broker.log(TOPIC, 0).unwrap();
    let start = log
        .extents()
        .iter()
        .map(|e| e.base_offset)
        .find(|&b| b > entry)
        .unwrap();
    broker.advance_log_start(TOPIC, 0, start).unwrap();
    let checkpoints = [((0, region), entry)].into_iter().collect();
    let err = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default(),
    )
    .await
    .map(|(got, _)| got)
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{entry}")) && msg.contains(&format!("{start}")),
        "{msg}"
    );
    assert!(msg.contains("no longer exist"), "{msg}");
    // Skipping lost offsets, the recovery goes on from the log start and
    // lists the range it could not read.
    let (got, stats) = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default().with_on_lost(walfetch::consumer::LostPolicy::Skip),
    )
    .await
    .unwrap();
    let want: Vec<i64> = written[&0][&region]
        .iter()
        .map(|(o, _)| *o)
        .filter(|&o| o >= start)
        .collect();
    let got: Vec<i64> = got[&0][&region].iter().map(|(o, _)| *o).collect();
    assert_eq!(got, want);
    assert_eq!(stats.lost_ranges, vec![entry..start], "{stats:?}");
}

/// An unclean leader election after the recovery looked up the logs'
/// ends: partition 0's log is truncated below entries the index lists.
/// Each fetch of them is answered OFFSET_OUT_OF_RANGE with a log end below
/// them; the recovery once took that for a replica whose high watermark
/// lags, asked again and again, and after 17 fetches ended stalled, naming
/// no region and not saying the entries were gone, with
/// `LostPolicy::Skip` too. They are lost, as retention's are: an error
/// naming the region, its offsets and the truncation, at once; or, with
/// `Skip`, listed in the stats while every entry still in the log comes,
/// partition 1's untouched.
#[tokio::test]
async fn a_log_truncated_below_indexed_entries_loses_them_by_the_lost_policy() {
    use walfetch::consumer::LostPolicy;
    use walfetch::error::Error;
    for policy in [LostPolicy::Error, LostPolicy::Skip] {
        let (broker, cluster, written, indexes) = setup(300, Compression::None).await;
        let (hot, other) = (region_of(0, 0), region_of(1, 0));
        let mut recovery = Recovery::builder(Arc::clone(&cluster))
            .options(ReplayOptions::default().with_on_lost(policy))
            .index(TOPIC, 0, &indexes[0])
            .index(TOPIC, 1, &indexes[1])
            .region(TOPIC, 0, hot, 0)
            .region(TOPIC, 1, other, 0)
            .build()
            .await
            .unwrap();
        let offsets =
            |p: i32, region| -> Vec<i64> { written[&p][&region].iter().map(|(o, _)| *o).collect() };
        let want = offsets(0, hot);
        broker.truncate(TOPIC, 0, want[want.len() / 2]).unwrap();
        let end = broker.high_watermark(TOPIC, 0).unwrap();
        let (kept, gone): (Vec<i64>, Vec<i64>) = want.iter().partition(|&&o| o < end);
        assert!(!gone.is_empty());
        let started = std::time::Instant::now();
        let mut got: BTreeMap<RegionId, Vec<i64>> = BTreeMap::new();
        let mut error = None;
        while let Some(entry) = recovery.next().await {
            match entry {
                Ok(e) => got.entry(e.region).or_default().push(e.record.offset()),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        // Not a stall: a few fetches, not 17 with waits.
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{policy:?}: {error:?}"
        );
        assert_eq!(
            got.get(&hot).cloned().unwrap_or_default(),
            kept,
            "{policy:?}"
        );
        match policy {
            LostPolicy::Error => {
                let error = error.expect("the truncated entries are an error");
                let message = error.to_string();
                match error {
                    Error::LostOffsets {
                        partition,
                        region,
                        offsets,
                        truncated_to,
                        ..
                    } => {
                        assert_eq!((partition, region), (0, hot));
                        assert_eq!(offsets, gone);
                        assert_eq!(truncated_to, Some(end));
                        assert!(message.contains("truncated"), "{message}");
                    }
                    other => panic!("not LostOffsets: {other}"),
                }
            }
            _ => {
                assert!(error.is_none(), "{error:?}");
                assert_eq!(got[&other], offsets(1, other));
                let stats = recovery.stats();
                assert_eq!(stats.lost, gone);
                assert_eq!(stats.regions[&hot].lost, gone);
            }
        }
    }
}

/// The same after the indexed part of the recovery met the new log start
/// first: the planner then starts the scan at the log start, and the
/// records between `last_index` and it are gone all the same. Found by
/// the long fault soak (seed 20646, round 2534: several regions of one
/// partition, `LostPolicy::Skip`, the scan's lost records neither yielded
/// nor listed).
#[tokio::test]
async fn retention_across_last_index_lists_the_scan_range_it_removed() {
    let (broker, cluster, written, full) = setup(300, Compression::None).await;
    let indexes = halfway(&full, &written);
    let last_index = indexes[0].last_index().unwrap();
    // The first batch that starts past some entry of the scan.
    let first_tail = written[&0]
        .values()
        .flatten()
        .map(|(o, _)| *o)
        .filter(|&o| o > last_index)
        .min()
        .unwrap();
    let log = broker.log(TOPIC, 0).unwrap();
    let start = log
        .extents()
        .iter()
        .map(|e| e.base_offset)
        .find(|&b| b > first_tail)
        .unwrap();
    broker.advance_log_start(TOPIC, 0, start).unwrap();
    // Every region of partition 0 from its first entry: indexed entries
    // below the new start are lost, and so is the scan up to it.
    let checkpoints = written[&0]
        .iter()
        .map(|(&r, entries)| ((0, r), entries[0].0))
        .collect();
    // One fetch at a time: the scan is planned after the indexed part
    // learned where the log starts.
    let options = ReplayOptions::default()
        .with_max_in_flight(1)
        .with_on_lost(walfetch::consumer::LostPolicy::Skip);
    let (got, stats) = recover(&cluster, TOPIC, &indexes, &checkpoints, options)
        .await
        .unwrap();
    for (region, entries) in &written[&0] {
        let want: Vec<i64> = entries
            .iter()
            .map(|(o, _)| *o)
            .filter(|&o| o >= start)
            .collect();
        let got: Vec<i64> = got[&0][region].iter().map(|(o, _)| *o).collect();
        assert_eq!(got, want, "region {region}");
        for (o, _) in entries.iter().filter(|(o, _)| *o < start) {
            let listed = if *o <= last_index {
                stats.lost.contains(o)
            } else {
                stats.lost_ranges.iter().any(|r| r.contains(o))
            };
            assert!(listed, "region {region} offset {o}: {stats:?}");
        }
    }
    assert!(
        stats.lost_ranges.iter().all(|r| r.end <= start),
        "{stats:?}"
    );
    // Without skipping, the loss is an error.
    let err = recover(
        &cluster,
        TOPIC,
        &indexes,
        &checkpoints,
        ReplayOptions::default(),
    )
    .await
    .map(|(got, _)| got)
    .unwrap_err();
    assert!(err.to_string().contains("no longer exist"), "{err}");
}

/// `brokers` brokers, `partitions` partitions (led round robin), `entries`
/// entries of three regions each (4 KiB interleaved batches), and a cluster
/// client whose retries end after `deadline`.
async fn spread_over_brokers(
    brokers: usize,
    partitions: i32,
    entries: usize,
    deadline: Duration,
) -> (ScriptedCluster, Arc<Cluster>, Written, Vec<WalIndex>) {
    let scripted = ScriptedCluster::start(brokers).await.unwrap();
    scripted.create_topic(TOPIC, partitions).unwrap();
    let mut config = ClusterConfig::new([scripted.bootstrap()]);
    config.retry = RetryPolicy {
        deadline,
        ..RetryPolicy::default()
    };
    let cluster = Arc::new(Cluster::connect(config).await.unwrap());
    let mut written = Written::new();
    let mut indexes = Vec::new();
    for p in 0..partitions {
        let config = WriterConfig::new(TOPIC, p)
            .with_mode(WriterMode::Interleaved)
            .with_max_batch_bytes(4 << 10);
        let entries = (0..entries).map(|n| {
            let payload = format!("p{p} n{n} {}", "z".repeat(200));
            (region_of(p, n as u64 % 3), Bytes::from(payload))
        });
        indexes.push(write_partition(&cluster, config, entries, &mut written).await);
    }
    (scripted, cluster, written, indexes)
}

/// A recovery of every region written, from the start.
async fn recovery_of(
    cluster: &Arc<Cluster>,
    written: &Written,
    indexes: &[WalIndex],
    options: ReplayOptions,
) -> Recovery {
    start_recovery(cluster, TOPIC, indexes, &from_start(written), options)
        .await
        .unwrap()
}

/// Small fetches of partitions on different brokers shared one request
/// group, and its answers came when the slowest broker's did: one slow
/// broker slowed every partition. A request now goes to one broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_broker_does_not_hold_back_partitions_on_healthy_brokers() {
    let (scripted, cluster, written, indexes) =
        spread_over_brokers(2, 2, 300, Duration::from_secs(20)).await;
    let slow = scripted.leader(TOPIC, 1).unwrap().node_id;
    assert_ne!(scripted.leader(TOPIC, 0).unwrap().node_id, slow);
    let mut recovery = recovery_of(&cluster, &written, &indexes, ReplayOptions::default()).await;
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(slow)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_secs(3))),
    );
    let want: usize = written[&0].values().map(Vec::len).sum();
    let started = std::time::Instant::now();
    let (mut got, mut done) = (0, None);
    while let Some(entry) = recovery.next().await {
        if entry.unwrap().partition == 0 {
            got += 1;
            if got == want {
                done = Some(started.elapsed());
            }
        }
    }
    let done = done.expect("every entry of partition 0");
    assert!(
        done < Duration::from_millis(1500),
        "partition 0, on a healthy broker, took {done:?}: held back by partition 1's"
    );
}

/// A consumer working through a backlog (here 10 ms an entry) kept the
/// stream busy yielding ready entries, and a request in flight (another
/// partition's fetch, retrying after its leader moved) ran only once no
/// entry was ready: its retries ran out of their deadline, on the clock,
/// though the partition answered by then. Requests in flight now go on
/// while entries are taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_working_through_a_backlog_does_not_starve_another_partitions_retries() {
    let (scripted, cluster, written, indexes) =
        spread_over_brokers(2, 2, 300, Duration::from_secs(2)).await;
    // Without hints each partition's fetch goes in a request of its own;
    // fetches of 64 KiB at most run as the stream is polled.
    let indexes: Vec<WalIndex> = indexes.iter().map(WalIndex::without_hints).collect();
    let plan = PlanConfig {
        max_fetch_bytes: 64 << 10,
        ..PlanConfig::default()
    };
    let options = ReplayOptions::default().with_plan(plan);
    let mut recovery = recovery_of(&cluster, &written, &indexes, options).await;
    // Partition 1's leader answers NOT_LEADER_OR_FOLLOWER four times (some
    // 175-350 ms of backoff in all); partition 0's first answer comes
    // after 100 ms, while partition 1 is retrying.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(1)
            .times(4)
            .then(FaultAction::PartitionError(6)),
    );
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(0)
            .times(1)
            .then(FaultAction::Delay(Duration::from_millis(100))),
    );
    let want: usize = written
        .values()
        .flat_map(|r| r.values())
        .map(Vec::len)
        .sum();
    let mut got = 0;
    while let Some(entry) = recovery.next().await {
        if let Err(e) = &entry {
            panic!("after {got} of {want} entries: {e}");
        }
        got += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(got, want);
}

/// A recovery ended by an error kept its other fetches running (holding
/// their connections, and their answers when they came) until it was
/// dropped; they now end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovery_ended_by_an_error_ends_its_fetches() {
    let (scripted, cluster, written, indexes) =
        spread_over_brokers(2, 2, 3000, Duration::from_secs(20)).await;
    let mut recovery = recovery_of(&cluster, &written, &indexes, ReplayOptions::default()).await;
    // Partition 0's fetches are answered after a minute; partition 1's
    // with TOPIC_AUTHORIZATION_FAILED (29), which is not retried.
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(0)
            .times(u32::MAX)
            .then(FaultAction::Delay(Duration::from_secs(60))),
    );
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .partition(1)
            .times(u32::MAX)
            .then(FaultAction::PartitionError(29)),
    );
    // The test's reference and the recovery's.
    let before = Arc::strong_count(&cluster);
    let first = tokio::time::timeout(Duration::from_secs(10), recovery.next())
        .await
        .expect("the error comes at once");
    let err = first.expect("an item").expect_err("partition 1 fails");
    assert!(err.to_string().contains("partition 1"), "{err}");
    assert!(recovery.next().await.is_none(), "the stream has ended");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while Arc::strong_count(&cluster) > before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        Arc::strong_count(&cluster) <= before,
        "the ended stream's fetches still run: {} references to the cluster, {before} before",
        Arc::strong_count(&cluster),
    );
}

/// An unclean leader election before the recovery starts, and writes
/// since: partition 0's log was truncated in the middle of the indexed
/// entries and written again past `last_index` with other regions'
/// entries (`rewrite` picks each new entry's region), at the offsets the
/// index gives to the hot region. What the index lists at those offsets is
/// not there: the recovery yields the hot region's entries below the
/// truncation, exactly, then ends with an error naming the first offset
/// that is not the hot region's (`IndexMismatch`), whatever the lost
/// policy; never another region's record as the hot region's, never a
/// silent gap.
#[tokio::test]
async fn a_log_truncated_and_written_again_before_the_recovery_is_a_mismatch() {
    use walfetch::consumer::LostPolicy;
    use walfetch::error::{Error, Mismatch};
    for policy in [LostPolicy::Error, LostPolicy::Skip] {
        for compression in [Compression::None, Compression::Lz4] {
            let (broker, cluster, written, indexes) = setup(300, compression).await;
            let hot = region_of(0, 0);
            let want: Vec<i64> = written[&0][&hot].iter().map(|(o, _)| *o).collect();
            broker.truncate(TOPIC, 0, want[want.len() / 2]).unwrap();
            let end = broker.high_watermark(TOPIC, 0).unwrap();
            let last_index = indexes[0].last_index().unwrap();
            let mut config = WriterConfig::new(TOPIC, 0);
            config.compression = compression;
            config.mode = WriterMode::Interleaved;
            let others = (0..usize::try_from(last_index - end + 50).unwrap()).map(|n| {
                let region = region_of(0, 1 + (n as u64 % 3));
                (
                    region,
                    Bytes::from(format!("rewritten {n} {}", "y".repeat(n % 300))),
                )
            });
            let mut rewritten = Written::new();
            write_partition(&cluster, config, others, &mut rewritten).await;
            assert!(broker.high_watermark(TOPIC, 0).unwrap() > last_index);
            let mut recovery = Recovery::builder(Arc::clone(&cluster))
                .options(ReplayOptions::default().with_on_lost(policy))
                .index(TOPIC, 0, &indexes[0])
                .region(TOPIC, 0, hot, 0)
                .build()
                .await
                .unwrap();
            let mut got = Vec::new();
            let mut error = None;
            while let Some(entry) = recovery.next().await {
                match entry {
                    Ok(e) => got.push((e.record.offset(), e.record.value_bytes().unwrap())),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            let case = format!("{policy:?} {compression:?}");
            let kept: Vec<(i64, Bytes)> = written[&0][&hot]
                .iter()
                .filter(|(o, _)| *o < end)
                .cloned()
                .collect();
            assert_eq!(got, kept, "{case}");
            let first_gone = want.iter().copied().find(|&o| o >= end).unwrap();
            match error {
                Some(Error::IndexMismatch {
                    mismatch: Mismatch::Entry { offset, region, .. },
                    ..
                }) => assert_eq!((offset, region), (first_gone, hot), "{case}"),
                other => panic!("{case}: not a mismatch at {first_gone}: {other:?}"),
            }
        }
    }
}

/// A transaction of another producer left open in the WAL's partition
/// (a producer that crashed mid-transaction holds it until
/// `transaction.timeout.ms`) holds the last stable offset below entries
/// the WAL writer wrote after it. A `read_committed` recovery (the
/// default) once read to that last stable offset only, and ended without
/// those entries, as if they were never written. The index says they were:
/// the recovery waits at the broker for the last stable offset to pass
/// them, and yields them once the transaction ends; while it stays open,
/// the recovery ends with an error that names the first entry held back
/// and the last stable offset, never short of entries without a word.
#[tokio::test]
async fn indexed_entries_past_the_last_stable_offset_are_waited_for_not_dropped() {
    use walfetch::codec::{BatchBuilder, ControlType, NewRecord};
    use walfetch::error::Error;
    use walfetch::writer::{WalEntry, WalWriter};
    const HOT: RegionId = 1;
    for ends in [false, true] {
        let scripted = Arc::new(ScriptedCluster::start(1).await.unwrap());
        scripted.create_topic(TOPIC, 1).unwrap();
        let cluster = Arc::new(
            Cluster::connect(ClusterConfig::new([scripted.bootstrap()]))
                .await
                .unwrap(),
        );
        let writer = WalWriter::new(Arc::clone(&cluster), WriterConfig::new(TOPIC, 0));
        let mut written = Vec::new();
        let mut open_at = None;
        for n in 0..40 {
            if n == 20 {
                // Another producer's transaction, never ended (yet).
                let batch = BatchBuilder::new(0)
                    .producer(77, 0, 0)
                    .transactional(true)
                    .encode(&[NewRecord::value(0, "in a transaction")])
                    .unwrap()
                    .bytes;
                open_at = Some(scripted.append(TOPIC, 0, batch).unwrap());
            }
            let value = Bytes::from(format!("entry {n}"));
            let offset = writer
                .append(WalEntry::new(HOT, value.clone()))
                .await
                .unwrap()
                .await
                .unwrap();
            written.push((offset, value));
        }
        let index = writer.close().await.unwrap();
        let open_at = open_at.unwrap();
        let mut recovery = Recovery::builder(Arc::clone(&cluster))
            .options(ReplayOptions::default().with_max_attempts(6))
            .index(TOPIC, 0, &index)
            .region(TOPIC, 0, HOT, 0)
            .build()
            .await
            .unwrap();
        if ends {
            // The transaction ends while the recovery waits.
            let scripted = Arc::clone(&scripted);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let marker = BatchBuilder::new(0)
                    .producer(77, 0, -1)
                    .encode_marker(ControlType::Abort, 0, 0)
                    .unwrap()
                    .bytes;
                scripted.append(TOPIC, 0, marker).unwrap();
            });
        }
        let mut got = Vec::new();
        let mut error = None;
        while let Some(entry) = recovery.next().await {
            match entry {
                Ok(e) => got.push((e.record.offset(), e.record.value_bytes().unwrap())),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        if ends {
            assert!(error.is_none(), "{error:?}");
            assert_eq!(got, written);
        } else {
            let held: Vec<_> = written
                .iter()
                .filter(|(o, _)| *o < open_at)
                .cloned()
                .collect();
            assert_eq!(got, held);
            let error = error.expect("entries held back past the last stable offset");
            let message = error.to_string();
            match error {
                Error::Unstable {
                    offset,
                    last_stable_offset,
                    ..
                } => assert_eq!((offset, last_stable_offset), (open_at + 1, open_at)),
                other => panic!("not Unstable: {other}"),
            }
            assert!(message.contains("last stable offset"), "{message}");
        }
    }
}
