//! Small fetches of cold regions: side by side, bounded by bytes, costed by the learned link.

use crate::common::*;

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
    // The first answer, 3 ms from an idle broker, shows the round trip:
    // the plan merges from the second fetch on, before the fit has enough.
    assert!(link.answers >= 1, "{link:?}");
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
