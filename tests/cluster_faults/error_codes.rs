//! Error codes: retriable ones are retried (re-reading metadata where they say so), the others surface at once.

use crate::common::*;

#[tokio::test]
async fn fetch_retries_retriable_error_codes_and_returns_the_appended_records() {
    let s = setup().await;
    let mut cases = retriable_partition_errors();
    cases.push((FaultAction::TopicError(6), true));
    // Fetch v7+ has a top-level code: a fetch session error.
    cases.push((FaultAction::ResponseError(70), false));
    for (action, refreshes) in cases {
        s.fails_twice_on_broker_1(ApiKey::Fetch, &action);
        s.fetches_every_record(&action).await;
        assert_eq!(
            (
                s.requests(ApiKey::Fetch),
                s.requests(ApiKey::Metadata),
                s.stats(1).connections,
            ),
            (3, if refreshes { 2 } else { 0 }, 0),
            "{action:?}: two retries on the same connection"
        );
        s.assert_fault_fired(&action);
    }
}

#[tokio::test]
async fn list_offsets_retries_retriable_error_codes_and_returns_the_offset() {
    let s = setup().await;
    let mut cases = retriable_partition_errors();
    cases.push((FaultAction::TopicError(5), true));
    for (action, refreshes) in cases {
        s.fails_twice_on_broker_1(ApiKey::ListOffsets, &action);
        s.lists_the_latest_offset(&action).await;
        assert_eq!(
            (
                s.requests(ApiKey::ListOffsets),
                s.requests(ApiKey::Metadata)
            ),
            (3, if refreshes { 2 } else { 0 }),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// Metadata that names no leader (a partition error), or a topic error,
/// is read again until it names one.
#[tokio::test]
async fn leader_lookup_retries_retriable_metadata_error_codes() {
    let s = setup().await;
    let cases = [
        FaultAction::PartitionError(5),
        FaultAction::PartitionError(6),
        FaultAction::TopicError(5),
        FaultAction::TopicError(3),
        FaultAction::ResponseError(5),
    ];
    for action in cases {
        s.leader_lookup_fails(2, &action);
        s.fetches_every_record(&action).await;
        assert_eq!(
            (s.requests(ApiKey::Metadata), s.requests(ApiKey::Fetch)),
            (3, 1),
            "{action:?}"
        );
        s.assert_fault_fired(&action);
    }
}

/// A leader epoch bump the client has not seen: the broker fences the
/// client's epoch, the client re-reads metadata and retries with the new
/// epoch.
#[tokio::test]
async fn a_stale_leader_epoch_is_fenced_and_retried_with_the_new_one() {
    let s = setup().await;
    let before = s.cluster.leader(TOPIC, 0).await.expect("leader");
    // Same leader, next epoch.
    let now = s.scripted.move_leader(TOPIC, 0, 1).expect("epoch bump");
    assert_eq!(now.epoch, before.leader_epoch + 1);
    let fetched = s.fetch().await.expect("fetch");
    assert_eq!(decode(&fetched.records), s.records);
    assert_eq!(
        (s.requests(ApiKey::Fetch), s.requests(ApiKey::Metadata)),
        (2, 1)
    );
    let leader = s.cluster.leader(TOPIC, 0).await.expect("leader");
    assert_eq!(leader.leader_epoch, now.epoch);

    s.scripted.move_leader(TOPIC, 0, 1).expect("epoch bump");
    s.scripted.reset_stats();
    assert_eq!(s.latest(0).await.expect("list_offsets"), Some(RECORDS));
    assert_eq!(
        (
            s.requests(ApiKey::ListOffsets),
            s.requests(ApiKey::Metadata)
        ),
        (2, 1)
    );
}

/// Non-retriable codes end the operation after one request, though the
/// fault would go on forever.
#[tokio::test]
async fn non_retriable_error_codes_surface_at_once_naming_topic_partition_and_broker() {
    let s = setup().await;
    let cases = [
        (ApiKey::Fetch, FaultAction::PartitionError(29), 29),
        (ApiKey::Fetch, FaultAction::TopicError(29), 29),
        (ApiKey::Fetch, FaultAction::ResponseError(29), 29),
        (ApiKey::Fetch, FaultAction::PartitionError(-1), -1),
        (ApiKey::ListOffsets, FaultAction::PartitionError(29), 29),
        (ApiKey::ListOffsets, FaultAction::PartitionError(-1), -1),
        (ApiKey::Produce, FaultAction::PartitionError(29), 29),
        (ApiKey::Produce, FaultAction::PartitionError(87), 87),
        (ApiKey::Metadata, FaultAction::TopicError(29), 29),
        (ApiKey::Metadata, FaultAction::PartitionError(29), 29),
    ];
    for (api, action, code) in cases {
        s.cluster.invalidate(TOPIC);
        s.scripted.reset_stats();
        let mut fault = Fault::on(api).times(u32::MAX).then(action.clone());
        if api == ApiKey::Metadata {
            fault = fault.topic(TOPIC);
        }
        s.scripted.script(fault);
        let written = log_records(&s.scripted, 0);
        let error = match api {
            ApiKey::ListOffsets => s.latest(0).await.map(|_| ()),
            ApiKey::Produce => s
                .produce(0, batch(&[Bytes::from_static(b"refused")]))
                .await
                .map(|_| ()),
            _ => s.fetch().await.map(|_| ()),
        }
        .expect_err("a non-retriable error");
        // A Metadata error is reported as Metadata's.
        assert_kafka_error(&s, &error, api, code);
        assert_eq!(s.requests(api), 1, "{api:?} {action:?}: not retried");
        assert_eq!(log_records(&s.scripted, 0), written, "nothing written");
        s.scripted.clear_faults();
    }
    // Without a script: a fetch past the end of the log.
    s.scripted.reset_stats();
    let error = within(
        HANG,
        "fetch",
        s.cluster
            .fetch(&FetchParams::new(TOPIC, 0, 100).with_max_wait(MAX_WAIT)),
    )
    .await
    .expect_err("out of range");
    assert_kafka_error(&s, &error, ApiKey::Fetch, 1);
    assert!(error.to_string().contains("offset 100"), "{error}");
    assert_eq!(s.requests(ApiKey::Fetch), 1);
}

/// An ApiVersions answer with an error code is not a lost connection: it
/// fails the handshake at once, naming the broker.
#[tokio::test]
async fn a_handshake_answered_with_an_error_code_fails_at_once() {
    for code in [35, -1] {
        let scripted = ScriptedCluster::start(1).await.expect("scripted cluster");
        scripted.script(
            Fault::on(ApiKey::ApiVersions)
                .times(u32::MAX)
                .then(FaultAction::ResponseError(code)),
        );
        let error = within(HANG, "connect", Cluster::connect(client_config(&scripted)))
            .await
            .expect_err("handshake refused");
        let inner = match &error {
            ClientError::NoBrokerAnswered { last, .. } => match last.as_ref() {
                ClientError::Connection(e) => e.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        match (code, &inner) {
            (
                35,
                ConnectionError::NoCommonVersion {
                    api: ApiKey::ApiVersions,
                    ..
                },
            ) => {}
            (
                -1,
                ConnectionError::Handshake {
                    code: ErrorCode::UnknownServerError,
                    ..
                },
            ) => {}
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains(&scripted.bootstrap()), "{error}");
        let stats = scripted.stats(1).expect("broker");
        assert_eq!(stats.requests_of(ApiKey::ApiVersions), 1, "not retried");
    }
}
