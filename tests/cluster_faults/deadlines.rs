//! Timers: slow replies, faults that never stop, and the deadline that ends them.

use crate::common::*;

/// A reply within the request timeout is waited for. A reply slower than
/// the request timeout: the request times out, its connection is dropped,
/// and the retry on a new connection succeeds, after the timeout plus one
/// backoff — or, for Metadata, at once from the next broker the client
/// knows. The same holds for the ApiVersions handshake at bootstrap.
#[tokio::test(start_paused = true)]
async fn a_reply_slower_than_the_request_timeout_is_retried_and_a_faster_one_awaited() {
    let s = setup().await;
    let backoff = Duration::from_millis(10);
    for api in [ApiKey::Metadata, ApiKey::ListOffsets, ApiKey::Fetch] {
        let timeout = if api == ApiKey::Fetch {
            REQUEST_TIMEOUT + MAX_WAIT
        } else {
            REQUEST_TIMEOUT
        };
        for delay in [REQUEST_TIMEOUT / 2, FOREVER] {
            s.cluster.invalidate(TOPIC);
            // Look the leader up first unless Metadata is the one delayed.
            if api != ApiKey::Metadata {
                s.cluster.leader(TOPIC, 0).await.expect("leader");
            }
            s.scripted.reset_stats();
            let mut fault = Fault::on(api).broker(1).then(FaultAction::Delay(delay));
            if api == ApiKey::Metadata {
                fault = fault.topic(TOPIC);
            }
            s.scripted.script(fault);
            let started = Instant::now();
            if api == ApiKey::ListOffsets {
                assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
            } else {
                let fetched = s.fetch().await.expect("fetch");
                assert_eq!(decode(&fetched.records), s.records);
            }
            let (elapsed, requests, connections) = match (delay, api) {
                (FOREVER, ApiKey::Metadata) => (timeout, 2, 1),
                (FOREVER, _) => (timeout + backoff, 2, 1),
                _ => (delay, 1, 0),
            };
            assert_eq!(started.elapsed(), elapsed, "{api:?} {delay:?}");
            assert_eq!(s.requests(api), requests, "{api:?} {delay:?}");
            assert_eq!(
                s.stats(1).connections,
                connections,
                "{api:?} {delay:?}: new connections to broker 1"
            );
            s.assert_fault_fired(&api);
        }
    }
    // The ApiVersions handshake that opens a connection, at bootstrap.
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.script(Fault::on(ApiKey::ApiVersions).then(FaultAction::Delay(FOREVER)));
    let started = Instant::now();
    Cluster::connect(client_config(&scripted))
        .await
        .expect("connects on the retry");
    assert_eq!(started.elapsed(), REQUEST_TIMEOUT + backoff);
    let stats = scripted.stats(1).expect("broker");
    assert_eq!(
        (stats.requests_of(ApiKey::ApiVersions), stats.connections),
        (2, 2)
    );
}

/// Asserts that `error` is `RetriesExhausted` after more than one attempt
/// within [`DEADLINE`], and returns its last failure.
fn exhausted(what: &str, error: &ClientError, elapsed: Duration) -> Option<ClientError> {
    assert!(elapsed <= DEADLINE, "{what}: took {elapsed:?}");
    match error {
        ClientError::RetriesExhausted {
            attempts,
            elapsed: reported,
            deadline,
            last,
            ..
        } => {
            assert!(*attempts > 1, "{what}: {error}");
            assert!(*reported <= DEADLINE, "{what}: {error}");
            assert_eq!(*deadline, DEADLINE);
            last.as_deref().cloned()
        }
        other => panic!("{what}: {other:?}"),
    }
}

/// Faults that never stop end every operation in `RetriesExhausted` by
/// the deadline, whose message says what was tried and the last failure.
#[tokio::test(start_paused = true)]
async fn a_fault_that_never_stops_ends_in_retries_exhausted_by_the_deadline() {
    type Check = fn(&ClientError) -> bool;
    let lost: Check = |e| matches!(e, ClientError::Connection(e) if e.is_connection_lost());
    let timed_out: Check = |e| {
        matches!(
            e,
            ClientError::Connection(ConnectionError::RequestTimeout { .. })
        )
    };
    let not_leader: Check = |e| e.code() == Some(ErrorCode::NotLeaderOrFollower);
    let metadata_lost: Check = |e| {
        matches!(e, ClientError::NoBrokerAnswered { last, .. }
            if matches!(**last, ClientError::Connection(ref c) if c.is_connection_lost()))
    };
    let leader_unknown: Check = |e| {
        matches!(
            e,
            ClientError::Kafka {
                api: ApiKey::Metadata,
                code: ErrorCode::LeaderNotAvailable,
                ..
            }
        )
    };
    let cases: Vec<(ApiKey, FaultAction, Check)> = vec![
        (ApiKey::Fetch, FaultAction::PartitionError(6), not_leader),
        (ApiKey::Fetch, FaultAction::CutBeforeResponse, lost),
        (
            ApiKey::Fetch,
            FaultAction::OversizedFrame {
                length: 0xFFFF_FFFF,
            },
            lost,
        ),
        // Each attempt waits out its request timeout (1.1 s): the deadline
        // strikes in the third, which reports the second's timeout.
        (ApiKey::Fetch, FaultAction::Delay(FOREVER), timed_out),
        (
            ApiKey::ListOffsets,
            FaultAction::PartitionError(6),
            not_leader,
        ),
        (ApiKey::ListOffsets, FaultAction::DropRequest, lost),
        (ApiKey::Metadata, FaultAction::TopicError(5), leader_unknown),
        (ApiKey::Metadata, FaultAction::DropRequest, metadata_lost),
        (ApiKey::Produce, FaultAction::PartitionError(6), not_leader),
    ];
    for (api, action, check) in cases {
        let what = format!("{api:?} {action:?}");
        let s = setup().await;
        s.cluster.invalidate(TOPIC);
        let mut fault = Fault::on(api).times(u32::MAX).then(action.clone());
        if api == ApiKey::Metadata {
            fault = fault.topic(TOPIC);
        }
        s.scripted.script(fault);
        let started = Instant::now();
        let result = match api {
            ApiKey::ListOffsets => s.latest(0).await.map(|_| ()),
            ApiKey::Produce => s
                .produce(0, batch(&[Bytes::from_static(b"never")]))
                .await
                .map(|_| ()),
            _ => s.fetch().await.map(|_| ()),
        };
        let error = result.expect_err(&what);
        let last = exhausted(&what, &error, started.elapsed());
        match last {
            Some(last) => assert!(check(&last), "{what}: {last:?}"),
            None => panic!("{what}: no last failure in {error:?}"),
        }
        if matches!(action, FaultAction::Delay(_)) {
            assert_eq!(started.elapsed(), DEADLINE, "{what}");
            assert!(
                matches!(error, ClientError::RetriesExhausted { attempts: 3, .. }),
                "{what}: {error}"
            );
        }
        let message = error.to_string();
        assert!(message.starts_with("gave up on "), "{message}");
        assert!(
            message.contains(&format!("topic {TOPIC:?} partition 0")),
            "{message}"
        );
        assert_eq!(
            log_records(&s.scripted, 0),
            s.records,
            "{what}: nothing written"
        );
    }
}

/// Bootstrap against a broker whose handshake or Metadata always fails
/// gives up by the deadline, naming the broker.
#[tokio::test(start_paused = true)]
async fn bootstrap_against_a_broker_that_always_fails_gives_up_by_the_deadline() {
    let cases = [
        (ApiKey::ApiVersions, FaultAction::CutBeforeResponse),
        (ApiKey::ApiVersions, FaultAction::Delay(FOREVER)),
        (
            ApiKey::Metadata,
            FaultAction::CutDuringResponse { bytes: None },
        ),
    ];
    for (api, action) in cases {
        let what = format!("{api:?} {action:?}");
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(Fault::on(api).times(u32::MAX).then(action));
        let started = Instant::now();
        let mut config = client_config(&scripted);
        config.bootstrap_deadline = DEADLINE;
        let error = Cluster::connect(config).await.expect_err(&what);
        exhausted(&what, &error, started.elapsed());
        let message = error.to_string();
        assert!(message.contains("gave up on bootstrap"), "{message}");
        assert!(message.contains(&scripted.bootstrap()), "{message}");
    }
}

/// A broker that stops answering on a connection it keeps open (a stuck
/// request handler, a stopped process): the operation's deadline came
/// before the request's own timeout (a Fetch's is the request timeout
/// plus its wait), the attempt was dropped, and the connection stayed in
/// the pool as if healthy, so every later fetch waited on it too, even
/// after the partition's leader moved. The deadline now ends the request
/// as a timeout, which drops the connection. With the CLI's
/// `--timeout` (`ClusterConfig::with_timeout`) and with the defaults.
#[tokio::test(start_paused = true)]
async fn a_connection_that_stops_answering_is_dropped_at_the_deadline() {
    for timeout in [Some(Duration::from_secs(3)), None] {
        let scripted = ScriptedCluster::start(2).await.unwrap();
        scripted.create_topic(TOPIC, 1).unwrap();
        scripted
            .append(TOPIC, 0, batch(&[Bytes::from_static(b"x")]))
            .unwrap();
        let config = ClusterConfig::new([scripted.bootstrap()]);
        let config = match timeout {
            Some(t) => config.with_timeout(t),
            None => config,
        };
        let cluster = Cluster::connect(config).await.unwrap();
        let params = FetchParams::new(TOPIC, 0, 0).with_max_wait(Duration::from_millis(100));
        cluster.fetch(&params).await.expect("a first fetch");
        scripted.script(
            Fault::on(ApiKey::Fetch)
                .broker(1)
                .then(FaultAction::Delay(Duration::from_secs(3600))),
        );
        let hung = cluster.fetch(&params).await;
        assert!(
            matches!(hung, Err(ClientError::RetriesExhausted { .. })),
            "{timeout:?}: {hung:?}"
        );
        scripted.move_leader(TOPIC, 0, 2).unwrap();
        for i in 0..3 {
            let fetched = cluster.fetch(&params).await;
            assert!(
                fetched.is_ok(),
                "{timeout:?}, fetch {i} after the hang: {fetched:?}"
            );
        }
    }
}
