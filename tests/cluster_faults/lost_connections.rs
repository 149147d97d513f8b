//! Lost connections on every API: retried to the right result; a garbled first frame is not a Kafka broker.

use crate::common::*;

#[tokio::test]
async fn fetch_retries_every_lost_connection_and_returns_the_appended_records() {
    let s = setup().await;
    for action in connection_faults() {
        s.fails_once_on_broker_1(ApiKey::Fetch, &action);
        let fetched = s.fetches_every_record(&action).await;
        assert_eq!(fetched.broker, s.addr(1));
        let stats = s.stats(1);
        assert_eq!(
            (
                stats.requests_of(ApiKey::Fetch),
                stats.connections,
                stats.requests_of(ApiKey::ApiVersions),
            ),
            (2, 1, 1),
            "{action:?}: one retry, on one new connection"
        );
        assert_eq!(s.requests(ApiKey::Metadata), 1, "{action:?}: one refresh");
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn list_offsets_retries_every_lost_connection_and_returns_the_offset() {
    let s = setup().await;
    for action in connection_faults() {
        s.fails_once_on_broker_1(ApiKey::ListOffsets, &action);
        s.lists_the_latest_offset(&action).await;
        let stats = s.stats(1);
        assert_eq!(
            (stats.requests_of(ApiKey::ListOffsets), stats.connections),
            (2, 1),
            "{action:?}: one retry, on one new connection"
        );
        s.assert_fault_fired(&action);
    }
}

/// A Metadata request that loses its connection while the client looks a
/// leader up is sent again (to the next broker it knows), and the
/// operation then goes to the leader.
#[tokio::test]
async fn leader_lookup_retries_every_lost_connection_on_metadata() {
    let s = setup().await;
    for action in connection_faults() {
        s.leader_lookup_fails(1, &action);
        let fetched = s.fetches_every_record(&action).await;
        assert_eq!(fetched.broker, s.addr(1));
        assert_eq!(
            (s.requests(ApiKey::Metadata), s.requests(ApiKey::Fetch)),
            (2, 1),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// Whether `action` on the first response of a connection (the
/// ApiVersions answer) makes the peer not a Kafka broker: a length prefix
/// that is negative or past any ApiVersions answer (1 MiB).
fn garbles_the_first_frame(action: &FaultAction) -> bool {
    matches!(action, FaultAction::OversizedFrame { length } if *length > 1 << 20)
}

/// Bootstrap survives every lost connection on its ApiVersions handshake
/// and on its first Metadata request.
#[tokio::test]
async fn bootstrap_retries_every_lost_connection_on_api_versions_and_metadata() {
    for api in [ApiKey::ApiVersions, ApiKey::Metadata] {
        for action in connection_faults() {
            if api == ApiKey::ApiVersions && garbles_the_first_frame(&action) {
                continue;
            }
            let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
            scripted.script(Fault::on(api).then(action.clone()));
            let cluster = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
                .await
                .unwrap_or_else(|e| panic!("{api:?} {action:?}: {e}"));
            let stats = scripted.stats(1).expect("broker");
            assert_eq!(
                (stats.requests_of(api), stats.connections),
                (2, 2),
                "{api:?} {action:?}: one retry, on a new connection"
            );
            assert!(scripted.pending_faults().is_empty());
            assert_eq!(
                cluster.cached_metadata().brokers.len(),
                1,
                "{api:?} {action:?}"
            );
        }
    }
}

/// An absurd or negative length prefix as the answer to ApiVersions, the
/// first frame of a connection, is a peer that is not a Kafka broker: the
/// bootstrap fails at once with [`ConnectionError::NotKafka`] showing the
/// bytes, and is not retried.
#[tokio::test]
async fn a_garbled_first_frame_is_not_a_kafka_broker_and_not_retried() {
    for action in connection_faults()
        .into_iter()
        .filter(garbles_the_first_frame)
    {
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(Fault::on(ApiKey::ApiVersions).then(action.clone()));
        let error = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
            .await
            .expect_err("not Kafka");
        let inner = match &error {
            ClientError::NoBrokerAnswered { last, .. } => last.as_ref(),
            other => panic!("{action:?}: {other:?}"),
        };
        let FaultAction::OversizedFrame { length } = action else {
            unreachable!()
        };
        let prefix: Vec<String> = length
            .to_be_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        match inner {
            ClientError::Connection(ConnectionError::NotKafka { broker, answered }) => {
                assert_eq!(broker, &scripted.bootstrap());
                assert!(
                    answered.starts_with(&format!("bytes {}", prefix.join(" "))),
                    "{answered}"
                );
            }
            other => panic!("{action:?}: {other:?}"),
        }
        assert!(
            error.to_string().contains("is not a Kafka broker"),
            "{error}"
        );
        let stats = scripted.stats(1).expect("broker");
        assert_eq!(
            stats.requests_of(ApiKey::ApiVersions),
            1,
            "{action:?}: not retried"
        );
    }
}

/// The same garbled first frame from a broker the cluster already talks
/// to, on a new connection after the last was cut, is a stream corrupted on
/// the way, not a wrong address: the operation is retried on another
/// connection and succeeds (found by the fault soak, where a recovery
/// ended with "is not a Kafka broker").
#[tokio::test]
async fn a_garbled_first_frame_on_a_new_connection_to_a_known_broker_is_retried() {
    let s = setup().await;
    let fetched = s.fetch().await.expect("fetch");
    assert_eq!(decode(&fetched.records), s.records);
    s.scripted.reset_stats();
    s.scripted.script(
        Fault::on(ApiKey::Fetch)
            .broker(1)
            .then(FaultAction::CutAfterResponse),
    );
    s.scripted.script(
        Fault::on(ApiKey::ApiVersions)
            .broker(1)
            .then(FaultAction::OversizedFrame {
                length: 0x7fff_ffff,
            }),
    );
    for _ in 0..2 {
        let fetched = s.fetch().await.expect("fetch");
        assert_eq!(decode(&fetched.records), s.records);
    }
    s.assert_fault_fired(&"a cut, then a garbled ApiVersions answer");
    assert_eq!(s.stats(1).requests_of(ApiKey::ApiVersions), 2, "retried");
}

/// A connection cut right after a complete response: the response counts,
/// and the next operation finds the connection gone (the broker's close
/// follows the response at once, so the client's reader sees it before
/// the test's next request) and opens a new one — a Produce too, which
/// could not be resent had it gone out on the closing connection.
#[tokio::test]
async fn a_connection_cut_after_a_response_is_replaced_by_the_next_operation() {
    let s = setup().await;
    for api in [
        ApiKey::Metadata,
        ApiKey::ListOffsets,
        ApiKey::Fetch,
        ApiKey::Produce,
    ] {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        s.scripted
            .script(Fault::on(api).broker(1).then(FaultAction::CutAfterResponse));
        let written = log_records(&s.scripted, 0);
        let next = i64::try_from(written.len()).expect("small");
        // The faulted operation, then one more of the same.
        for round in 0..2 {
            match api {
                ApiKey::Metadata => {
                    let fetched = s.fetch().await.expect("fetch");
                    assert_eq!(decode(&fetched.records), s.records);
                }
                ApiKey::ListOffsets => {
                    assert_eq!(s.latest(0).await.expect("list_offsets"), Some(next));
                }
                ApiKey::Fetch => {
                    let fetched = s.fetch().await.expect("fetch");
                    assert_eq!(decode(&fetched.records), s.records);
                }
                _ => {
                    let value = Bytes::from(format!("after cut {round}"));
                    let base = s.produce(0, batch(&[value])).await.expect("produce");
                    assert_eq!(base, next + round);
                }
            }
        }
        s.assert_fault_fired(&api);
        assert_eq!(s.stats(1).connections, 1, "{api:?}: one new connection");
        if api == ApiKey::Produce {
            let log = log_records(&s.scripted, 0);
            assert_eq!(log.len(), written.len() + 2, "each batch written once");
        }
    }
}
