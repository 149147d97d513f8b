//! Fetches shared by several partitions: a request per leader, partitions retried alone.

use crate::common::*;

/// Three partitions on one broker and one on the other: `fetch_many`
/// sends one request per leader, and what a shared request could not
/// answer cleanly (an error code, a moved leader) is fetched again on its
/// own, so each result is what `fetch` gives.
#[tokio::test]
async fn fetch_many_shares_a_request_per_leader_and_retries_partitions_alone() {
    let scripted = ScriptedCluster::start(2).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 4).expect("topic");
    let mut written = Vec::new();
    for p in 0..4 {
        let value = Bytes::from(format!("partition {p}"));
        scripted
            .append(TOPIC, p, batch(std::slice::from_ref(&value)))
            .expect("appended");
        written.push(value);
    }
    let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
        .await
        .expect("connects");
    let params: Vec<FetchParams> = (0..4)
        .map(|p| FetchParams::new(TOPIC, p, 0).with_max_wait(MAX_WAIT))
        .collect();
    let leaders: Vec<i32> = (0..4)
        .map(|p| scripted.leader(TOPIC, p).expect("leader").node_id)
        .collect();
    let brokers: std::collections::BTreeSet<i32> = leaders.iter().copied().collect();
    let check = |many: walfetch::cluster::FetchedMany| {
        for (p, result) in many.partitions.into_iter().enumerate() {
            let fetched = result.unwrap_or_else(|e| panic!("partition {p}: {e}"));
            assert_eq!(decode(&fetched.records), vec![(0, written[p].clone())]);
        }
        many.requests
    };
    // Warm the leaders' metadata, then count requests per broker.
    check(within(HANG, "warm-up", cluster.fetch_many(&params)).await);
    scripted.reset_stats();
    let requests = check(within(HANG, "fetch_many", cluster.fetch_many(&params)).await);
    assert_eq!(requests, brokers.len(), "one request per leader");
    for node in &brokers {
        let stats = scripted.stats(*node).expect("stats");
        assert_eq!(stats.requests_of(ApiKey::Fetch), 1, "broker {node}");
    }
    // A retriable error code on one partition: it alone is fetched again.
    scripted.script(Fault::on(ApiKey::Fetch).topic(TOPIC).partition(1).then(
        FaultAction::PartitionError(ErrorCode::NotLeaderOrFollower.code()),
    ));
    let requests = check(within(HANG, "error code", cluster.fetch_many(&params)).await);
    assert_eq!(requests, brokers.len() + 1);
    // A leader moved away: the old leader answers NOT_LEADER_OR_FOLLOWER,
    // and the partition follows its leader on its own.
    let other = *scripted
        .node_ids()
        .iter()
        .find(|&&n| n != leaders[2])
        .expect("two brokers");
    scripted.script(
        Fault::on(ApiKey::Fetch)
            .topic(TOPIC)
            .partition(2)
            .then(FaultAction::MoveLeader { to: other }),
    );
    check(within(HANG, "moved leader", cluster.fetch_many(&params)).await);
    // One partition twice: a request names it once, the second goes alone.
    let twice = [params[0].clone(), params[0].clone()];
    let many = within(HANG, "twice", cluster.fetch_many(&twice)).await;
    assert_eq!(many.requests, 2);
    for fetched in many.partitions {
        assert_eq!(
            decode(&fetched.expect("answered").records),
            vec![(0, written[0].clone())]
        );
    }
}

/// A broker that spends a request's `max_bytes` on its first partitions
/// (Tansu 0.6: `Habits::spend_request_bytes`) answers the others with no
/// records below their high watermark. `fetch_many` fetches such a
/// starved partition again on its own, so every result holds its first
/// batch as a single fetch would; once the broker is seen giving one
/// partition more than its limit while starving another, its partitions
/// go one a request.
#[tokio::test]
async fn fetch_many_fetches_a_starved_partition_again_and_stops_sharing_with_that_broker() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 2).expect("topic");
    let mut first = Vec::new();
    for p in 0..2 {
        for b in 0..3 {
            let value = Bytes::from(format!("partition {p} batch {b} {}", "v".repeat(200)));
            scripted
                .append(TOPIC, p, batch(std::slice::from_ref(&value)))
                .expect("appended");
            if b == 0 {
                first.push(value);
            }
        }
    }
    scripted
        .set_habits(1, walfetch_testkit::Habits::TANSU_0_6)
        .expect("habits");
    let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
        .await
        .expect("connects");
    let limit = i32::try_from(batch(std::slice::from_ref(&first[0])).len()).expect("small");
    let params: Vec<FetchParams> = (0..2)
        .map(|p| {
            FetchParams::new(TOPIC, p, 0)
                .with_max_wait(MAX_WAIT)
                .with_max_bytes(limit)
        })
        .collect();
    let check = |many: walfetch::cluster::FetchedMany| {
        for (p, result) in many.partitions.into_iter().enumerate() {
            let fetched = result.unwrap_or_else(|e| panic!("partition {p}: {e}"));
            let records = decode(&fetched.records);
            assert_eq!(
                records.first(),
                Some(&(0, first[p].clone())),
                "partition {p}"
            );
        }
        many.requests
    };
    // The shared request starves partition 1 (partition 0 takes every
    // batch): it is fetched again alone.
    assert_eq!(
        check(within(HANG, "shared", cluster.fetch_many(&params)).await),
        2
    );
    scripted.reset_stats();
    // From then on, one request each.
    assert_eq!(
        check(within(HANG, "alone", cluster.fetch_many(&params)).await),
        2
    );
    assert_eq!(
        scripted.stats(1).expect("stats").requests_of(ApiKey::Fetch),
        2
    );
}
