//! The cluster at runtime: leadership moves, and the counters of requests, bytes and connections.

use crate::common::*;

#[tokio::test]
async fn leadership_moves_at_runtime() {
    let (cluster, id) = wal_cluster(3, 1, &[(2, 10)]).await;
    let mut one = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut three = RawClient::connect(cluster.addr(3).expect("addr")).await;
    let request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    assert_eq!(
        only_partition(&one.call(12, &request).await.expect("Fetch")).error_code,
        0
    );
    let leader = cluster.move_leader("wal", 0, 3).expect("move");
    assert_eq!((leader.node_id, leader.epoch), (3, 1));
    assert_eq!(
        only_partition(&one.call(12, &request).await.expect("Fetch")).error_code,
        code(ResponseError::NotLeaderOrFollower)
    );
    let p = three.call(12, &request).await.expect("Fetch");
    assert_eq!(only_records(&p).offsets, vec![0, 1]);
    // Appends now carry the new epoch.
    cluster
        .append("wal", 0, batch(1, 10, 0).bytes)
        .expect("append");
    let log = cluster.log("wal", 0).expect("log");
    let epochs: Vec<_> = log
        .batches()
        .iter()
        .map(|b| b.header.partition_leader_epoch)
        .collect();
    assert_eq!(epochs, vec![0, 1]);
    assert!(cluster.move_leader("wal", 0, 9).is_err());
}

#[tokio::test]
async fn counters_count_requests_bytes_and_connections() {
    let (cluster, id) = wal_cluster(2, 1, &[(5, 100)]).await;
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut other = RawClient::connect(cluster.addr(1).expect("addr")).await;
    client
        .call(3, &ApiVersionsRequest::default())
        .await
        .expect("ApiVersions");
    let request = fetch_request(12, &[Want::new("wal", id, 0, 0, 1 << 20)], 1 << 20, 0);
    client.call(12, &request).await.expect("Fetch");
    client.call(12, &request).await.expect("Fetch");
    other
        .call(9, &MetadataRequest::default())
        .await
        .expect("Metadata");
    let stats = cluster.stats(1).expect("stats");
    assert_eq!(stats.connections, 2);
    assert_eq!(stats.requests_of(ApiKey::Fetch), 2);
    assert_eq!(stats.requests_of(ApiKey::ApiVersions), 1);
    assert_eq!(stats.requests_of(ApiKey::Metadata), 1);
    assert_eq!(stats.total_requests(), 4);
    assert_eq!(
        stats.bytes_sent,
        client.bytes_received + other.bytes_received
    );
    assert_eq!(stats.bytes_received, client.bytes_sent + other.bytes_sent);
    assert_eq!(cluster.stats(2).map(|s| s.total_requests()), Some(0));
    cluster.reset_stats();
    assert_eq!(cluster.stats(1).map(|s| s.bytes_sent), Some(0));
}
