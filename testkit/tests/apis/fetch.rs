//! Fetch: Kafka's rules at every version, its errors, sessions, max bytes (KIP-74, KIP-541), read committed, min bytes.

use crate::common::*;
use kafka_protocol::messages::FetchResponse;

#[tokio::test]
async fn fetch_follows_kafka_rules_at_every_version() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let sizes = four_batches(&cluster);
    let (b0, b1, b2) = (sizes[0].1, sizes[1].1, sizes[2].1);
    let total: usize = sizes.iter().map(|s| s.1).sum();
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 4..=17 {
        let fetch = |offset: i64, pmb: usize| {
            fetch_request(
                version,
                &[Want::new("wal", id, 0, offset, pmb as i32)],
                i32::MAX,
                0,
            )
        };
        // (what, request, error, record bytes, complete batches, partial batch base)
        type Case<'a> = (&'a str, FetchRequest, i16, usize, Vec<i64>, Option<i64>);
        let cases: Vec<Case<'_>> = vec![
            (
                "at a batch start",
                fetch(10, 1 << 20),
                0,
                total - b0,
                vec![10, 20, 25],
                None,
            ),
            (
                "mid-batch",
                fetch(15, 1 << 20),
                0,
                total - b0,
                vec![10, 20, 25],
                None,
            ),
            (
                "limit inside 2nd batch",
                fetch(0, b0 + 30),
                0,
                b0 + 30,
                vec![0],
                Some(10),
            ),
            (
                "limit at a boundary",
                fetch(0, b0 + b1),
                0,
                b0 + b1,
                vec![0, 10],
                None,
            ),
            (
                "first batch over the limit",
                fetch(12, 5),
                0,
                b1,
                vec![10],
                None,
            ),
            ("limit 0", fetch(20, 0), 0, b2, vec![20], None),
            ("offset == HW", fetch(30, 1 << 20), 0, 0, vec![], None),
            ("offset past HW", fetch(31, 1 << 20), 1, 0, vec![], None),
            ("negative offset", fetch(-1, 1 << 20), 1, 0, vec![], None),
        ];
        for (what, request, error, len, batches, partial) in cases {
            let response = client
                .call(version, &request)
                .await
                .unwrap_or_else(|e| panic!("Fetch v{version} {what}: {e:?}"));
            let p = only_partition(&response);
            assert_eq!(p.error_code, error, "v{version} {what}");
            let fetched = decode_records(p.records.as_ref().expect("records"));
            assert_eq!(fetched.len, len, "v{version} {what}");
            assert_eq!(fetched.batches, batches, "v{version} {what}");
            assert_eq!(
                fetched.partial.and_then(|p| p.0),
                partial,
                "v{version} {what}"
            );
            if error == 0 {
                assert_eq!((p.high_watermark, p.last_stable_offset), (30, 30));
                if version >= 5 {
                    assert_eq!(p.log_start_offset, 0);
                }
                assert!(
                    p.aborted_transactions.is_none(),
                    "read_uncommitted: null list"
                );
            } else {
                assert_eq!(p.high_watermark, -1);
            }
        }
        if version >= 13 {
            assert_eq!(response_topic_id(&mut client, version, id).await, id);
        }
    }
}

async fn response_topic_id(client: &mut RawClient, version: i16, id: Uuid) -> Uuid {
    let request = fetch_request(version, &[Want::new("wal", id, 0, 0, 1)], 1, 0);
    let response = client.call(version, &request).await.expect("Fetch");
    response.responses[0].topic_id
}

#[tokio::test]
async fn fetch_errors_at_every_version() {
    let (cluster, id) = wal_cluster(2, 2, &[(3, 10), (3, 10)]).await;
    cluster
        .advance_log_start("wal", 0, 3)
        .expect("delete records");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in 4..=17 {
        let unknown = if version >= 13 {
            ResponseError::UnknownTopicId
        } else {
            ResponseError::UnknownTopicOrPartition
        };
        let mut cases = vec![
            (
                "below log start",
                Want::new("wal", id, 0, 2, 1024),
                ResponseError::OffsetOutOfRange,
            ),
            (
                "not the leader",
                Want::new("wal", id, 1, 0, 1024),
                ResponseError::NotLeaderOrFollower,
            ),
            (
                "unknown partition",
                Want::new("wal", id, 9, 0, 1024),
                ResponseError::UnknownTopicOrPartition,
            ),
            (
                "unknown topic",
                Want::new("nope", Uuid::from_u128(7), 0, 0, 1024),
                unknown,
            ),
        ];
        if version >= 9 {
            let mut fenced = Want::new("wal", id, 0, 3, 1024);
            fenced.current_leader_epoch = 5;
            cases.push(("future epoch", fenced, ResponseError::UnknownLeaderEpoch));
        }
        for (what, want, error) in cases {
            let response = client
                .call(version, &fetch_request(version, &[want], i32::MAX, 0))
                .await
                .expect("Fetch");
            let p = only_partition(&response);
            assert_eq!(p.error_code, error.code(), "v{version} {what}");
            assert_eq!(p.records.as_ref().map(Bytes::len), Some(0));
            if version >= 16 && error == ResponseError::NotLeaderOrFollower {
                assert_eq!(p.current_leader.leader_id.0, 2);
                assert_eq!(response.node_endpoints.len(), 1);
                assert_eq!(
                    response.node_endpoints[0].port,
                    i32::from(cluster.addr(2).expect("addr").port())
                );
            }
        }
        // The log start offset is reported, and a fetch there works.
        let response = client
            .call(
                version,
                &fetch_request(version, &[Want::new("wal", id, 0, 3, 1024)], i32::MAX, 0),
            )
            .await
            .expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.error_code, 0);
        if version >= 5 {
            assert_eq!(p.log_start_offset, 3);
        }
        assert_eq!(
            decode_records(p.records.as_ref().expect("records")).batches,
            vec![3]
        );
    }
    cluster.move_leader("wal", 0, 1).expect("bump epoch");
    let mut stale = Want::new("wal", id, 0, 3, 1024);
    stale.current_leader_epoch = 0;
    let response = client
        .call(16, &fetch_request(16, &[stale], i32::MAX, 0))
        .await
        .expect("Fetch");
    let p = only_partition(&response);
    assert_eq!(p.error_code, code(ResponseError::FencedLeaderEpoch));
    assert_eq!(
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
        (1, 1)
    );
}

#[tokio::test]
async fn fetch_sessions_are_refused_politely() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1024)], 1024, 0);
    request.session_epoch = 0; // "create a session": answered in full, no session
    let response = client.call(12, &request).await.expect("Fetch");
    assert_eq!((response.error_code, response.session_id), (0, 0));
    assert_eq!(only_partition(&response).error_code, 0);
    request.session_id = 77;
    request.session_epoch = 3;
    let response = client.call(12, &request).await.expect("Fetch");
    assert_eq!(
        response.error_code,
        code(ResponseError::FetchSessionIdNotFound)
    );
}

#[tokio::test]
async fn fetch_max_bytes_spans_partitions_as_kip_74_says() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let big = batch(10, 100, 0);
    let small = batch(2, 10, 0);
    cluster.append("wal", 0, big.bytes.clone()).expect("append");
    cluster.append("wal", 1, big.bytes.clone()).expect("append");
    cluster
        .append("wal", 1, small.bytes.clone())
        .expect("append");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let wants = [
        Want::new("wal", id, 0, 0, 1 << 20),
        Want::new("wal", id, 1, 0, 1 << 20),
    ];
    // max_bytes 100: the first partition's first batch comes whole (over the
    // limit); nothing is left for the second partition.
    let response = fetch_v11(&mut client, &wants, 100).await;
    let lens = record_lens(&response);
    assert_eq!(lens, vec![big.bytes.len(), 0]);
    // max_bytes a bit over the first batch: the second partition's first
    // batch does not fit what is left, and it gets no records (Kafka, for
    // Fetch v3+, answers an incomplete first batch with none rather than
    // cut it).
    let room = 50;
    let response = fetch_v11(&mut client, &wants, (big.bytes.len() + room) as i32).await;
    let second = second_records(&response);
    assert_eq!((second.len, second.partial), (0, None));
    // Room for its first batch and a bit: that batch whole, the next one
    // cut at exactly what is left.
    let response = fetch_v11(&mut client, &wants, (2 * big.bytes.len() + room) as i32).await;
    let second = second_records(&response);
    assert_eq!(second.batches, vec![0]);
    assert_eq!(
        second.partial,
        Some((Some(10), room, Some(small.bytes.len())))
    );
    // An empty first partition does not use up "min one batch".
    cluster
        .append("wal", 0, small.bytes.clone())
        .expect("append");
    let wants = [
        Want::new("wal", id, 0, 12, 1 << 20),
        Want::new("wal", id, 1, 0, 10),
    ];
    let response = fetch_v11(&mut client, &wants, 10).await;
    let lens = record_lens(&response);
    assert_eq!(lens, vec![0, big.bytes.len()]);
}

/// KIP-541: the broker's `fetch.max.bytes` caps a response whatever the
/// request asks for; the first batch still comes whole, and the partitions
/// past the cap get nothing, nor does one whose first batch would be cut.
#[tokio::test]
async fn the_brokers_fetch_max_bytes_caps_a_response_as_kip_541_says() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 2).expect("create");
    let big = batch(10, 100, 0);
    for p in 0..2 {
        for _ in 0..3 {
            cluster.append("wal", p, big.bytes.clone()).expect("append");
        }
    }
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let wants = [
        Want::new("wal", id, 0, 0, 1 << 20),
        Want::new("wal", id, 1, 0, 1 << 20),
    ];
    assert_eq!(walfetch_testkit::KAFKA_FETCH_MAX_BYTES, 55 << 20);
    let len = big.bytes.len();
    let half = len / 2;
    let cases = [
        // Kafka's default, 55 MiB: everything asked for.
        (
            walfetch_testkit::KAFKA_FETCH_MAX_BYTES,
            vec![3 * len, 3 * len],
        ),
        // One byte: the first batch of the first partition, whole.
        (1, vec![len, 0]),
        // Two batches and a half: the first partition is cut there, and
        // the second gets nothing.
        (2 * len + half, vec![2 * len + half, 0]),
        // Three batches and a half: what is left is less than the second
        // partition's first batch, which gets nothing (not a cut batch).
        (3 * len + half, vec![3 * len, 0]),
        // Four batches and a half: the second partition's first batch
        // whole, the next cut at what is left.
        (4 * len + half, vec![3 * len, len + half]),
    ];
    for (cap, want) in cases {
        cluster.set_fetch_max_bytes(1, cap).expect("broker");
        let response = fetch_v11(&mut client, &wants, 8 << 20).await;
        let got: Vec<usize> = response
            .responses
            .iter()
            .map(|t| t.partitions[0].records.as_ref().map_or(0, Bytes::len))
            .collect();
        assert_eq!(got, want, "fetch.max.bytes {cap}");
    }
    assert!(cluster.set_fetch_max_bytes(9, 1).is_err(), "no broker 9");
}

#[tokio::test]
async fn fetch_read_committed_stops_at_lso_and_lists_aborted_transactions() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let append = |b: Bytes| cluster.append("wal", 0, b).expect("append");
    append(batch(2, 10, 0).bytes); // 0..=1
    append(txn_batch(7, 2)); // 2..=3 pid 7
    append(batch(1, 10, 0).bytes); // 4
    append(marker(7, ControlType::Abort)); // 5
    append(txn_batch(8, 2)); // 6..=7 pid 8, committed later
    append(txn_batch(9, 1)); // 8 pid 9, still open
    append(marker(8, ControlType::Commit)); // 9
    append(batch(1, 10, 0).bytes); // 10
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    for version in [4, 11, 12, 17] {
        let request = fetch_request(version, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(
            (p.high_watermark, p.last_stable_offset),
            (11, 8),
            "v{version}"
        );
        let fetched = decode_records(p.records.as_ref().expect("records"));
        assert_eq!(
            fetched.batches,
            vec![0, 2, 4, 5, 6],
            "v{version}: stops before the LSO"
        );
        let aborted: Vec<_> = p
            .aborted_transactions
            .as_ref()
            .expect("read_committed: a list")
            .iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect();
        assert_eq!(aborted, vec![(7, 2)]);
        // From past the aborted transaction: none overlaps.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 6, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(p.aborted_transactions.as_ref().map(Vec::len), Some(0));
        // At the LSO: empty, no error.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 8, 1 << 20)], 1 << 20, 1);
        let response = client.call(version, &request).await.expect("Fetch");
        let p = only_partition(&response);
        assert_eq!(
            (p.error_code, p.records.as_ref().map(Bytes::len)),
            (0, Some(0))
        );
        // read_uncommitted sees everything.
        let request = fetch_request(version, &[Want::new("wal", id, 0, 8, 1 << 20)], 1 << 20, 0);
        let response = client.call(version, &request).await.expect("Fetch");
        let fetched = only_records(&response);
        assert_eq!(fetched.batches, vec![8, 9, 10]);
    }
}

#[tokio::test]
async fn fetch_waits_for_min_bytes_until_an_append_or_max_wait() {
    let cluster = ScriptedCluster::start(1).await.expect("start");
    let id = cluster.create_topic("wal", 1).expect("create");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    request.min_bytes = 1;
    request.max_wait_ms = 300;
    // Nothing arrives: an empty answer after max_wait.
    let started = Instant::now();
    let response = client.call(12, &request).await.expect("Fetch");
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(
        only_partition(&response).records.as_ref().map(Bytes::len),
        Some(0)
    );
    // An append wakes the fetch long before max_wait.
    request.max_wait_ms = 30_000;
    let started = Instant::now();
    let id = client.send(12, &request).await.expect("send");
    tokio::time::sleep(Duration::from_millis(100)).await;
    cluster
        .append("wal", 0, batch(2, 10, 0).bytes)
        .expect("append");
    let response = client.recv::<FetchRequest>(12, id).await.expect("Fetch");
    assert!(started.elapsed() < Duration::from_secs(10));
    let fetched = only_records(&response);
    assert_eq!(fetched.offsets, vec![0, 1]);
    // min_bytes 0 answers at once.
    request.min_bytes = 0;
    request.topics[0].partitions[0].fetch_offset = 2;
    let started = Instant::now();
    client.call(12, &request).await.expect("Fetch");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A v11 fetch of `wants` with the response limit `max_bytes`, no wait.
async fn fetch_v11(client: &mut RawClient, wants: &[Want<'_>], max_bytes: i32) -> FetchResponse {
    client
        .call(11, &fetch_request(11, wants, max_bytes, 0))
        .await
        .expect("Fetch")
}

/// What the second topic's first partition of `response` got.
fn second_records(response: &FetchResponse) -> Fetched {
    decode_records(
        response.responses[1].partitions[0]
            .records
            .as_ref()
            .expect("records"),
    )
}

/// The bytes of records each topic's first partition got in `response`.
fn record_lens(response: &FetchResponse) -> Vec<usize> {
    response
        .responses
        .iter()
        .map(|t| t.partitions[0].records.as_ref().map_or(0, Bytes::len))
        .collect()
}
