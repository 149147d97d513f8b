//! Large fetches and the memory cap: requests of their own, one cap shared by the partitions, fetches ended with the recovery.

use crate::common::*;

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
    let (got, stats) = recover_with_defaults(&cluster, TOPIC, &indexes, &everything)
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
    let (got, stats) = recover_with_defaults(&cluster, TOPIC, &indexes, &checkpoints)
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
