//! The connection layer: each fault's own error, requests in flight when a connection breaks, timeouts.

use crate::common::*;

async fn connection_to(scripted: &ScriptedCluster, request_timeout: Duration) -> Connection {
    let config = ConnectionConfig {
        request_timeout,
        ..ConnectionConfig::default()
    };
    within(
        HANG,
        "Connection::connect",
        Connection::connect(scripted.bootstrap(), config),
    )
    .await
    .expect("connects")
}

#[tokio::test]
async fn each_broken_response_breaks_the_connection_with_its_own_error() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    for action in connection_faults() {
        // A long request timeout: every failure below is the connection's.
        let connection = connection_to(&s.scripted, Duration::from_secs(60)).await;
        s.scripted
            .script(Fault::on(ApiKey::Fetch).then(action.clone()));
        let result = within(
            HANG,
            "fetch_on",
            fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
        )
        .await;
        let error = match result {
            Err(ClientError::Connection(e)) => e,
            other => panic!("{action:?}: {other:?}"),
        };
        assert!(is_error_of(&action, &error), "{action:?}: {error:?}");
        assert!(error.is_connection_lost(), "{action:?}: {error}");
        assert!(!error.is_before_send(), "{action:?}: {error}");
        assert_eq!(error.broker(), s.addr(1));
        assert!(
            error.to_string().contains(&s.addr(1)),
            "{action:?}: {error}"
        );
        // The connection is broken for good: the next request fails at
        // once with the same error, without reaching the broker.
        assert!(connection.is_closed(), "{action:?}");
        let failure = connection.failure().expect("failure kept");
        assert_eq!(failure.to_string(), error.to_string());
        let fetches = s.stats(1).requests_of(ApiKey::Fetch);
        let again = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
            .await
            .expect_err("broken connection");
        assert_eq!(again.to_string(), error.to_string(), "{action:?}");
        assert_eq!(s.stats(1).requests_of(ApiKey::Fetch), fetches);
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn a_connection_cut_after_a_response_delivers_it_then_fails_what_follows() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    let connection = connection_to(&s.scripted, Duration::from_secs(60)).await;
    s.scripted
        .script(Fault::on(ApiKey::Fetch).then(FaultAction::CutAfterResponse));
    let fetched = within(
        HANG,
        "fetch_on",
        fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
    )
    .await
    .expect("the response before the cut is delivered");
    assert_eq!(decode(&fetched.records), s.records);
    // Whether or not the client saw the close before sending it, the next
    // request fails with the peer's close, promptly.
    let error = within(
        HANG,
        "fetch_on after the cut",
        fetch_on(&connection, &fetch_params(0), -1, topic_id, None),
    )
    .await
    .expect_err("the connection is closed");
    assert!(
        matches!(
            error,
            ClientError::Connection(ConnectionError::ClosedByPeer { .. })
        ),
        "{error:?}"
    );
    assert!(connection.is_closed());
}

/// Six fetches in flight on one connection: the broker holds the first for
/// a second, answers the second, and cuts the connection in the third's
/// response. The first two complete; the other four fail at that moment
/// with the connection's error, not at their (minute-long) timeouts.
#[tokio::test(start_paused = true)]
async fn pipelined_fetches_in_flight_all_fail_at_once_with_the_connections_error() {
    let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
    scripted.create_topic(TOPIC, 6).expect("topic");
    let topic_id = scripted.topic_id(TOPIC).expect("topic id");
    let mut expected = Vec::new();
    for p in 0..6 {
        let values = [Bytes::from(format!("partition {p}"))];
        scripted.append(TOPIC, p, batch(&values)).expect("append");
        expected.push(vec![(0, values[0].clone())]);
    }
    let cuts = [
        FaultAction::CutBeforeResponse,
        FaultAction::CutDuringResponse { bytes: None },
    ];
    for cut in cuts {
        let connection = connection_to(&scripted, Duration::from_secs(60)).await;
        scripted.script(
            Fault::on(ApiKey::Fetch)
                .partition(0)
                .then(FaultAction::Delay(Duration::from_secs(1))),
        );
        scripted.script(Fault::on(ApiKey::Fetch).partition(2).then(cut.clone()));
        let params: Vec<FetchParams> = (0..6)
            .map(|p| FetchParams::new(TOPIC, p, 0).with_max_wait(MAX_WAIT))
            .collect();
        let started = Instant::now();
        let all = futures::future::join_all(
            params
                .iter()
                .map(|p| fetch_on(&connection, p, -1, topic_id, None)),
        );
        tokio::pin!(all);
        tokio::select! {
            _ = &mut all => panic!("{cut:?}: done before the delayed answer"),
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        assert_eq!(connection.stats().in_flight, 6, "{cut:?}: all in flight");
        let results = all.await;
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "{cut:?}: the failures come with the cut"
        );
        for (p, result) in results.iter().enumerate().take(2) {
            let fetched = result
                .as_ref()
                .unwrap_or_else(|e| panic!("{cut:?}: partition {p}: {e}"));
            assert_eq!(decode(&fetched.records), expected[p], "{cut:?}");
        }
        let failure = connection.failure().expect("the connection failed");
        match (&cut, &failure) {
            (FaultAction::CutBeforeResponse, ConnectionError::ClosedByPeer { .. })
            | (FaultAction::CutDuringResponse { .. }, ConnectionError::TruncatedFrame { .. }) => {}
            other => panic!("{other:?}"),
        }
        for (p, result) in results.iter().enumerate().skip(2) {
            match result {
                Err(ClientError::Connection(e)) => {
                    assert_eq!(e.to_string(), failure.to_string(), "{cut:?}: partition {p}");
                }
                other => panic!("{cut:?}: partition {p}: {other:?}"),
            }
        }
        assert_eq!(connection.stats().in_flight, 0, "{cut:?}");
        assert!(scripted.pending_faults().is_empty(), "{cut:?}");
    }
}

/// A request past its own timeout fails alone with `RequestTimeout`; the
/// connection stays up, the broker's late answer to it is dropped, and the
/// next request on the connection gets its own answer.
#[tokio::test(start_paused = true)]
async fn a_request_past_its_timeout_fails_alone_and_its_late_answer_is_dropped() {
    let s = setup().await;
    let topic_id = s.scripted.topic_id(TOPIC).expect("topic id");
    let connection = connection_to(&s.scripted, REQUEST_TIMEOUT).await;
    // Past the first request's timeout (1.1 s), within the second's (2.2 s).
    let delay = Duration::from_secs(2);
    s.scripted
        .script(Fault::on(ApiKey::Fetch).then(FaultAction::Delay(delay)));
    let started = Instant::now();
    let error = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
        .await
        .expect_err("timed out");
    // A Fetch may take the request timeout plus its max_wait.
    let timeout = REQUEST_TIMEOUT + MAX_WAIT;
    assert_eq!(started.elapsed(), timeout);
    match &error {
        ClientError::Connection(ConnectionError::RequestTimeout {
            api: ApiKey::Fetch,
            timeout: t,
            broker,
            ..
        }) => assert_eq!((*t, broker.as_str()), (timeout, s.addr(1).as_str())),
        other => panic!("{other:?}"),
    }
    assert!(!connection.is_closed(), "a timeout breaks nothing");
    // The broker answers in order: the next request's answer comes after
    // the delayed one, which the client drops.
    let fetched = fetch_on(&connection, &fetch_params(0), -1, topic_id, None)
        .await
        .expect("the next request is answered");
    assert_eq!(started.elapsed(), delay);
    assert_eq!(decode(&fetched.records), s.records);
    let stats = connection.stats();
    assert_eq!((stats.in_flight, stats.responses), (0, 2), "{stats:?}");
    // A per-request timeout overrides the connection's.
    s.scripted
        .script(Fault::on(ApiKey::Metadata).then(FaultAction::Delay(Duration::from_millis(500))));
    let started = Instant::now();
    let options = RequestOptions {
        version: None,
        timeout: Some(Duration::from_millis(200)),
    };
    let error = connection
        .request_with(&MetadataRequest::default(), options)
        .await
        .expect_err("timed out");
    assert!(
        matches!(
            error,
            ConnectionError::RequestTimeout { api: ApiKey::Metadata, timeout, .. }
                if timeout == Duration::from_millis(200)
        ),
        "{error:?}"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(200));
    assert!(!connection.is_closed());
}
