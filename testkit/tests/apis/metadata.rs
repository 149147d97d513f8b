//! Metadata: the advertised address, brokers that stop, start and move, every version, auto-created topics.

use crate::common::*;

#[tokio::test]
async fn metadata_advertises_the_address_it_is_given() {
    // A proxy in front of broker 1: clients that follow the metadata go
    // through it. Broker 2 has none and advertises its listener.
    let proxy: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let cluster = ScriptedCluster::builder()
        .brokers(2)
        .advertised_addrs([proxy])
        .start()
        .await
        .expect("start");
    let listener = cluster.addr(1).expect("broker 1");
    assert_ne!(listener, proxy, "the listener itself is unchanged");
    let mut client = RawClient::connect(listener).await;
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = client.call(12, &request).await.expect("Metadata v12");
    let brokers: Vec<_> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    let second = cluster.addr(2).expect("broker 2");
    assert_eq!(
        brokers,
        vec![
            (1, "127.0.0.1".to_string(), 9),
            (2, "127.0.0.1".to_string(), i32::from(second.port())),
        ]
    );
}

/// Each broker's node id and port, as Metadata v12 gives them.
async fn broker_ports(client: &mut RawClient) -> Vec<(i32, i32)> {
    let mut request = MetadataRequest::default();
    request.topics = None;
    let response = client.call(12, &request).await.expect("Metadata v12");
    response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.port))
        .collect()
}

/// A stopped broker refuses connections and closes those it had; the
/// others still name it in Metadata. Started again it listens at its
/// address; restarted elsewhere, Metadata gives its new address and the
/// old one is refused.
#[tokio::test]
async fn a_broker_stops_starts_and_moves_to_another_address() {
    let cluster = ScriptedCluster::start(2).await.expect("start");
    let first = cluster.addr(1).expect("broker 1");
    let mut open = RawClient::connect(first).await;
    cluster.stop_broker(1).await.expect("stop");
    assert!(open.is_closed().await, "a connection survived the crash");
    assert!(tokio::net::TcpStream::connect(first).await.is_err());
    let mut other = RawClient::connect(cluster.addr(2).expect("broker 2")).await;
    let port = |a: std::net::SocketAddr| i32::from(a.port());
    assert_eq!(broker_ports(&mut other).await[0], (1, port(first)));
    assert_eq!(cluster.start_broker(1).await.expect("start"), first);
    let mut again = RawClient::connect(first).await;
    assert_eq!(broker_ports(&mut again).await[0], (1, port(first)));
    let moved = cluster.restart_broker_elsewhere(1).await.expect("move");
    assert_ne!(moved, first);
    assert_eq!(cluster.addr(1), Some(moved));
    assert!(again.is_closed().await);
    assert!(tokio::net::TcpStream::connect(first).await.is_err());
    assert_eq!(broker_ports(&mut other).await[0], (1, port(moved)));
    assert!(cluster.stop_broker(9).await.is_err());
}

#[tokio::test]
async fn metadata_every_version() {
    let cluster = ScriptedCluster::start(3).await.expect("start");
    let id = cluster.create_topic("wal", 4).expect("create");
    cluster.create_topic("other", 1).expect("create");
    cluster.move_leader("wal", 1, 3).expect("move");
    let mut client = RawClient::connect(cluster.addr(2).expect("addr")).await;
    for version in 1..=12 {
        // All topics.
        let mut request = MetadataRequest::default();
        request.topics = None;
        let response = client
            .call(version, &request)
            .await
            .unwrap_or_else(|e| panic!("Metadata v{version}: {e:?}"));
        let brokers: Vec<_> = response
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.port))
            .collect();
        let expected: Vec<_> = cluster
            .addrs()
            .iter()
            .map(|(id, a)| (*id, i32::from(a.port())))
            .collect();
        assert_eq!(brokers, expected, "v{version}");
        assert!(response
            .brokers
            .iter()
            .all(|b| b.host.as_str() == "127.0.0.1"));
        assert_eq!(response.controller_id.0, 1);
        let names: Vec<_> = response
            .topics
            .iter()
            .map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .collect();
        assert_eq!(
            names,
            vec![Some("other".into()), Some("wal".into())],
            "v{version}"
        );
        let wal = &response.topics[1];
        assert_eq!(wal.error_code, 0);
        assert_eq!(wal.partitions.len(), 4);
        let leaders: Vec<_> = wal.partitions.iter().map(|p| p.leader_id.0).collect();
        assert_eq!(
            leaders,
            vec![1, 3, 3, 1],
            "round robin, partition 1 moved to 3"
        );
        assert!(wal
            .partitions
            .iter()
            .all(|p| p.replica_nodes.len() == 3 && p.isr_nodes.len() == 3));
        if version >= 7 {
            let epochs: Vec<_> = wal.partitions.iter().map(|p| p.leader_epoch).collect();
            assert_eq!(epochs, vec![0, 1, 0, 0]);
        }
        if version >= 10 {
            assert_eq!(wal.topic_id, id);
        }
        // One named topic, and an unknown one.
        let mut request = MetadataRequest::default();
        let mut wanted = MetadataRequestTopic::default();
        wanted.name = Some(name("wal"));
        let mut unknown = MetadataRequestTopic::default();
        unknown.name = Some(name("nope"));
        request.topics = Some(vec![wanted, unknown]);
        if version >= 4 {
            request.allow_auto_topic_creation = false;
        }
        let response = client.call(version, &request).await.expect("Metadata");
        assert_eq!(response.topics.len(), 2);
        assert_eq!(response.topics[0].partitions.len(), 4);
        assert_eq!(
            response.topics[1].error_code,
            code(ResponseError::UnknownTopicOrPartition)
        );
    }
    // v12: topics by id.
    let mut request = MetadataRequest::default();
    let mut by_id = MetadataRequestTopic::default();
    by_id.name = None;
    by_id.topic_id = id;
    let mut bad_id = MetadataRequestTopic::default();
    bad_id.name = None;
    bad_id.topic_id = Uuid::from_u128(42);
    request.topics = Some(vec![by_id, bad_id]);
    let response = client.call(12, &request).await.expect("Metadata v12");
    assert_eq!(
        response.topics[0].name.as_ref().map(|n| n.0.as_str()),
        Some("wal")
    );
    assert_eq!(
        response.topics[1].error_code,
        code(ResponseError::UnknownTopicId)
    );
}

#[tokio::test]
async fn metadata_auto_creates_topics_when_enabled() {
    let cluster = ScriptedCluster::builder()
        .auto_create_topics(true)
        .default_partitions(2)
        .start()
        .await
        .expect("start");
    let mut client = RawClient::connect(cluster.addr(1).expect("addr")).await;
    let mut request = MetadataRequest::default();
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(name("fresh"));
    request.topics = Some(vec![wanted]);
    let first = client.call(9, &request).await.expect("Metadata");
    assert_eq!(
        first.topics[0].error_code,
        code(ResponseError::LeaderNotAvailable)
    );
    let second = client.call(9, &request).await.expect("Metadata");
    assert_eq!(second.topics[0].error_code, 0);
    assert_eq!(second.topics[0].partitions.len(), 2);
    // Not when the client says so (v4+).
    let mut wanted = MetadataRequestTopic::default();
    wanted.name = Some(name("not-created"));
    request.topics = Some(vec![wanted]);
    request.allow_auto_topic_creation = false;
    let response = client.call(9, &request).await.expect("Metadata");
    assert_eq!(
        response.topics[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(cluster.topics(), vec!["fresh".to_string()]);
}
