//! Partitions on several brokers: a slow broker or a backlog holds no other partition back, an error ends the fetches.

use crate::common::*;

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
    let done = time_to_recover_partition(&mut recovery, &written, 0).await;
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
